"""An independent reference: diagonal and diagonal_backward by index arithmetic over a Case.

It never calls ``torch.diagonal`` nor any aten diagonal op: it works out from the Case where
every diagonal element lives (storage index of the tensor the op reads, flat index of the
contiguous result), builds those index tensors by broadcasting ``arange``s, and moves raw
words with gather and scatter. A bug shared by aten and an implementation (or in aten's
reference itself) therefore cannot hide behind a single source of truth. The specs'
``others`` and relations use it; it imports no spec.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from math import prod

import torch

from diagfuzz.core.case import Case, contiguous_strides
from diagfuzz.core.words import words_per_element


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


#: Integer word of each element width (a 16-byte element is two int64 words).
_WORD = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64, 16: torch.int64}


def _axis(n: int, step: int, start: int, device: torch.device) -> torch.Tensor:
    """``start + i * step`` for ``i`` in ``range(n)`` (int64), in one op."""
    if step == 0 or n == 0:
        return torch.full((n,), start, dtype=torch.int64, device=device)
    return torch.arange(start, start + n * step, step, dtype=torch.int64, device=device)


def _grid(shape: tuple[int, ...], steps: tuple[int, ...] | list[int], start: int,
          device: torch.device) -> torch.Tensor:
    """``start + sum(i_j * steps_j)`` for every multi-index ``i`` of ``shape`` (int64).

    One ``arange`` per dim, broadcast-added: 1 + 3 * (rank - 1) ops.
    """
    if not shape:
        return torch.full((), start, dtype=torch.int64, device=device)
    index = _axis(shape[0], steps[0], start, device)
    for n, step in zip(shape[1:], steps[1:], strict=True):
        index = index.unsqueeze(-1) + _axis(n, step, 0, device)
    return index


@lru_cache(maxsize=256)
def _word_index(shape: tuple[int, ...], steps: tuple[int, ...], start: int, per: int,
                device: torch.device) -> torch.Tensor:
    """Flat word position of every word of every element at ``start + sum(i_j * steps_j)``.

    Shape ``shape`` (``(*shape, 2)`` for two-word elements): gathering with it yields the
    elements' words in the result's own layout, so no reshape follows. Cached (read only:
    callers index with it, never write it; keys are plain ints) because Cases of a family,
    and many drawn Cases, share a geometry: a hit costs no op, a miss the ``_grid`` ops.
    """
    if per == 1:
        return _grid(shape, steps, start, device)
    return _grid((*shape, per), [step * per for step in steps] + [1], start * per, device)


def _steps(geo: Geometry, strides: tuple[int, ...], base: int) -> tuple[tuple[int, ...], int]:
    """Steps and start (in elements) of the diagonal of a tensor of ``geo.sizes``.

    index = base + sum(i_d * stride_d over other dims)
    + (row0 + k) * stride(dim1) + (col0 + k) * stride(dim2).
    """
    steps = (*(strides[d] for d in geo.others), strides[geo.dim1] + strides[geo.dim2])
    start = base
    if geo.length:
        start += geo.row0 * strides[geo.dim1] + geo.col0 * strides[geo.dim2]
    return steps, start


def _positions(geo: Geometry, strides: tuple[int, ...], base: int,
               device: torch.device) -> torch.Tensor:
    """Index of every diagonal element in a tensor of ``geo.sizes`` with ``strides``.

    Result shape is ``geo.shape`` (see ``_steps`` for the arithmetic).
    """
    steps, start = _steps(geo, strides, base)
    return _grid(geo.shape, steps, start, device)


def _all_words(t: torch.Tensor) -> torch.Tensor:
    """All of ``t``'s storage as flat integer words of its element width (a view, 2 ops)."""
    word = _WORD[t.dtype.itemsize]
    return torch.empty(0, dtype=word, device=t.device).set_(t.untyped_storage())


def _from_words(words: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Words in a result's layout (trailing 2 for complex128) viewed as ``dtype``."""
    if dtype.itemsize == 16:
        return torch.view_as_complex(words.view(torch.float64))
    return words if words.dtype == dtype else words.view(dtype)


def _expanded_strides(t: torch.Tensor, shape: tuple[int, ...]) -> tuple[int, ...]:
    """``t.expand(shape).stride()`` without the op (broadcast dims step 0)."""
    if tuple(t.shape) == shape:
        return tuple(t.stride())
    return tuple(t.expand(shape).stride())


def diagonal(x: torch.Tensor, case: Case) -> torch.Tensor:
    """diagonal_copy of ``x`` (the Case's materialised input): a new contiguous tensor."""
    geo = geometry(tuple(x.shape), case.offset, case.dim1, case.dim2)
    steps, start = _steps(geo, tuple(x.stride()), int(x.storage_offset()))
    index = _word_index(geo.shape, steps, start, words_per_element(x.dtype), x.device)
    return _from_words(_all_words(x)[index], x.dtype)


def diagonal_backward(grad: torch.Tensor, case: Case) -> torch.Tensor:
    """diagonal_backward of ``grad`` for ``case.sizes``: zero words, grad's on the diagonal."""
    sizes = tuple(case.sizes)
    geo = geometry(sizes, case.offset, case.dim1, case.dim2)
    per = words_per_element(grad.dtype)
    # aten broadcasts grad_output to the diagonal's shape: read it with broadcast strides.
    source = _word_index(geo.shape, _expanded_strides(grad, geo.shape),
                         grad.storage_offset(), per, grad.device)
    steps, start = _steps(geo, contiguous_strides(sizes), 0)
    dest = _word_index(geo.shape, steps, start, per, grad.device)
    out = torch.zeros(prod(sizes) * per, dtype=_WORD[grad.dtype.itemsize], device=grad.device)
    out[dest] = _all_words(grad)[source]
    return _from_words(out.view(*sizes, per) if per > 1 else out.view(sizes), grad.dtype)


def diagonal_mask(case: Case, device: torch.device | str) -> torch.Tensor:
    """Bool tensor of ``case.sizes`` (flat), True exactly on the diagonal (read only)."""
    return _mask(tuple(case.sizes), case.offset, case.dim1, case.dim2, torch.device(device))


def diagonal_mask_shaped(case: Case, device: torch.device | str,
                         dtype: torch.dtype) -> torch.Tensor:
    """``diagonal_mask`` in the shape of a result's words (``diagfuzz.core.bits._words``)
    for ``dtype``: ``case.sizes``, plus a trailing 1 for two-word elements (read only)."""
    return _mask_shaped(tuple(case.sizes), case.offset, case.dim1, case.dim2,
                        torch.device(device), words_per_element(dtype))


@lru_cache(maxsize=64)
def _mask_shaped(sizes: tuple[int, ...], offset: int, dim1: int, dim2: int,
                 device: torch.device, per: int) -> torch.Tensor:
    """``diagonal_mask_shaped``'s tensor, cached per geometry and word count."""
    mask = _mask(sizes, offset, dim1, dim2, device)
    return mask.view(*sizes, 1) if per > 1 else mask.view(sizes)


@lru_cache(maxsize=64)
def _mask(sizes: tuple[int, ...], offset: int, dim1: int, dim2: int,
          device: torch.device) -> torch.Tensor:
    """``diagonal_mask``'s tensor, cached per geometry (read only, like ``_word_index``)."""
    mask = torch.zeros(prod(sizes), dtype=torch.bool, device=device)
    mask[_result_positions(sizes, offset, dim1, dim2, device).reshape(-1)] = True
    return mask


def _result_positions(sizes: tuple[int, ...], offset: int, dim1: int, dim2: int,
                      device: torch.device) -> torch.Tensor:
    """Flat index of every diagonal element in a contiguous tensor of ``sizes``."""
    geo = geometry(sizes, offset, dim1, dim2)
    return _positions(geo, contiguous_strides(sizes), 0, device)
