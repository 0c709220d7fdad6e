"""Register the kernels into aten with ``torch.library``, and take them out again.

Forward and backward are separate kernels under the backend key (CUDA, or CPU when Triton
runs interpreted): never an ``autograd.Function`` or an Autograd key, so ``aten::diagonal``
stays a view, autograd reaches our kernels wherever derivatives.yaml routes it through a
registered op (``diagonal_backward``; ``diagonal_scatter`` for diagonal_scatter's own
backward), and torch.compile sees plain aten ops. Dropping the library restores aten's
kernels exactly.
"""

from __future__ import annotations

import contextlib
import importlib
import warnings
from collections.abc import Iterable, Iterator
from typing import Any

import torch

from diagfuzz.ops._runtime import DEVICE, DISPATCH_KEY
from diagfuzz.specs import all_specs


def _entry(path: str) -> Any:
    """The function ``module:name`` names (a spec's kernel entry point)."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


#: (aten overload name, implementation): everything this package registers, from the op
#: specs' kernel entry points (functional and ``.out``). ``aten::diag`` is not
#: among them: it is CompositeImplicitAutograd and calls ``diag_embed`` (1-D input) or
#: ``diagonal_copy`` (2-D), and their ``.out`` overloads, which are registered.
KERNELS = tuple(
    (overload, _entry(entry))
    for spec in all_specs() if spec.kernel
    for overload, entry in zip(spec.aten, spec.entry_points, strict=True) if overload)

_library: torch.library.Library | None = None


def enable() -> None:
    """Route the aten ops to the Triton kernels. Enabling twice is harmless."""
    global _library
    if _library is not None:
        return
    library = torch.library.Library("aten", "IMPL")
    with warnings.catch_warnings():
        # aten already has a kernel for this key; overriding it is the point.
        warnings.filterwarnings("ignore", message=".*[Oo]verrid.*")
        for name, impl in KERNELS:
            library.impl(name, impl, DISPATCH_KEY)
    _library = library


def disable() -> None:
    """Restore aten's own kernels. Disabling when not enabled is harmless."""
    global _library
    if _library is None:
        return
    _library._destroy()
    _library = None


def enabled() -> bool:
    """Whether the Triton kernels currently serve the aten ops."""
    return _library is not None


def serves(tensors: Iterable[object]) -> bool:
    """Whether the registration can serve an op on ``tensors``: one of them is on the
    backend it is registered for (CUDA on a GPU, CPU under the interpreter)."""
    return any(isinstance(t, torch.Tensor) and t.device.type == DEVICE for t in tensors)


@contextlib.contextmanager
def use_triton(on: bool = True, *, tensors: Iterable[object] | None = None) -> Iterator[None]:
    """Within the block the kernels are on (or off, with ``on=False``); restored after.

    ``tensors``: every tensor the block's ops take, when the caller knows them. If the
    registration serves none of them (``serves``), nothing is switched: a switch
    re-registers every kernel of KERNELS, ~25 us on a CPU machine and ~240 us on the H200
    hosts. (The oracle switches nothing: it defers every library's registration while it
    judges, ``diagfuzz.core.dispatch.aten_only``.)
    """
    if tensors is not None and not serves(tensors):
        yield
        return
    was = enabled()
    (enable if on else disable)()
    try:
        yield
    finally:
        (enable if was else disable)()
