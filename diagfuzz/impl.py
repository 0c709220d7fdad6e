"""diagfuzz's built-in implementations, and where ``--impl`` is loaded from.

``diagfuzz.impl:triton_aten`` (the default) reaches diagfuzz's Triton kernels through aten
with the registration on; ``diagfuzz.impl:aten`` is aten itself with the registration off
(a reference and a sanity target). Both provide every op of ``diagfuzz.specs``: each method
calls the op's aten overloads, so a new spec needs nothing here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from diagfuzz.core.dispatch import registration_off
from diagfuzz.core.impl import (
    Impl,
    ImplError,
    declared_dtypes,
    import_roots,
    load_impl,
    provided_ops,
    provides,
    unsupported,
    use_roots,
)
from diagfuzz.specs import all_specs

DEFAULT_IMPL = "diagfuzz.impl:triton_aten"


def _overload(name: str) -> Any:
    """``torch.ops.aten.<name>`` for a name like ``diagonal_copy.out``."""
    packet, _, overload = name.partition(".")
    found = getattr(torch.ops.aten, packet)
    return getattr(found, overload) if overload else found


def _through_aten(functional: str, out_overload: str, enable: bool
                  ) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """The functional and ``.out`` methods of one op: aten's overloads, with diagfuzz's
    kernels registered (``enable``) or switched off."""

    def call(self: Any, *args: Any) -> Any:
        if enable:
            import diagfuzz.ops as ops

            ops.enable()
            return _overload(functional)(*args)
        with registration_off(args):
            return _overload(functional)(*args)

    def call_out(self: Any, *args: Any, out: torch.Tensor) -> Any:
        if enable:
            import diagfuzz.ops as ops

            ops.enable()
            return _overload(out_overload)(*args, out=out)
        with registration_off((*args, out)):
            return _overload(out_overload)(*args, out=out)

    return call, call_out


def _with_every_op(cls: type, enable: bool, out: bool) -> type:
    for spec in all_specs():
        call, call_out = _through_aten(spec.aten[0], spec.aten[1], enable)
        call.__name__, call.__doc__ = spec.method_name, f"aten::{spec.aten[0]}"
        setattr(cls, spec.method_name, call)
        if out:
            call_out.__name__, call_out.__doc__ = spec.out_method, f"aten::{spec.aten[1]}"
            setattr(cls, spec.out_method, call_out)
    return cls


class TritonViaAten:
    """diagfuzz's own Triton kernels, reached through aten with the registration on."""

    uses_triton_registration = True

    @staticmethod
    def registration() -> Any:
        """A context in which aten's ops reach diagfuzz's kernels (torch.compile parity
        compiles with it)."""
        import diagfuzz.ops as ops

        return ops.use_triton(True)


class AtenReference:
    """aten itself, with diagfuzz's registration off: the reference, and a sanity impl
    (without ``.out`` methods: the oracle skips ``.out`` Cases for it)."""

    uses_triton_registration = False


class AtenWithOut(AtenReference):
    """aten with the ``.out`` overloads too: the reference of error parity."""


_with_every_op(TritonViaAten, enable=True, out=True)
_with_every_op(AtenReference, enable=False, out=False)
_with_every_op(AtenWithOut, enable=False, out=True)
triton_aten = TritonViaAten()
aten = AtenReference()
aten_with_out = AtenWithOut()

__all__ = ["DEFAULT_IMPL", "AtenReference", "AtenWithOut", "Impl", "ImplError",
           "TritonViaAten", "aten", "aten_with_out",
           "declared_dtypes", "import_roots", "load_impl", "provided_ops", "provides",
           "triton_aten", "unsupported", "use_roots"]
