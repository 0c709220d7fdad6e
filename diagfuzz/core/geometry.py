"""Diagonal geometry with aten's argument checks and messages, in plain Python.

Pure integer arithmetic on sizes, so the launchers validate and plan without creating a
single tensor (host overhead matters for small shapes on a GPU).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


def wrap_dim(dim: int, ndim: int) -> int:
    """aten's ``maybe_wrap_dim``: a scalar counts as rank 1; IndexError outside the range."""
    rank = max(ndim, 1)
    if not -rank <= dim < rank:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-rank}, {rank - 1}], "
            f"but got {dim})"
        )
    return dim + rank if dim < 0 else dim


@dataclass(frozen=True)
class Diagonal:
    """Where the diagonal ``(offset, dim1, dim2)`` of a tensor of ``sizes`` lies.

    Element ``i`` of the diagonal sits at index ``i + row0`` of dim1 and ``i + col0`` of dim2.
    """

    dim1: int
    dim2: int
    offset: int
    length: int
    row0: int
    col0: int
    #: sizes of the diagonal tensor: the other dims in order, then ``length``.
    shape: tuple[int, ...]


def diagonal_of(sizes: Sequence[int], offset: int, dim1: int, dim2: int) -> Diagonal:
    """Validate like aten's ``diagonal`` view and describe the diagonal."""
    ndim = len(sizes)
    d1 = wrap_dim(dim1, ndim)
    d2 = wrap_dim(dim2, ndim)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    # rank < 2 needs no check of its own: one of the two checks above always fires.
    if offset >= 0:
        length = max(min(sizes[d1], sizes[d2] - offset), 0)
    else:
        length = max(min(sizes[d1] + offset, sizes[d2]), 0)
    row0, col0 = (0, offset) if offset >= 0 else (-offset, 0)
    if length == 0:
        row0 = col0 = 0  # keep extreme offsets out of index arithmetic
    others = tuple(s for d, s in enumerate(sizes) if d not in (d1, d2))
    return Diagonal(d1, d2, offset, length, row0, col0, (*others, length))


def check_sizes(sizes: Sequence[int], argument: str) -> tuple[int, ...]:
    """Sizes as a tuple of ints; negative sizes raise aten's RuntimeError."""
    out = tuple(int(s) for s in sizes)
    if any(s < 0 for s in out):
        raise RuntimeError(f"{argument}: Dimension size must be non-negative, got {list(out)}")
    return out
