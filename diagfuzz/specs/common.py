"""What the specs of the diagonal family share: the diagonal's geometry and view, relations
on raw bits and the warm-up Cases' shapes.

Specs import torch and diagfuzz's building blocks, never a kernel: their references run
inside ``diagfuzz.core.dispatch.aten_only``, where no library's registration serves aten.
"""

from __future__ import annotations

from typing import Any

import torch

from diagfuzz.core import bits
from diagfuzz.core.case import DTYPE_NAMES, Case, Layout, Values, contiguous_strides
from diagfuzz.core.dispatch import aten_only
from diagfuzz.core.geometry import Diagonal, diagonal_of
from diagfuzz.specs import index_reference

#: Sizes of every warm-up Case: a small matrix with a diagonal of 3 at offset 1.
WARM_SIZES = (3, 4)
WARM_DIAGONAL = (3,)


def diagonal(sizes: tuple[int, ...], offset: int, dim1: int, dim2: int) -> Diagonal:
    """Where the diagonal of a tensor of ``sizes`` lies (aten's checks and messages)."""
    return diagonal_of(sizes, offset, dim1, dim2)


def differentiable(dtype: torch.dtype) -> bool:
    """Whether autograd can differentiate a tensor of ``dtype``."""
    return dtype.is_floating_point or dtype.is_complex


def diagonal_view(case: Case, t: torch.Tensor) -> torch.Tensor:
    """``torch.diagonal(t, ...)`` as a view of ``t``'s storage: no kernel computed it.

    A view cannot come from a library's kernel (they return new tensors); were
    ``diagonal`` ever served by something that copies, it is taken again with aten's own
    kernels.
    """
    view = torch.diagonal(t, case.offset, case.dim1, case.dim2)
    if view._is_view() and view.untyped_storage().data_ptr() == t.untyped_storage().data_ptr():
        return view
    with aten_only():
        return torch.diagonal(t, case.offset, case.dim1, case.dim2)


def diagonal_clone(case: Case) -> Any:
    """``torch.diagonal(x, offset, dim1, dim2).clone()``: the differentiable function whose
    forward is diagonal_copy and whose backward is diagonal_backward."""
    offset, dim1, dim2 = case.offset, case.dim1, case.dim2

    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.diagonal(x, offset, dim1, dim2).clone()

    return fn


def same_bits(what: str, expected: torch.Tensor,
              actual: torch.Tensor) -> tuple[str, dict[str, Any]] | None:
    """None when the two agree in bits, else ("<count> <what>", the diff)."""
    if bits.same_bits(expected, actual):
        return None
    positions = bits.differing(expected, actual)
    if len(positions):
        return f"{len(positions)} {what}", bits.diff(expected, actual, positions)
    return None


def off_diagonal_zero(case: Case, result: torch.Tensor) -> tuple[str, dict[str, Any]] | None:
    """Every element of ``result`` (shaped like ``case.sizes``) off the diagonal has all
    bits zero. The passing case in three ops; the evidence only when some element is not."""
    on_shaped = index_reference.diagonal_mask_shaped(case, result.device, result.dtype)
    if not bool(bits._words(result).masked_fill(on_shaped, 0).any()):
        return None
    on = index_reference.diagonal_mask(case, result.device)
    words = bits.bits(result)
    nonzero = words != 0
    nonzero = nonzero.reshape(-1) if nonzero.shape[1] == 1 else nonzero.any(dim=1)
    bad = (nonzero & ~on).nonzero().reshape(-1).cpu()
    if len(bad):
        return (f"{len(bad)} elements off the diagonal are not all-zero bits",
                bits.diff(torch.zeros_like(result), result, bad))
    return None


#: Integer word of each element width (a 16-byte element is two int64 words).
_WORD = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64, 16: torch.int64}


def storage_words(t: torch.Tensor) -> torch.Tensor:
    """All of ``t``'s storage as flat integer words of its element width (a view)."""
    return torch.empty(0, dtype=_WORD[t.dtype.itemsize], device=t.device).set_(
        t.untyped_storage())


def word_positions(shape: tuple[int, ...], steps: tuple[int, ...], start: int,
                   dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """Flat word index (into ``storage_words``) of every word of every element at element
    index ``start + sum(i_d * steps_d)``, for each multi-index ``i`` of ``shape``: shape
    ``(*shape, words per element)``, by broadcast ``arange``s (index arithmetic alone)."""
    per = 2 if dtype.itemsize == 16 else 1
    index = torch.full((), start, dtype=torch.int64, device=device)
    for d, (n, step) in enumerate(zip(shape, steps, strict=True)):
        axis = torch.arange(n, dtype=torch.int64, device=device) * step
        index = index + axis.view(*(n if e == d else 1 for e in range(len(shape))))
    index = index.expand(shape)
    return index.unsqueeze(-1) * per + torch.arange(per, dtype=torch.int64, device=device)


def from_words(words: torch.Tensor, dtype: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
    """Flat contiguous words as a contiguous tensor of ``dtype`` and ``shape``."""
    return words.view(dtype).view(shape)


def warm_dtypes() -> list[str]:
    """The dtype names this torch has."""
    return [name for name in DTYPE_NAMES if hasattr(torch, name)]


def warm_layouts(shape: tuple[int, ...]) -> list[tuple[Layout, Values]]:
    """A contiguous layout with one special value, and a strided one of random bits."""
    contiguous = Layout.contiguous(shape)
    strided = Layout(shape, tuple(2 * s for s in contiguous_strides(shape)), 1,
                     ("sliced", "offset"))
    return [(contiguous, Values(1, "normal", ((0, 0),))), (strided, Values(2, "bits"))]
