"""Valid Cases of diagonal (diagonal_copy) and diagonal_backward.

One composite draw per Case, in a fixed order: rank, sizes, dims, offset, dtype, layout of
the tensor the op reads, values. Every choice puts its simplest option first, so a failing
Case shrinks towards rank 2, small sizes, dims (0, 1), offset 0, float32, a contiguous
layout and plain values.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from math import prod
from typing import TypeVar

import torch
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from diagfuzz.core.case import Case, Layout, Values
from diagfuzz.core.geometry import Diagonal, diagonal_of
from diagfuzz.specs import OpSpec, spec_of
from diagfuzz.strategies._args import (
    DEFAULT_MAX_ELEMENTS,
    DEFAULT_RANKS,
    check_dtypes,
    check_flag,
    check_kinds,
    check_max_elements,
    check_ranks,
)
from diagfuzz.strategies._boundary import (
    DEFAULT_BOUNDARY_ELEMENTS,
    MAX_EXTRA,
    boundary_options,
    draw_option,
    is_boundary,
)
from diagfuzz.strategies._draws import BOOLS, INDEX, below, choice, fast, ints
from diagfuzz.strategies._layouts import LAYOUT_KINDS, draw_layout, layout_strategy
from diagfuzz.strategies._values import VALUE_MODES, draw_values

#: Offset kinds in shrink order. Each is drawn with a sign (positive first); "size" is the
#: length of dim2 for positive offsets and of dim1 for negative ones.
OFFSET_KINDS = ("zero", "one", "inside", "size_minus_one", "size", "beyond", "extreme")
INT64_MAX = 2**63 - 1
T = TypeVar("T")


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
    #: Whether a share of the Cases are boundary Cases (``strategies._boundary``), and the
    #: budget of those.
    boundary: bool = False
    boundary_elements: int = DEFAULT_BOUNDARY_ELEMENTS


def narrowing(*, ranks: int | Sequence[int] = DEFAULT_RANKS,
              dtypes: Sequence[str | torch.dtype] | None = None,
              max_elements: int = DEFAULT_MAX_ELEMENTS,
              layout_kinds: Collection[str] | None = None,
              offsets: Collection[str] | None = None,
              value_modes: Collection[str] | None = None,
              specials: bool = True,
              boundary: bool = False,
              boundary_elements: int = DEFAULT_BOUNDARY_ELEMENTS) -> Narrowing:
    """Check the narrowing arguments once, with errors naming the argument.

    ``boundary`` is off here: the valid Case strategies turn it on by default, the
    invalid ones never (a broken call is refused before any block is reached).
    """
    return Narrowing(
        ranks=check_ranks(ranks),
        dtypes=check_dtypes(dtypes),
        max_elements=check_max_elements(max_elements),
        layout_kinds=check_kinds("layout_kinds", layout_kinds, LAYOUT_KINDS),
        offsets=check_kinds("offsets", offsets, OFFSET_KINDS),
        value_modes=check_kinds("value_modes", value_modes, VALUE_MODES),
        specials=check_flag("specials", specials),
        boundary=check_flag("boundary", boundary),
        boundary_elements=check_max_elements(boundary_elements, "boundary_elements"),
    )


def diagonal_cases(*, ranks: int | Sequence[int] = DEFAULT_RANKS,
                   dtypes: Sequence[str | torch.dtype] | None = None,
                   max_elements: int = DEFAULT_MAX_ELEMENTS,
                   layout_kinds: Collection[str] | None = None,
                   offsets: Collection[str] | None = None,
                   value_modes: Collection[str] | None = None,
                   specials: bool = True,
                   boundary: bool = True,
                   boundary_elements: int = DEFAULT_BOUNDARY_ELEMENTS,
                   ) -> st.SearchStrategy[Case]:
    """Valid Cases of ``diagonal`` (run as ``aten::diagonal_copy``).

    ``Case.layout`` is the input's layout and its shape is ``Case.sizes``. ``ranks`` is a
    rank or an inclusive (low, high) pair (default 2..8); sizes include 0 and 1 and the
    input's storage holds at most ``max_elements`` elements. dim1/dim2 are any ordered pair
    of distinct dims, each spelled positive or negative. ``offsets`` narrows OFFSET_KINDS:
    0, ±1, inside the matrix, ±(size - 1), ±size, beyond the sizes (an empty diagonal) and
    extremes up to ±(2**63 - 1) (and -2**63). ``dtypes`` (default: every available dtype),
    ``layout_kinds`` (see ``layouts``), ``value_modes`` ("normal", "bits") and
    ``specials`` (about six Cases in ten carry 1 to 8 special bit patterns, seven in eight of
    them on the diagonal's elements, the rest anywhere in the input's view; see
    ``special_values``) narrow the rest. Offsets, sizes of 0 and dtypes are weighted so
    that about two Cases in three read a non-empty diagonal, and bool and int64 come up
    three times as often as other dtypes (see OFFSET_WEIGHTS, ZERO_ONE_IN, DTYPE_WEIGHTS).

    With ``boundary`` (the default) about BOUNDARY_PERCENT Cases in 100 are boundary Cases
    (``strategies._boundary``): the diagonal's length or a batch extent is B - 1, B or
    B + 1 for a block size B (64 to 2,048), beyond ``max_elements`` where needed but with
    every tensor, the result included, within ``boundary_elements``. The input's
    *storage* is what that bounds, not its logical size: an input too large to hold
    gets a diagonal dim expanded (stride 0), as ``expand`` would give it. Pass
    ``boundary=False`` to keep every Case within ``max_elements``, or the same cap as
    ``boundary_elements`` to bound both alike.

    Shrinks towards rank 2, sizes of 1, dims (0, 1), offset 0, float32 (or the first of
    ``dtypes``), a contiguous layout, seed 0, mode "normal" and no specials; a boundary
    Case towards the smallest block that still fails (B, then B + 1, then B - 1 of
    it), and to a plain Case when the failure needs no boundary size.
    """
    return case_strategy("diagonal", narrowing(
        ranks=ranks, dtypes=dtypes, max_elements=max_elements, layout_kinds=layout_kinds,
        offsets=offsets, value_modes=value_modes, specials=specials, boundary=boundary,
        boundary_elements=boundary_elements))


def diagonal_backward_cases(*, ranks: int | Sequence[int] = DEFAULT_RANKS,
                            dtypes: Sequence[str | torch.dtype] | None = None,
                            max_elements: int = DEFAULT_MAX_ELEMENTS,
                            layout_kinds: Collection[str] | None = None,
                            offsets: Collection[str] | None = None,
                            value_modes: Collection[str] | None = None,
                            specials: bool = True,
                            boundary: bool = True,
                            boundary_elements: int = DEFAULT_BOUNDARY_ELEMENTS,
                            ) -> st.SearchStrategy[Case]:
    """Valid Cases of ``diagonal_backward``.

    ``Case.sizes`` are ``input_sizes`` (at most ``max_elements`` elements); ``Case.layout``
    is grad_output's layout, shaped like the diagonal (the other dims in order, then the
    diagonal's length), with its storage within ``max_elements``; every grad_output
    element is read, so specials go anywhere in it. Boundary Cases (``boundary``) have a
    diagonal length or an extent of input_sizes at a block size, and input_sizes and
    grad_output's storage within ``boundary_elements``: a length L needs L² elements.
    The arguments and the shrinking are those of ``diagonal_cases``.
    """
    return case_strategy("diagonal_backward", narrowing(
        ranks=ranks, dtypes=dtypes, max_elements=max_elements, layout_kinds=layout_kinds,
        offsets=offsets, value_modes=value_modes, specials=specials, boundary=boundary,
        boundary_elements=boundary_elements))


def cases(op: str, *, ranks: int | Sequence[int] | None = None,
          dtypes: Sequence[str | torch.dtype] | None = None,
          max_elements: int = DEFAULT_MAX_ELEMENTS,
          layout_kinds: Collection[str] | None = None,
          offsets: Collection[str] | None = None,
          value_modes: Collection[str] | None = None,
          specials: bool = True,
          boundary: bool = True,
          boundary_elements: int = DEFAULT_BOUNDARY_ELEMENTS) -> st.SearchStrategy[Case]:
    """Valid Cases of ``op`` (any op of ``diagfuzz.specs``), narrowed as ``diagonal_cases``
    says; ``ranks`` defaults to the op's."""
    spec = _spec(op)
    return case_strategy(op, narrowing(
        ranks=spec.ranks if ranks is None else ranks, dtypes=dtypes,
        max_elements=max_elements, layout_kinds=layout_kinds, offsets=offsets,
        value_modes=value_modes, specials=specials, boundary=boundary,
        boundary_elements=boundary_elements))


def _spec(op: str) -> OpSpec:
    """``op``'s spec; Hypothesis' InvalidArgument naming the known ops otherwise."""
    try:
        return spec_of(op)
    except ValueError as exc:
        raise InvalidArgument(f"op={op!r}: {exc}") from None


# --- pieces ------------------------------------------------------------------------------

#: About one size in ZERO_ONE_IN is 0 (not more: an empty tensor hides every other bug;
#: at one in 32, one rank-8 Case in five was empty). The residue that means 0 is the middle
#: one, not the last: Hypothesis often draws a range's upper bound.
ZERO_ONE_IN = 64


def draw_sizes(draw: st.DrawFn, ranks: tuple[int, int], budget: int) -> tuple[int, ...]:
    """Sizes of a rank in ``ranks`` whose product (zeros counted as 1) is within ``budget``.

    The rank, then one number per dim encoding an exponent (scaled to the rank's fair
    share of the budget, so long and short dims are both common whatever the rank),
    whether the size is 0 (one in ZERO_ONE_IN) and a size from 1 to 2**exponent. Sizes
    shrink towards 1; 0 is kept only when a failure needs an empty tensor.
    """
    rank = below(draw, ranks[1] - ranks[0] + 1) + ranks[0]
    top = max(budget.bit_length() - 1, 0)
    per_dim = ints(0, (top + 1) * ZERO_ONE_IN * (budget + 1) - 1)
    return fit_sizes([draw(per_dim) for _ in range(rank)], budget)


def fit_sizes(raw: list[int], budget: int) -> tuple[int, ...]:
    """Turn drawn numbers into sizes within ``budget`` (see ``draw_sizes``)."""
    if not raw:
        return ()
    top = max(budget.bit_length() - 1, 0)
    fair = min(top, max(1, 2 * ((top + len(raw) // 2) // len(raw))))
    sizes: list[int] = []
    used = 1
    for number in raw:
        number, exponent = divmod(number, top + 1)
        k, zero = divmod(number, ZERO_ONE_IN)
        cap = min(1 << (exponent * fair // top if top else 0), budget // used)
        size = 0 if zero == ZERO_ONE_IN // 2 else 1 + k % cap
        sizes.append(size)
        used *= max(size, 1)
    return tuple(sizes)


def draw_dims(draw: st.DrawFn, rank: int) -> tuple[int, int, int, int]:
    """(dim1, dim2, normalised dim1, normalised dim2): any ordered pair, either spelling.

    One draw reduced modulo the 4 * rank * (rank - 1) choices (so all are about equally
    likely); 0 is dims (0, 1) spelled positive.
    """
    pick = draw(INDEX) % (4 * rank * (rank - 1))
    pair, spelling = divmod(pick, 4)
    d1, d2 = divmod(pair, rank - 1)
    d2 += d2 >= d1
    return (d1 - rank if spelling & 1 else d1), (d2 - rank if spelling & 2 else d2), d1, d2


def _dims(draw: st.DrawFn, rank: int,
          fixed: tuple[int, int] | None) -> tuple[int, int, int, int]:
    """``draw_dims``, or ``fixed`` without a draw for an op whose dims are not arguments
    (``diag``)."""
    if fixed is None:
        return draw_dims(draw, rank)
    return fixed[0], fixed[1], fixed[0] % rank, fixed[1] % rank


_BEYOND = st.integers(1, 2**40)
#: Extreme magnitudes: 2**63 - 1, 2**63 (-2**63 as a negative offset; 2**63 - 1 as a
#: positive one), or (0) one of _LARGE: one uniform draw of three, so each exact extreme
#: comes up in a third of the extreme offsets.
_EXTREMES = st.sampled_from((INT64_MAX, INT64_MAX + 1, 0))
_LARGE = st.integers(2**31, INT64_MAX)


#: How often each offset kind is listed among the options (per sign; "zero" has one sign).
#: size, beyond and extreme give empty diagonals, which read no value at all; "inside"
#: listed three times leaves about two offsets in three with a non-empty diagonal. More
#: weight starved the rare classes (-2**63, ±(size - 1) of a dim >= 3): some 2,000-Case
#: runs missed them.
OFFSET_WEIGHTS = {"inside": 3}


@lru_cache(maxsize=64)
def _offset_options(kinds: tuple[str, ...]) -> tuple[tuple[str, bool], ...]:
    """(kind, negative) pairs, simplest first, weighted by OFFSET_WEIGHTS: one draw picks
    both. A kind's copies stay together (not appended at the end, as ``weighted`` does):
    from a far copy of "inside" the shrinker did not always find -1, two places down."""
    return tuple((k, neg) for k in kinds for _ in range(OFFSET_WEIGHTS.get(k, 1))
                 for neg in (False, True) if k != "zero" or not neg)


def draw_offset(draw: st.DrawFn, kinds: tuple[str, ...], rows: int, cols: int) -> int:
    """An offset of one of ``kinds`` for a (rows, cols) matrix, either sign."""
    options = _offset_options(kinds)
    kind, negative = draw(choice(options)) if len(options) > 1 else options[0]
    if kind == "zero":
        return 0
    size = rows if negative else cols
    if kind == "one":
        magnitude = 1
    elif kind == "inside":  # strictly inside when there is room: 2 .. size - 2
        magnitude = 2 + below(draw, size - 3) if size >= 4 else below(draw, size + 1)
    elif kind == "size_minus_one":
        magnitude = size - 1
    elif kind == "size":
        magnitude = size
    elif kind == "beyond":
        magnitude = size + draw(_BEYOND)
    else:  # extreme: up to 2**63 - 1 either way, and -2**63
        magnitude = min(draw(_EXTREMES) or draw(_LARGE), INT64_MAX + negative)
    return -magnitude if negative else magnitude


#: dtypes listed more than once among the choices: each is alone in its class of bugs, so a
#: short run must still meet it on a non-empty diagonal: bool (its byte must be exactly 0 or
#: 1) and int64 (the widest integers, which any narrower word truncates).
DTYPE_WEIGHTS = {"bool": 3, "int64": 3}


def weighted(options: tuple[T, ...], weights: dict[T, int]) -> tuple[T, ...]:
    """``options`` in their order, then the extra copies ``weights`` asks for (an option
    listed w times is drawn w times as often). Extras go last: shrinking lowers the index,
    and the simple options keep the small indices the shrinker tries first."""
    return options + tuple(o for o in options for _ in range(weights.get(o, 1) - 1))


@lru_cache(maxsize=64)
def dtype_options(dtypes: tuple[str, ...]) -> tuple[str, ...]:
    """``dtypes`` for one uniform draw, weighted by DTYPE_WEIGHTS."""
    return weighted(dtypes, DTYPE_WEIGHTS)


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


def diagonal_position(layout: Layout, diag: Diagonal) -> Callable[[int], int]:
    """Maps a row-major element number of the diagonal to the input's storage index."""
    others = [d for d in range(len(layout.shape)) if d not in (diag.dim1, diag.dim2)]
    strides = layout.strides

    def storage_index(k: int) -> int:
        k, i = divmod(k, diag.length)
        index = (layout.storage_offset + (diag.row0 + i) * strides[diag.dim1]
                 + (diag.col0 + i) * strides[diag.dim2])
        for d, n in zip(reversed(others), reversed(diag.shape[:-1]), strict=True):
            k, j = divmod(k, n)
            index += j * strides[d]
        return index

    return storage_index


#: Of the specials of a diagonal Case, READ_SHARE in 8 go on the diagonal (the elements
#: the op reads), the rest anywhere in the view (a kernel reading the wrong element).
READ_SHARE = 7


def placement(layout: Layout, diag: Diagonal | None = None) -> Callable[[int], int] | None:
    """Where a special with drawn number i goes; None when the view has no elements.

    With a non-empty ``diag``, READ_SHARE of every 8 numbers (i % 8 < READ_SHARE, so 0 and
    everything it shrinks to) land on the diagonal's elements, the others anywhere in the
    view. Without one (diagonal_backward reads every element of grad_output's view; an
    empty diagonal reads nothing) any number lands anywhere in the view.
    """
    numel = prod(layout.shape)
    if numel == 0:
        return None
    anywhere = view_position(layout)
    diag_numel = prod(diag.shape) if diag is not None else 0
    if diag is None or diag_numel == 0:
        return lambda i: anywhere(i % numel)
    on_diagonal = diagonal_position(layout, diag)
    return lambda i: (on_diagonal((i >> 3) % diag_numel) if i % 8 < READ_SHARE
                      else anywhere((i >> 3) % numel))


# --- the Case strategies -----------------------------------------------------------------

@dataclass(frozen=True)
class Geometry:
    """What a Case draws before its dtype: sizes, dims (as spelled, and normalised),
    offset, the budget of the tensor the op reads and the dims its layout must expand."""

    sizes: tuple[int, ...]
    dim1: int
    dim2: int
    d1: int
    d2: int
    offset: int
    budget: int
    expand: tuple[int, ...] = ()


def boundary_span(op: str, n: Narrowing) -> st.SearchStrategy[Geometry] | None:
    """The boundary geometries of ``op`` under ``n``: a strategy of its own, so its
    choices make one span of the choice sequence; None when boundary draws are off or no
    boundary Case fits."""
    if not n.boundary:
        return None
    spec = spec_of(op)
    full, square, dims = spec.full, spec.square, spec.dims
    options = boundary_options(full, n.boundary_elements, n.ranks, "zero" in n.offsets,
                               "expanded" in n.layout_kinds, square)
    if not options.options:
        return None

    @st.composite
    def draw_span(draw: st.DrawFn) -> Geometry:
        draw = fast(draw)
        return draw_boundary(draw, full, n, draw_option(draw, options), square=square,
                             fixed_dims=dims)

    return draw_span()


def draw_geometry(draw: st.DrawFn, n: Narrowing,
                  boundary: st.SearchStrategy[Geometry] | None,
                  fixed_dims: tuple[int, int] | None = None, square: bool = False) -> Geometry:
    """A plain Case's sizes, dims and offset; then, with ``boundary``, one draw that makes
    about BOUNDARY_PERCENT Cases in 100 boundary ones, drawn in the span ``boundary``.

    The plain geometry comes first even for a boundary Case so that the shrinker turns a
    boundary Case into a plain one in one step, lowering that draw by one and deleting the
    span (its fix-up for a size dependency): the plain choices stay where they were and
    every later choice (dtype, layout, values) keeps its place. ``fixed_dims``: an op's
    dims when they are not its arguments (``OpSpec.dims``). ``square``: an op that makes
    the tensor of the sizes from the diagonal (``OpSpec.square``): both diagonal dims are
    one size m (``square_sizes``), and the offset is of a kind within ±m
    (``square_offsets``).
    """
    sizes = draw_sizes(draw, n.ranks, n.max_elements)
    dim1, dim2, d1, d2 = _dims(draw, len(sizes), fixed_dims)
    kinds = n.offsets
    if square:
        sizes = square_sizes(sizes, d1, d2, n.max_elements)
        kinds = square_offsets(kinds)
    offset = draw_offset(draw, kinds, sizes[d1], sizes[d2])
    tie = draw(_TIES)
    if not square:
        sizes = tie_sizes(sizes, d1, d2, offset, tie, n.max_elements)
    if boundary is not None and is_boundary(draw):
        return draw(boundary)
    return Geometry(sizes, dim1, dim2, d1, d2, offset, n.max_elements)


#: The relations between sizes that independent size draws almost never make, as the
#: factor model names them (``diagfuzz.specs.factors``): the two diagonal dims equal
#: (square), the other diagonal dim equal to |offset| (offset_equal), a batch dim equal to
#: a diagonal dim (batch_equal). One draw in TIE_IN of each picks one; 0 (what shrinking
#: goes to) ties nothing. Drawn for every plain Case, so the choice sequence keeps its
#: shape; an op whose sizes are square already (``OpSpec.square``) ignores it.
TIES = ("square", "offset_equal", "batch_equal")
TIE_IN = 16
_TIES = ints(0, TIE_IN - 1)


def tie_sizes(sizes: tuple[int, ...], d1: int, d2: int, offset: int, tie: int,
              budget: int) -> tuple[int, ...]:
    """``sizes`` with relation ``TIES[tie - 1]`` made (tie 1..3), where the tensor stays
    within ``budget`` elements; otherwise as they are."""
    if not 1 <= tie <= len(TIES):
        return sizes
    relation = TIES[tie - 1]
    out = list(sizes)
    if relation == "square":
        out[d2] = sizes[d1]
    elif relation == "offset_equal":
        if not 2 <= abs(offset) <= budget:
            return sizes
        out[d1 if offset > 0 else d2] = abs(offset)
    else:
        batch = [d for d in range(len(sizes)) if d not in (d1, d2)]
        if not batch:
            return sizes
        spread = sizes[d1] + sizes[d2]  # which batch dim, and which diagonal dim's size
        out[batch[spread % len(batch)]] = sizes[d1] if spread % 2 else sizes[d2]
    return tuple(out) if prod(max(s, 1) for s in out) <= budget else sizes


def draw_boundary(draw: st.DrawFn, full: str, n: Narrowing,
                  option: tuple[str, int], *, square: bool = False,
                  fixed_dims: tuple[int, int] | None = None) -> Geometry:
    """The geometry of a boundary Case of ``option``, a (kind, size) pair (see
    ``strategies._boundary``).

    The rank, then for a length the extra e of the longer diagonal dim (0 first) and
    which dim it is; the other dims' sizes as ``draw_sizes`` draws them, within what is
    left of both budgets once the boundary extent is taken (so the Case costs about what
    its boundary extent does); dims; for an extent, its position and a plain offset, for
    a length an offset of the full-length run (0 first). An input of diagonal whose
    storage would exceed the budget gets its longer diagonal dim expanded. For an op
    that makes a square tensor from the diagonal (``square``), an extent is a batch dim
    and a length L sits on an (L + e) x (L + e) matrix at offset ±e. ``fixed_dims``: as
    ``draw_geometry``'s.
    """
    (kind, size), cap = option, n.boundary_elements
    # ``full``: what the tensor of the sizes is to the op (OpSpec.full): "read" (its result
    # is diagonal-shaped: an extent of it is a batch dim) or "result" (held in memory).
    batch = full == "read" or square
    low = max(n.ranks[0], 3) if batch and kind == "extent" else n.ranks[0]
    rank = below(draw, n.ranks[1] - low + 1) + low
    share = max(1, min(cap, n.max_elements) // size)  # of the other extents together
    if kind == "extent":
        rest = _draw_rest(draw, rank - 1, share)
        dim1, dim2, d1, d2 = _dims(draw, rank, fixed_dims)
        if batch:  # an extent of the diagonal-shaped tensor: a batch dim
            slots = [d for d in range(rank) if d not in (d1, d2)]
            at = slots[below(draw, len(slots))]
        else:  # input_sizes are the result: any dim
            at = below(draw, rank)
        sizes = (*rest[:at], size, *rest[at:])
        offset = draw_offset(draw, n.offsets, sizes[d1], sizes[d2])
        return Geometry(sizes, dim1, dim2, d1, d2, offset, cap)
    held = full == "result" or "expanded" not in n.layout_kinds
    room = (cap // size - size) if not square else _square_room(size, cap)
    extra = below(draw, min(MAX_EXTRA, room) + 1 if held else MAX_EXTRA + 1)
    longer = size + extra
    if square:  # the diagonal, e off the main one, of a square it makes
        rows = cols = longer if _offset_kind(extra) in n.offsets else size
    else:
        rows, cols = (longer, size) if extra and draw(BOOLS) else (size, longer)
    if held:
        share = max(1, min(cap // (rows * cols), n.max_elements // size))
    rest = _draw_rest(draw, rank - 2, share)
    dim1, dim2, d1, d2 = _dims(draw, rank, fixed_dims)
    others = iter(rest)
    sizes = tuple(rows if d == d1 else cols if d == d2 else next(others) for d in range(rank))
    if square:
        offset = (rows - size) * (-1 if rows > size and draw(BOOLS) else 1)
        return Geometry(sizes, dim1, dim2, d1, d2, offset, cap)
    runs = [o for o in range(extra + 1) if _offset_kind(o) in n.offsets]  # "zero" is
    offset = runs[below(draw, len(runs))] * (1 if cols >= rows else -1)
    expand: tuple[int, ...] = ()
    if prod(max(s, 1) for s in rest) * rows * cols > cap:  # diagonal only (not held)
        expand = (d2 if cols >= rows else d1,)
    return Geometry(sizes, dim1, dim2, d1, d2, offset, cap, expand)


def _square_room(size: int, cap: int) -> int:
    """The largest e with (size + e)² within ``cap`` (0 when size² alone fills it)."""
    room = 0
    while room < MAX_EXTRA and (size + room + 1) ** 2 <= cap:
        room += 1
    return room


def square_sizes(sizes: tuple[int, ...], d1: int, d2: int, budget: int) -> tuple[int, ...]:
    """``sizes`` with both diagonal dims one size m: the longer one's where the tensor
    stays within ``budget`` elements, else the shorter one's (which always does)."""
    rest = prod(max(size, 1) for d, size in enumerate(sizes) if d not in (d1, d2))
    longer, shorter = max(sizes[d1], sizes[d2]), min(sizes[d1], sizes[d2])
    m = longer if longer * longer * rest <= budget else shorter
    return tuple(m if d in (d1, d2) else size for d, size in enumerate(sizes))


@lru_cache(maxsize=64)
def square_offsets(kinds: tuple[str, ...]) -> tuple[str, ...]:
    """The offset kinds of ``kinds`` an op making a square of the diagonal can have:
    "beyond" and "extreme" would ask for a result larger than memory (the invalid class
    huge_offset), so they become "size" (an empty diagonal, ±m)."""
    return tuple(k for k in OFFSET_KINDS
                 if (k in kinds and k not in ("beyond", "extreme"))
                 or (k == "size" and ("beyond" in kinds or "extreme" in kinds)))


def square_geometry(g: Geometry) -> Geometry:
    """``g`` as an op that makes the tensor of its sizes from the diagonal sees it
    (``OpSpec.square``): both diagonal dims as long as the shorter one, m, and ``|offset|``
    at most m (an offset beyond becomes ±m: an empty diagonal, an m x m result of zeros).
    The result never grows: m² is within the sizes' budget."""
    m = min(g.sizes[g.d1], g.sizes[g.d2])
    sizes = tuple(m if d in (g.d1, g.d2) else size for d, size in enumerate(g.sizes))
    return replace(g, sizes=sizes, offset=max(-m, min(m, g.offset)))


def _draw_rest(draw: st.DrawFn, count: int, budget: int) -> tuple[int, ...]:
    """``count`` sizes within ``budget``, drawn as ``draw_sizes`` draws a rank's."""
    top = max(budget.bit_length() - 1, 0)
    per_dim = ints(0, (top + 1) * ZERO_ONE_IN * (budget + 1) - 1)
    return fit_sizes([draw(per_dim) for _ in range(count)], budget)


def _offset_kind(magnitude: int) -> str:
    """The OFFSET_KINDS kind of a full-length offset of a ``length`` Case (at most
    MAX_EXTRA, far inside a dim of 63 or more)."""
    return ("zero", "one")[magnitude] if magnitude < 2 else "inside"


def case_strategy(op: str, n: Narrowing) -> st.SearchStrategy[Case]:
    """Valid Cases of ``op``: a geometry (plain, or a boundary one), then the dtype and
    every tensor the op reads (``draw_tensors``; an op's spec may draw them its own way)."""
    spec = spec_of(op)
    n = op_narrowing(spec, n)
    boundary = boundary_span(op, n)

    @st.composite
    def draw_case(draw: st.DrawFn) -> Case:
        draw = fast(draw)
        g = draw_geometry(draw, n, boundary, fixed_dims=spec.dims, square=spec.square)
        if spec.square:  # a boundary geometry's extents: its diagonal dims made square
            g = square_geometry(g)
        if spec.draw_case is not None:
            return spec.draw_case(draw, n, g)
        dtype = draw(choice(dtype_options(n.dtypes)))
        return tensors_case(op, g, dtype, draw_tensors(draw, spec, n, g, dtype))

    return draw_case()


def op_narrowing(spec: OpSpec, n: Narrowing) -> Narrowing:
    """``n`` within the ranks ``spec``'s op can have (``OpSpec.max_rank``): a run narrowed
    to ranks 3..4 still draws ``diag``'s rank-2 Cases."""
    top = spec.max_rank
    if top is None or n.ranks[1] <= top:
        return n
    return replace(n, ranks=(min(n.ranks[0], top), top))


def draw_tensors(draw: st.DrawFn, spec: OpSpec, n: Narrowing, g: Geometry,
                 dtype: str) -> list[tuple[str, Layout, Values]]:
    """A layout and values for every tensor ``spec``'s op reads, in argument order: a
    "full" one shaped like the sizes (within the geometry's budget, with its expanded
    dims), a "diagonal" one like their diagonal; specials on what the op reads (the
    diagonal of a full tensor, all of a diagonal-shaped one) or anywhere."""
    diag = diagonal_of(g.sizes, g.offset, g.d1, g.d2)
    found = []
    for operand in spec.operands:
        full = operand.role == "full"
        shape = g.sizes if full else diag.shape
        layout = draw_some_layout(draw, shape, n, g.budget, g.expand if full else ())
        where = None
        if n.specials:
            reads = full and operand.specials == "read"
            where = placement(layout, diag) if reads else placement(layout)
        found.append((operand.name, layout, draw_values(draw, dtype, where, n.value_modes)))
    return found


def tensors_case(op: str, g: Geometry, dtype: str,
                 tensors: list[tuple[str, Layout, Values]], **kw: object) -> Case:
    """The Case of ``op`` with geometry ``g``, ``dtype`` and ``tensors`` (the first is the
    Case's ``layout``/``values``, the others its ``others``)."""
    (_, layout, values), *others = tensors
    return Case(op, g.sizes, g.offset, g.dim1, g.dim2, dtype, layout, values,
                others=tuple(others), **kw)  # type: ignore[arg-type]


def draw_some_layout(draw: st.DrawFn, shape: tuple[int, ...], n: Narrowing,
                     budget: int | None = None, expand: tuple[int, ...] = ()) -> Layout:
    """A layout as ``n.layout_kinds`` allow: without "contiguous", never the plain one;
    the dims of ``expand`` always expanded."""
    budget = n.max_elements if budget is None else budget
    if "contiguous" in n.layout_kinds:
        return draw_layout(draw, shape, n.layout_kinds, budget, expand)
    return draw(layout_strategy(shape, n.layout_kinds, budget, expand))
