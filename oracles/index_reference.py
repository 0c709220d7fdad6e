"""An independent reference: diagonal and diagonal_backward by index arithmetic over a Case.

It never calls ``torch.diagonal`` nor any aten diagonal op: it works out from the Case where
every diagonal element lives (storage index of the tensor the op reads, flat index of the
contiguous result), builds those index tensors by broadcasting ``arange``s, and moves raw
words with gather and scatter. A bug shared by aten and an implementation (or in aten's
reference itself) therefore cannot hide behind a single source of truth.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from math import prod

import torch

from diagfuzz.case import Case, contiguous_strides
from diagfuzz.oracles._bits import from_words, storage_words, words_per_element


@dataclass(frozen=True)
class Geometry:
    """Where diagonal ``(offset, dim1, dim2)`` of ``sizes`` lies, worked out from scratch.

    Element ``k`` of the diagonal sits at index ``row0 + k`` of ``dim1`` and ``col0 + k`` of
    ``dim2``; the diagonal tensor's shape is the other dims in order, then ``length``.
    """

    sizes: tuple[int, ...]
    dim1: int
    dim2: int
    length: int
    row0: int
    col0: int

    @property
    def others(self) -> tuple[int, ...]:
        """The dims that are not diagonal dims, in order."""
        return tuple(d for d in range(len(self.sizes)) if d not in (self.dim1, self.dim2))

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of the diagonal tensor (diagonal_copy's result, grad_output's shape)."""
        return (*(self.sizes[d] for d in self.others), self.length)


def geometry(sizes: tuple[int, ...], offset: int, dim1: int, dim2: int) -> Geometry:
    """The diagonal of a valid call (dims already known to be in range and distinct)."""
    rank = len(sizes)
    d1, d2 = dim1 % rank, dim2 % rank
    if offset >= 0:
        row0, col0 = 0, offset
    else:
        row0, col0 = -offset, 0
    length = max(0, min(sizes[d1] - row0, sizes[d2] - col0))
    return Geometry(tuple(sizes), d1, d2, length, row0, col0)


def _grid(shape: tuple[int, ...], steps: tuple[int, ...] | list[int], start: int,
          device: torch.device) -> torch.Tensor:
    """``start + sum(i_j * steps_j)`` for every multi-index ``i`` of ``shape`` (int64)."""
    index = torch.full((), start, dtype=torch.int64, device=device)
    for n, step in zip(shape, steps, strict=True):
        index = index.unsqueeze(-1) + torch.arange(n, dtype=torch.int64, device=device) * step
    return index


def _positions(geo: Geometry, strides: tuple[int, ...], base: int,
               device: torch.device) -> torch.Tensor:
    """Index of every diagonal element in a tensor of ``geo.sizes`` with ``strides``.

    Result shape is ``geo.shape``; index = base + sum(i_d * stride_d over other dims)
    + (row0 + k) * stride(dim1) + (col0 + k) * stride(dim2).
    """
    steps = [strides[d] for d in geo.others] + [strides[geo.dim1] + strides[geo.dim2]]
    start = base
    if geo.length:
        start += geo.row0 * strides[geo.dim1] + geo.col0 * strides[geo.dim2]
    return _grid(geo.shape, steps, start, device)


def _gather(words: torch.Tensor, index: torch.Tensor, per: int) -> torch.Tensor:
    """Words of the elements at ``index`` (storage element positions), ``[n, per]``."""
    flat = index.reshape(-1, 1) * per + torch.arange(per, device=words.device)
    return words[flat]


def diagonal(x: torch.Tensor, case: Case) -> torch.Tensor:
    """diagonal_copy of ``x`` (the Case's materialised input): a new contiguous tensor."""
    geo = geometry(tuple(x.shape), case.offset, case.dim1, case.dim2)
    per = words_per_element(x.dtype)
    index = _positions(geo, x.stride(), x.storage_offset(), x.device)
    return from_words(_gather(storage_words(x), index, per), x.dtype, geo.shape)


def diagonal_backward(grad: torch.Tensor, case: Case) -> torch.Tensor:
    """diagonal_backward of ``grad`` for ``case.sizes``: zero words, grad's on the diagonal."""
    sizes = tuple(case.sizes)
    geo = geometry(sizes, case.offset, case.dim1, case.dim2)
    per = words_per_element(grad.dtype)
    grad = grad.expand(geo.shape)  # aten broadcasts grad_output to the diagonal's shape
    source = _grid(geo.shape, grad.stride(), grad.storage_offset(), grad.device)
    numel = prod(sizes)
    dest = _result_positions(sizes, case.offset, case.dim1, case.dim2, grad.device)
    out = torch.zeros((numel, per), dtype=storage_words(grad).dtype, device=grad.device)
    out[dest.reshape(-1)] = _gather(storage_words(grad), source, per)
    return from_words(out, grad.dtype, sizes)


def diagonal_mask(case: Case, device: torch.device | str) -> torch.Tensor:
    """Bool tensor of ``case.sizes`` (flat), True exactly on the diagonal."""
    sizes = tuple(case.sizes)
    numel = prod(sizes)
    mask = torch.zeros(numel, dtype=torch.bool, device=device)
    mask[_result_positions(sizes, case.offset, case.dim1, case.dim2,
                           torch.device(device)).reshape(-1)] = True
    return mask


@lru_cache(maxsize=8)
def _result_positions(sizes: tuple[int, ...], offset: int, dim1: int, dim2: int,
                      device: torch.device) -> torch.Tensor:
    """Flat index of every diagonal element in a contiguous tensor of ``sizes``.

    Cached (read only: callers index with it, never write it) because one backward Case needs
    it twice: the index reference scatters through it, the off-diagonal relation masks by it.
    """
    geo = geometry(sizes, offset, dim1, dim2)
    return _positions(geo, contiguous_strides(sizes), 0, device)
