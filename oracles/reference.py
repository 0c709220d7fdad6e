"""The reference side of a judgement, through the op's spec: calling the implementation,
aten as an implementation (with the ``.out`` overloads the reference needs), the expected
result.

The references run with aten's own kernels (``diagfuzz.core.dispatch.aten_only``), on
tensors of their own: the
reference and the implementation never share a buffer.
"""

from __future__ import annotations

from typing import Any

from diagfuzz.core import progress
from diagfuzz.core.case import Case
from diagfuzz.core.dispatch import under_test
from diagfuzz.oracles.aten import aten_with_out
from diagfuzz.specs import spec_of

#: aten's own kernels, ``.out`` overloads included: the reference of
#: error parity (``diagfuzz.impl:aten``, as an impl under test, has no ``.out`` methods).
ATEN = aten_with_out


def call_op(impl: Any, case: Case, args: dict[str, Any]) -> Any:
    """Call ``impl``'s op for ``case`` with ``args`` (``diagfuzz.specs.arguments``), the
    ``.out`` overload when ``args`` holds ``out``: the one call that runs under the
    libraries' registrations (``under_test``); aten as an impl defers them again. Its
    start and end are progress marks: an executor's runner times a stuck call from them."""
    progress.tick()
    try:
        with under_test():
            return spec_of(case.op).call(impl, case, args)
    finally:
        progress.tick()


def expected(case: Case, args: dict[str, Any]) -> tuple[Any, str]:
    """The reference result of a valid Case and where it came from."""
    return spec_of(case.op).reference(case, args)


def differentiable(dtype: Any) -> bool:
    """Whether autograd can differentiate a tensor of ``dtype``."""
    return bool(dtype.is_floating_point or dtype.is_complex)


#: The canary Cases' dtypes: a float, a half, an integer and bool words.
CANARY_DTYPES = ("float32", "float16", "int64", "bool")


def canary_cases() -> list[Case]:
    """A few warm-up Cases per op (``CANARY_DTYPES``, both warm-up layouts): the Cases whose
    references ``fingerprint`` takes."""
    from diagfuzz.specs import all_specs

    return [case for spec in all_specs() for case in spec.warm_up_cases()
            if case.dtype in CANARY_DTYPES]


def fingerprint(device: str) -> list[tuple[str, bytes]]:
    """(Case, bytes) of every canary Case's references, host and device: dtype, shape,
    strides and raw bytes of each, computed with aten's own kernels. Taken before and after
    an implementation loads, equal lists prove that what it registered changes no
    reference."""
    import torch

    from diagfuzz.core.dispatch import aten_only
    from diagfuzz.specs import arguments

    def raw(t: torch.Tensor) -> bytes:
        head = f"{t.dtype}{tuple(t.shape)}{tuple(t.stride())}".encode()
        return head + t.detach().contiguous().cpu().view(torch.uint8).numpy().tobytes()

    found = []
    with aten_only():
        for case in canary_cases():
            spec = spec_of(case.op)
            try:
                expected, _ = spec.reference(case, arguments(case, "cpu"))
                on_device = spec.aten_kernel(case, arguments(case, device))
                found.append((case.describe(), raw(expected) + raw(on_device)))
            except Exception as exc:  # a reference that raises is a reference too
                found.append((case.describe(), f"{type(exc).__name__}: {exc}".encode()))
    return found
