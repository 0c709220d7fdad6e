"""Plain implementations of the family's ops, written without calling the op they
implement (a registered kernel that called it would call itself). Like a Triton kernel,
each writes memory autograd does not see (``no_grad``), and checks its arguments as aten
does (diagonal_backward by asking aten's Meta kernel, which raises aten's types there)."""

from __future__ import annotations

import torch


def _meta(t: torch.Tensor) -> torch.Tensor:
    return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")


@torch.no_grad()
def diag_embed(x: torch.Tensor, offset: int = 0, dim1: int = -2,
               dim2: int = -1) -> torch.Tensor:
    rank = x.dim() + 1
    for dim in (dim1, dim2):
        if not -rank <= dim < rank:
            raise IndexError(f"Dimension out of range (expected to be in range of "
                             f"[{-rank}, {rank - 1}], but got {dim})")
    d1, d2 = dim1 % rank, dim2 % rank
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    n = x.shape[-1] + abs(offset)
    if n >= 2**62:
        raise RuntimeError(f"diag_embed: offset {offset} makes a result too large")
    shape = list(x.shape[:-1])
    for d in sorted((d1, d2)):
        shape.insert(d, n)
    out = x.new_zeros(shape)
    torch.diagonal(out, offset, d1, d2).copy_(x)
    return out


@torch.no_grad()
def diagonal_backward(grad: torch.Tensor, input_sizes: list[int], offset: int, dim1: int,
                      dim2: int) -> torch.Tensor:
    torch.ops.aten.diagonal_backward(_meta(grad), input_sizes, offset, dim1, dim2)
    out = grad.new_zeros(input_sizes)
    torch.diagonal(out, offset, dim1, dim2).copy_(grad)
    return out


@torch.no_grad()
def diagonal_copy(x: torch.Tensor, offset: int = 0, dim1: int = 0,
                  dim2: int = 1) -> torch.Tensor:
    view = torch.diagonal(x, offset, dim1, dim2)
    return torch.empty(view.shape, dtype=x.dtype).copy_(view)
