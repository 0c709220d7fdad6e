"""diagfuzz's built-in implementations, and where ``--impl`` is loaded from.

``diagfuzz.impl:triton_aten`` (the default) reaches diagfuzz's Triton kernels through aten
with the registration on; ``diagfuzz.impl:aten`` is aten itself with the registration off
(a reference and a sanity target; ``diagfuzz.oracles.aten``, which the oracle's references
use). Both provide every op of ``diagfuzz.specs``: each method calls the op's aten
overloads, so a new spec needs nothing here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from diagfuzz.core.impl import (
    Impl,
    ImplError,
    declared_dtypes,
    import_roots,
    load_impl,
    locate_impl,
    provided_ops,
    provides,
    unsupported,
    use_roots,
)
from diagfuzz.oracles.aten import (
    AtenReference,
    AtenWithOut,
    aten,
    aten_with_out,
    overload,
    with_every_op,
)

DEFAULT_IMPL = "diagfuzz.impl:triton_aten"


def _registered_calls(functional: str, out_overload: str
                      ) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """The functional and ``.out`` methods of one op: aten's overloads, with diagfuzz's
    kernels registered."""

    def call(self: Any, *args: Any) -> Any:
        import diagfuzz.ops as ops

        ops.enable()
        return overload(functional)(*args)

    def call_out(self: Any, *args: Any, out: torch.Tensor) -> Any:
        import diagfuzz.ops as ops

        ops.enable()
        return overload(out_overload)(*args, out=out)

    return call, call_out


class TritonViaAten:
    """diagfuzz's own Triton kernels, reached through aten with the registration on."""

    uses_triton_registration = True

    @staticmethod
    def registration() -> Any:
        """A context in which aten's ops reach diagfuzz's kernels (torch.compile parity
        compiles with it)."""
        import diagfuzz.ops as ops

        return ops.use_triton(True)


with_every_op(TritonViaAten, _registered_calls, out=True)
triton_aten = TritonViaAten()

__all__ = ["DEFAULT_IMPL", "AtenReference", "AtenWithOut", "Impl", "ImplError",
           "TritonViaAten", "aten", "aten_with_out",
           "declared_dtypes", "import_roots", "load_impl", "locate_impl", "provided_ops",
           "provides",
           "triton_aten", "unsupported", "use_roots"]
