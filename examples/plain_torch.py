"""Plain PyTorch: the diagonal ops written with torch's public API, as a user writes them.

``diagonal`` is ``torch.diagonal(...)`` cloned into a contiguous tensor (what
``aten::diagonal_copy`` does); ``diagonal_backward`` is ``torch.zeros`` plus a ``copy_`` into
its ``torch.diagonal`` view (what ``aten::diagonal_backward`` does). ``diag_embed``,
``diagonal_scatter``, ``diag``, ``triu`` and ``tril`` are torch's public functions of those
names, called as a user calls them (``triu_``/``tril_`` the in-place tensor methods). The
``.out`` forms do what aten's generated ``out=`` kernels do: an ``out`` of another dtype or
device is a RuntimeError, otherwise ``out`` is resized to the result's shape and the result
copied in (``triu``'s and ``tril``'s are torch's own ``out=``). No Triton anywhere: it runs
on any device torch runs on.

Fuzz it, and gate it, from the repository root::

    tools/dev fuzz --impl=examples.plain_torch:impl
    tools/dev gate --impl=examples.plain_torch:impl
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import torch

#: Calls do not go through diagfuzz's aten registration (no dispatch proof to ask for).
uses_triton_registration = False


def diagonal(x: torch.Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> torch.Tensor:
    """The diagonal, materialised: a new contiguous tensor."""
    return torch.diagonal(x, offset, dim1, dim2).clone(memory_format=torch.contiguous_format)


def diagonal_backward(grad_output: torch.Tensor, input_sizes: Sequence[int], offset: int,
                      dim1: int, dim2: int) -> torch.Tensor:
    """Zeros of ``input_sizes`` with ``grad_output`` copied onto the diagonal."""
    grad_input = torch.zeros(input_sizes, dtype=grad_output.dtype, device=grad_output.device)
    torch.diagonal(grad_input, offset, dim1, dim2).copy_(grad_output)
    return grad_input


def diag_embed(x: torch.Tensor, offset: int = 0, dim1: int = -2,
               dim2: int = -1) -> torch.Tensor:
    """``x`` on the diagonal of a new tensor of zeros with one dim more."""
    return torch.diag_embed(x, offset, dim1, dim2)


def diagonal_scatter(x: torch.Tensor, src: torch.Tensor, offset: int = 0, dim1: int = 0,
                     dim2: int = 1) -> torch.Tensor:
    """A copy of ``x`` with ``src`` on its diagonal."""
    return torch.diagonal_scatter(x, src, offset, dim1, dim2)


def diag(x: torch.Tensor, diagonal: int = 0) -> torch.Tensor:
    """A matrix's diagonal, or a vector on the diagonal of a square matrix."""
    return torch.diag(x, diagonal)


def triu(x: torch.Tensor, diagonal: int = 0) -> torch.Tensor:
    """The upper triangle of every matrix (the last two dims), zeros elsewhere."""
    return torch.triu(x, diagonal)


def tril(x: torch.Tensor, diagonal: int = 0) -> torch.Tensor:
    """The lower triangle of every matrix (the last two dims), zeros elsewhere."""
    return torch.tril(x, diagonal)


def triu_(x: torch.Tensor, diagonal: int = 0) -> torch.Tensor:
    """``triu`` written into ``x`` itself, which is returned."""
    return x.triu_(diagonal)


def tril_(x: torch.Tensor, diagonal: int = 0) -> torch.Tensor:
    """``tril`` written into ``x`` itself, which is returned."""
    return x.tril_(diagonal)


def _into(out: torch.Tensor, result: torch.Tensor) -> torch.Tensor:
    """``result`` written into ``out`` as aten's generated ``out=`` kernels write it.

    Those kernels (``diagonal_copy.out``, ``diagonal_backward.out`` and the others)
    compute the functional result, resize ``out`` to its shape and copy it in, after
    checking that dtype and device match exactly: ``copy_`` alone would convert the dtype
    silently.
    """
    if out.dtype != result.dtype:
        raise RuntimeError(f"Expected out tensor to have dtype {result.dtype}, but got "
                           f"{out.dtype} instead")
    if out.device != result.device:
        raise RuntimeError(f"Expected out tensor to have device {result.device}, but got "
                           f"{out.device} instead")
    out.resize_(result.shape)
    return out.copy_(result)


def diagonal_out(x: torch.Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1, *,
                 out: torch.Tensor) -> torch.Tensor:
    """``diagonal`` into ``out`` (``torch.diagonal_copy(..., out=out)``)."""
    return _into(out, diagonal(x, offset, dim1, dim2))


def diagonal_backward_out(grad_output: torch.Tensor, input_sizes: Sequence[int], offset: int,
                          dim1: int, dim2: int, *, out: torch.Tensor) -> torch.Tensor:
    """``diagonal_backward`` into ``out``."""
    return _into(out, diagonal_backward(grad_output, input_sizes, offset, dim1, dim2))


def diag_embed_out(x: torch.Tensor, offset: int = 0, dim1: int = -2, dim2: int = -1, *,
                   out: torch.Tensor) -> torch.Tensor:
    """``diag_embed`` into ``out``."""
    return _into(out, diag_embed(x, offset, dim1, dim2))


def diagonal_scatter_out(x: torch.Tensor, src: torch.Tensor, offset: int = 0, dim1: int = 0,
                         dim2: int = 1, *, out: torch.Tensor) -> torch.Tensor:
    """``diagonal_scatter`` into ``out``."""
    return _into(out, diagonal_scatter(x, src, offset, dim1, dim2))


def diag_out(x: torch.Tensor, diagonal: int = 0, *, out: torch.Tensor) -> torch.Tensor:
    """``torch.diag(x, diagonal, out=out)``."""
    return torch.diag(x, diagonal, out=out)


def triu_out(x: torch.Tensor, diagonal: int = 0, *, out: torch.Tensor) -> torch.Tensor:
    """``torch.triu(x, diagonal, out=out)``."""
    return torch.triu(x, diagonal, out=out)


def tril_out(x: torch.Tensor, diagonal: int = 0, *, out: torch.Tensor) -> torch.Tensor:
    """``torch.tril(x, diagonal, out=out)``."""
    return torch.tril(x, diagonal, out=out)


#: The implementation ``--impl=examples.plain_torch:impl`` names: this module.
impl = sys.modules[__name__]
