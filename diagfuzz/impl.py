"""Implementations under test, and how ``--impl MODULE:ATTR`` finds one.

An implementation is any object (a module works) with
``diagonal(x, offset=0, dim1=0, dim2=1) -> new Tensor`` and
``diagonal_backward(grad_output, input_sizes, offset, dim1, dim2) -> Tensor``. Optional:
``diagonal_out(..., out=)`` and ``diagonal_backward_out(..., out=)`` for ``.out`` Cases, and
``uses_triton_registration = True`` when calls go through aten with diagfuzz's kernels (the
oracles then prove the kernel ran and switch the registration off for the reference).
"""

from __future__ import annotations

import importlib
from typing import Any

import torch

import diagfuzz.ops as ops

DEFAULT_IMPL = "diagfuzz.impl:triton_aten"


class ImplError(Exception):
    """The implementation named by ``--impl`` cannot be used (a usage error, not a failure)."""


class TritonViaAten:
    """diagfuzz's own Triton kernels, reached through aten with the registration on."""

    uses_triton_registration = True

    def diagonal(self, x: torch.Tensor, offset: int = 0, dim1: int = 0,
                 dim2: int = 1) -> torch.Tensor:
        ops.enable()
        return torch.ops.aten.diagonal_copy(x, offset, dim1, dim2)

    def diagonal_backward(self, grad_output: torch.Tensor, input_sizes: list[int],
                          offset: int, dim1: int, dim2: int) -> torch.Tensor:
        ops.enable()
        return torch.ops.aten.diagonal_backward(grad_output, input_sizes, offset, dim1, dim2)

    def diagonal_out(self, x: torch.Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1,
                     *, out: torch.Tensor) -> torch.Tensor:
        ops.enable()
        return torch.ops.aten.diagonal_copy.out(x, offset, dim1, dim2, out=out)

    def diagonal_backward_out(self, grad_output: torch.Tensor, input_sizes: list[int],
                              offset: int, dim1: int, dim2: int, *,
                              out: torch.Tensor) -> torch.Tensor:
        ops.enable()
        return torch.ops.aten.diagonal_backward.out(grad_output, input_sizes, offset, dim1,
                                                    dim2, out=out)


class AtenReference:
    """aten itself, with diagfuzz's registration off: the reference, and a sanity impl."""

    uses_triton_registration = False

    def diagonal(self, x, offset=0, dim1=0, dim2=1):
        with ops.use_triton(False, tensors=(x,)):
            return torch.ops.aten.diagonal_copy(x, offset, dim1, dim2)

    def diagonal_backward(self, grad_output, input_sizes, offset, dim1, dim2):
        with ops.use_triton(False, tensors=(grad_output,)):
            return torch.ops.aten.diagonal_backward(grad_output, input_sizes, offset, dim1,
                                                    dim2)


triton_aten = TritonViaAten()
aten = AtenReference()


def load_impl(spec: str) -> Any:
    """Import ``MODULE:ATTR`` (or ``MODULE``) and check it has the two ops."""
    module_name, _, attr = spec.partition(":")
    if not module_name:
        raise ImplError(f"--impl {spec!r}: expected MODULE:ATTR")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # any import failure is a usage error naming the module
        raise ImplError(f"--impl {spec!r}: cannot import {module_name!r}: {exc!r}") from exc
    obj: Any = module
    for part in filter(None, attr.split(".")):
        try:
            obj = getattr(obj, part)
        except AttributeError as exc:
            raise ImplError(f"--impl {spec!r}: {module_name!r} has no attribute "
                            f"{attr!r}") from exc
    missing = [name for name in ("diagonal", "diagonal_backward")
               if not callable(getattr(obj, name, None))]
    if missing:
        raise ImplError(f"--impl {spec!r}: {obj!r} lacks callable {', '.join(missing)}")
    return obj
