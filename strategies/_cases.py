"""Valid Cases of diagonal (diagonal_copy) and diagonal_backward.

One composite draw per Case, in a fixed order: rank, sizes, dims, offset, dtype, layout of
the tensor the op reads, values. Every choice puts its simplest option first, so a failing
Case shrinks towards rank 2, small sizes, dims (0, 1), offset 0, float32, a contiguous
layout and plain values.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from math import prod

import torch
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from diagfuzz.case import OPS, Case, Layout
from diagfuzz.ops._geometry import diagonal_of
from diagfuzz.strategies._args import (
    DEFAULT_MAX_ELEMENTS,
    DEFAULT_RANKS,
    check_dtypes,
    check_flag,
    check_kinds,
    check_max_elements,
    check_ranks,
)
from diagfuzz.strategies._layouts import LAYOUT_KINDS, layout_strategy
from diagfuzz.strategies._values import VALUE_MODES, _special_values, _values

#: Offset kinds in shrink order. Each is drawn with a sign (positive first); "size" is the
#: length of dim2 for positive offsets and of dim1 for negative ones.
OFFSET_KINDS = ("zero", "one", "inside", "size_minus_one", "size", "beyond", "extreme")
INT64_MAX = 2**63 - 1


@dataclass(frozen=True)
class Narrowing:
    """The checked narrowing arguments shared by the Case strategies."""

    ranks: tuple[int, int]
    dtypes: tuple[str, ...]
    max_elements: int
    layout_kinds: tuple[str, ...]
    offsets: tuple[str, ...]
    value_modes: tuple[str, ...]
    specials: bool


def narrowing(*, ranks: int | Sequence[int] = DEFAULT_RANKS,
              dtypes: Sequence[str | torch.dtype] | None = None,
              max_elements: int = DEFAULT_MAX_ELEMENTS,
              layout_kinds: Collection[str] | None = None,
              offsets: Collection[str] | None = None,
              value_modes: Collection[str] | None = None,
              specials: bool = True, min_rank: int = 2) -> Narrowing:
    """Check the narrowing arguments once, with errors naming the argument."""
    return Narrowing(
        ranks=check_ranks(ranks, min_rank),
        dtypes=check_dtypes(dtypes),
        max_elements=check_max_elements(max_elements),
        layout_kinds=check_kinds("layout_kinds", layout_kinds, LAYOUT_KINDS),
        offsets=check_kinds("offsets", offsets, OFFSET_KINDS),
        value_modes=check_kinds("value_modes", value_modes, VALUE_MODES),
        specials=check_flag("specials", specials),
    )


def diagonal_cases(*, ranks: int | Sequence[int] = DEFAULT_RANKS,
                   dtypes: Sequence[str | torch.dtype] | None = None,
                   max_elements: int = DEFAULT_MAX_ELEMENTS,
                   layout_kinds: Collection[str] | None = None,
                   offsets: Collection[str] | None = None,
                   value_modes: Collection[str] | None = None,
                   specials: bool = True) -> st.SearchStrategy[Case]:
    """Valid Cases of ``diagonal`` (run as ``aten::diagonal_copy``).

    ``Case.layout`` is the input's layout and its shape is ``Case.sizes``. ``ranks`` is a
    rank or an inclusive (low, high) pair (default 2..8); sizes include 0 and 1 and the
    input's storage holds at most ``max_elements`` elements. dim1/dim2 are any ordered pair
    of distinct dims, each spelled positive or negative. ``offsets`` narrows OFFSET_KINDS:
    0, ±1, inside the matrix, ±(size - 1), ±size, beyond the sizes (an empty diagonal) and
    extremes up to ±(2**63 - 1) (and -2**63). ``dtypes`` (default: every available dtype),
    ``layout_kinds`` (see ``layouts``), ``value_modes`` ("normal", "bits") and
    ``specials`` (special bit patterns, half of them on the diagonal) narrow the rest.

    Shrinks towards rank 2, sizes of 1, dims (0, 1), offset 0, float32 (or the first of
    ``dtypes``), a contiguous layout, seed 0, mode "normal" and no specials.
    """
    return _diagonal(narrowing(ranks=ranks, dtypes=dtypes, max_elements=max_elements,
                               layout_kinds=layout_kinds, offsets=offsets,
                               value_modes=value_modes, specials=specials))


def diagonal_backward_cases(*, ranks: int | Sequence[int] = DEFAULT_RANKS,
                            dtypes: Sequence[str | torch.dtype] | None = None,
                            max_elements: int = DEFAULT_MAX_ELEMENTS,
                            layout_kinds: Collection[str] | None = None,
                            offsets: Collection[str] | None = None,
                            value_modes: Collection[str] | None = None,
                            specials: bool = True) -> st.SearchStrategy[Case]:
    """Valid Cases of ``diagonal_backward``.

    ``Case.sizes`` are ``input_sizes`` (at most ``max_elements`` elements); ``Case.layout``
    is grad_output's layout, shaped like the diagonal (the other dims in order, then the
    diagonal's length), with its storage within ``max_elements``; every grad_output
    element is read, so specials go anywhere in it. The arguments and the shrinking are
    those of ``diagonal_cases``.
    """
    return _backward(narrowing(ranks=ranks, dtypes=dtypes, max_elements=max_elements,
                               layout_kinds=layout_kinds, offsets=offsets,
                               value_modes=value_modes, specials=specials))


def cases(op: str, **narrowing_args: object) -> st.SearchStrategy[Case]:
    """Valid Cases of ``op`` ("diagonal" or "diagonal_backward"), narrowed as those take."""
    if op == "diagonal":
        return diagonal_cases(**narrowing_args)  # type: ignore[arg-type]
    if op == "diagonal_backward":
        return diagonal_backward_cases(**narrowing_args)  # type: ignore[arg-type]
    raise InvalidArgument(f"op={op!r} must be one of {OPS}")


# --- pieces ------------------------------------------------------------------------------

def draw_sizes(draw: st.DrawFn, rank: int, budget: int) -> tuple[int, ...]:
    """Sizes whose product (zeros counted as 1) stays within ``budget``.

    Each size draws an exponent first (so long and short dims are both common whatever the
    rank), then a size up to 2**exponent; the size is (k + 1) % (cap + 1) so it shrinks
    towards 1 and 0 comes last: an empty tensor is kept only when a failure needs it.
    """
    fair = max(1, (budget.bit_length() - 1 + rank // 2) // rank)
    sizes: list[int] = []
    used = 1
    for _ in range(rank):
        remaining = budget // used
        top = min(remaining.bit_length() - 1, 2 * fair)
        exponent = draw(st.integers(0, top)) if top > 0 else 0
        cap = min(1 << exponent, remaining)
        k = draw(st.integers(0, cap))
        size = (k + 1) % (cap + 1)
        sizes.append(size)
        used *= max(size, 1)
    return tuple(sizes)


def draw_dims(draw: st.DrawFn, rank: int) -> tuple[int, int, int, int]:
    """(dim1, dim2, normalised dim1, normalised dim2): any ordered pair, either spelling."""
    d1 = draw(st.integers(0, rank - 1))
    j = draw(st.integers(0, rank - 2))
    d2 = j if j < d1 else j + 1
    spelled1 = d1 - rank if draw(st.booleans()) else d1
    spelled2 = d2 - rank if draw(st.booleans()) else d2
    return spelled1, spelled2, d1, d2


def draw_offset(draw: st.DrawFn, kinds: tuple[str, ...], rows: int, cols: int) -> int:
    """An offset of one of ``kinds`` for a (rows, cols) matrix, sign drawn second."""
    kind = draw(st.sampled_from(kinds)) if len(kinds) > 1 else kinds[0]
    if kind == "zero":
        return 0
    negative = draw(st.booleans())
    size = rows if negative else cols
    if kind == "one":
        magnitude = 1
    elif kind == "inside":
        magnitude = draw(st.integers(0, size))
    elif kind == "size_minus_one":
        magnitude = size - 1
    elif kind == "size":
        magnitude = size
    elif kind == "beyond":
        magnitude = size + draw(st.integers(1, 2**40))
    else:  # extreme
        magnitude = draw(st.sampled_from((INT64_MAX, INT64_MAX + negative)) | st.integers(
            2**31, INT64_MAX))
    return -magnitude if negative else magnitude


def view_position(layout: Layout) -> Callable[[int], int]:
    """Maps a row-major element number of the view to its storage index."""
    shape, strides = layout.shape, layout.strides

    def storage_index(k: int) -> int:
        index = layout.storage_offset
        for n, stride in zip(reversed(shape), reversed(strides), strict=True):
            k, i = divmod(k, n)
            index += i * stride
        return index

    return storage_index


def diagonal_position(layout: Layout, diag_shape: tuple[int, ...], d1: int, d2: int,
                      row0: int, col0: int) -> Callable[[int], int]:
    """Maps a row-major element number of the diagonal to the input's storage index."""
    others = [d for d in range(len(layout.shape)) if d not in (d1, d2)]

    def storage_index(k: int) -> int:
        k, i = divmod(k, diag_shape[-1])
        index = layout.storage_offset + (row0 + i) * layout.strides[d1] + (
            col0 + i) * layout.strides[d2]
        for d, n in zip(reversed(others), reversed(diag_shape[:-1]), strict=True):
            k, j = divmod(k, n)
            index += j * layout.strides[d]
        return index

    return storage_index


def positions(layout: Layout, diagonal: Callable[[int], int] | None = None,
              diag_numel: int = 0) -> st.SearchStrategy[int] | None:
    """Storage indices for specials: elements of the view, or of its diagonal if given."""
    numel = prod(layout.shape)
    if numel == 0:
        return None
    anywhere = st.integers(0, numel - 1).map(view_position(layout))
    if diagonal is None or diag_numel == 0:
        return anywhere
    return st.integers(0, diag_numel - 1).map(diagonal) | anywhere


# --- the Case strategies -----------------------------------------------------------------

def _diagonal(n: Narrowing) -> st.SearchStrategy[Case]:
    @st.composite
    def draw_case(draw: st.DrawFn) -> Case:
        rank = draw(st.integers(*n.ranks))
        sizes = draw_sizes(draw, rank, n.max_elements)
        dim1, dim2, d1, d2 = draw_dims(draw, rank)
        offset = draw_offset(draw, n.offsets, sizes[d1], sizes[d2])
        dtype = draw(st.sampled_from(n.dtypes))
        layout = draw(layout_strategy(sizes, n.layout_kinds, n.max_elements))
        where = None
        if n.specials:
            diag = diagonal_of(sizes, offset, dim1, dim2)
            where = positions(layout, diagonal_position(layout, diag.shape, d1, d2, diag.row0,
                                                        diag.col0), prod(diag.shape))
        values = draw(_values(_special_values(dtype), where, n.value_modes))
        return Case("diagonal", sizes, offset, dim1, dim2, dtype, layout, values)

    return draw_case()


def _backward(n: Narrowing) -> st.SearchStrategy[Case]:
    @st.composite
    def draw_case(draw: st.DrawFn) -> Case:
        rank = draw(st.integers(*n.ranks))
        sizes = draw_sizes(draw, rank, n.max_elements)
        dim1, dim2, d1, d2 = draw_dims(draw, rank)
        offset = draw_offset(draw, n.offsets, sizes[d1], sizes[d2])
        dtype = draw(st.sampled_from(n.dtypes))
        grad_shape = diagonal_of(sizes, offset, dim1, dim2).shape
        layout = draw(layout_strategy(grad_shape, n.layout_kinds, n.max_elements))
        where = positions(layout) if n.specials else None
        values = draw(_values(_special_values(dtype), where, n.value_modes))
        return Case("diagonal_backward", sizes, offset, dim1, dim2, dtype, layout, values)

    return draw_case()
