"""The reference side of a judgement, through the op's spec: calling the implementation,
aten as an implementation (with the ``.out`` overloads the reference needs), the expected
result.

The references run with aten's own kernels (``diagfuzz.core.dispatch.aten_only``), on
tensors of their own: the
reference and the implementation never share a buffer.
"""

from __future__ import annotations

from typing import Any

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
    libraries' registrations (``under_test``); aten as an impl defers them again."""
    with under_test():
        return spec_of(case.op).call(impl, case, args)


def expected(case: Case, args: dict[str, Any]) -> tuple[Any, str]:
    """The reference result of a valid Case and where it came from."""
    return spec_of(case.op).reference(case, args)


def differentiable(dtype: Any) -> bool:
    """Whether autograd can differentiate a tensor of ``dtype``."""
    return bool(dtype.is_floating_point or dtype.is_complex)
