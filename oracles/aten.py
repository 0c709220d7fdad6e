"""aten itself as an implementation, aten's own kernels: the reference of
error parity (``aten_with_out``) and ``diagfuzz.impl:aten``, a sanity target.

Each method calls the op's aten overload (``OpSpec.aten``), so a new spec needs nothing
here. ``with_every_op`` gives a class those methods; ``diagfuzz.impl`` builds its
``triton_aten`` with it too, with the registration on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from diagfuzz.core.dispatch import aten_only
from diagfuzz.specs import all_specs

#: The functional and the ``.out`` method of one op, from its two aten overload names.
Calls = Callable[[str, str], tuple[Callable[..., Any], Callable[..., Any]]]


def overload(name: str) -> Any:
    """``torch.ops.aten.<name>`` for a name like ``diagonal_copy.out``."""
    packet, _, variant = name.partition(".")
    found = getattr(torch.ops.aten, packet)
    return getattr(found, variant) if variant else found


def aten_only_calls(functional: str, out_overload: str
                           ) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """The functional and ``.out`` methods of one op: aten's overloads, every library's
    registration deferred (``diagfuzz.core.dispatch.aten_only``)."""

    def call(self: Any, *args: Any) -> Any:
        with aten_only():
            return overload(functional)(*args)

    def call_out(self: Any, *args: Any, out: torch.Tensor) -> Any:
        with aten_only():
            return overload(out_overload)(*args, out=out)

    return call, call_out


def with_every_op(cls: type, calls: Calls, out: bool) -> type:
    """``cls`` with a method per op of ``diagfuzz.specs`` (and its ``.out`` method when
    ``out``), made by ``calls``."""
    for spec in all_specs():
        call, call_out = calls(spec.aten[0], spec.aten[1])
        call.__name__, call.__doc__ = spec.method_name, f"aten::{spec.aten[0]}"
        setattr(cls, spec.method_name, call)
        if out and spec.has_out:
            call_out.__name__, call_out.__doc__ = spec.out_method, f"aten::{spec.aten[1]}"
            setattr(cls, spec.out_method, call_out)
    return cls


class AtenReference:
    """aten itself, aten's own kernels: the reference, and a sanity impl
    (without ``.out`` methods: its ``.out`` Cases are unsupported)."""

    uses_triton_registration = False


class AtenWithOut(AtenReference):
    """aten with the ``.out`` overloads too: the reference of error parity."""


with_every_op(AtenReference, aten_only_calls, out=False)
with_every_op(AtenWithOut, aten_only_calls, out=True)
aten = AtenReference()
aten_with_out = AtenWithOut()
