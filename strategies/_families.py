"""Case families: one Hypothesis example, several Cases.

Drawing a Case costs about 30 choices (rank, sizes, dims, offset, dtype, layout, values), and
Hypothesis spends tens of microseconds on each plus a fixed cost per example, so drawing,
not running, limited a GPU worker (600-780 Cases/s on an H200 host). A family draws one
base Case exactly as the Case strategies do, then siblings, each after a "one more?" draw,
that reuse the base's dear choices (sizes, dims, layout) and draw only their own few: about
5 choices a sibling. Every member is a complete, ordinary Case; the family is a tuple of
them, base first. A family shrinks like its failing member: siblings a failure does not
need are deleted with their "one more?" draws, the shared choices shrink as in the Case
strategies, and a sibling's own choices shrink as the base's do.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from dataclasses import replace

import torch
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from diagfuzz.core.case import Case
from diagfuzz.core.geometry import diagonal_of
from diagfuzz.specs import spec_of
from diagfuzz.strategies._args import DEFAULT_MAX_ELEMENTS, DEFAULT_RANKS, check_kinds
from diagfuzz.strategies._boundary import DEFAULT_BOUNDARY_ELEMENTS
from diagfuzz.strategies._cases import (
    INT64_MAX,
    Narrowing,
    _spec,
    case_strategy,
    draw_offset,
    dtype_options,
    narrowing,
    placement,
)
from diagfuzz.strategies._draws import below, choice, fast, ints
from diagfuzz.strategies._invalid import (
    INVALID_CLASSES,
    LOW_RANK,
    break_case,
    draw_invalid,
    invalid_cases,
    invalid_ops,
)
from diagfuzz.strategies._values import draw_values

#: The most Cases one family holds (the base and up to MAX_MEMBERS - 1 siblings). 12, not
#: 8: a worker's Hypothesis engine costs per example, and on a GPU the worker's drawing is
#: what limits it; families of up to 12 made a worker-bound suite run 17% more Cases/s (CPU,
#: aten impl: 2,202 -> 2,576 in shards) while all 17 planted bugs over 10 seeds took about
#: as many Cases and CPU to catch (2,325 -> 2,412 Cases, 3.1 -> 3.2 s; BENCHMARKS.md).
MAX_MEMBERS = 12
#: Cases per family on average at MAX_MEMBERS, measured for each stream (12 seeds x 125
#: families: diagonal 7.15, backward 7.45, invalid 7.39, all 7.33; single shards 6.6 to
#: 8.5; benchmarks/results/cpu-fast-draw/family-sizes.txt), near the 7.9 that a stop
#: chance of STOP_BELOW% a sibling alone gives. (It was 5.9 while every choice had its own
#: span: Hypothesis' mutator copied stopping "one more?" draws over others; ``fast``.) A
#: fuzz loop divides its Case budget by this to get Hypothesis' max_examples
#: (diagfuzz.harness.profiles).
MEAN_MEMBERS = 7.3
#: The chance of one more sibling that ``mean_members`` assumes: the means measured at 2, 4,
#: 8 and 12 members (1.87, 3.42, 5.74, 7.33) are within 3% of what it gives.
CONTINUE = 0.92

Family = tuple[Case, ...]
#: dims and offsets of a LOW_RANK Case (as ``_low_rank`` draws them).
SMALL_INTS = ints(-2, 2)
#: Offsets every empty diagonal shares: ±(2**63 - 1) and -2**63.
EXTREME_OFFSETS = (INT64_MAX, -INT64_MAX, -INT64_MAX - 1)


def mean_members(max_members: int) -> float:
    """Cases per family on average at ``max_members``: MEAN_MEMBERS at MAX_MEMBERS, 1 at 1,
    and between them the truncated geometric sum the "one more?" draws make (CONTINUE),
    scaled to meet MEAN_MEMBERS (a straight line was 12-25% low at 2 to 8)."""
    check_max_members(max_members)
    reach = (1 - CONTINUE ** (max_members - 1)) / (1 - CONTINUE ** (MAX_MEMBERS - 1))
    return 1 + (MEAN_MEMBERS - 1) * reach


def check_max_members(max_members: int) -> int:
    """A family size of at least 1 (1: families of one Case, no "one more?" draw)."""
    if isinstance(max_members, bool) or not isinstance(max_members, int) or max_members < 1:
        raise InvalidArgument(f"max_members={max_members!r} must be an int >= 1")
    return max_members


def diagonal_case_families(*, ranks: int | Sequence[int] = DEFAULT_RANKS,
                           dtypes: Sequence[str | torch.dtype] | None = None,
                           max_elements: int = DEFAULT_MAX_ELEMENTS,
                           layout_kinds: Collection[str] | None = None,
                           offsets: Collection[str] | None = None,
                           value_modes: Collection[str] | None = None,
                           specials: bool = True,
                           max_members: int = MAX_MEMBERS,
                           boundary: bool = True,
                           boundary_elements: int = DEFAULT_BOUNDARY_ELEMENTS,
                           ) -> st.SearchStrategy[Family]:
    """Families of 1 to ``max_members`` valid ``diagonal`` Cases (a tuple, base first).

    The base is drawn as ``diagonal_cases`` draws a Case (same arguments). Each sibling
    shares the base's sizes, dims and input layout (the input's shape is ``sizes``, whatever
    the offset and dtype) and draws its own offset (any of ``offsets``), dtype and values,
    with specials placed on its own diagonal: about 5 choices instead of about 30. A
    boundary base (``boundary``, ``boundary_elements``: as ``diagonal_cases``) makes a
    boundary family: its siblings share its sizes.

    Shrinks towards a family of one (the first "one more?" draw towards "no"), then as
    ``diagonal_cases`` does; a failing sibling keeps its own offset, dtype and values and
    shrinks them as the base's.
    """
    n = narrowing(ranks=ranks, dtypes=dtypes, max_elements=max_elements,
                  layout_kinds=layout_kinds, offsets=offsets, value_modes=value_modes,
                  specials=specials, boundary=boundary, boundary_elements=boundary_elements)
    return family_strategy("diagonal", n, check_max_members(max_members))


def diagonal_backward_case_families(*, ranks: int | Sequence[int] = DEFAULT_RANKS,
                                    dtypes: Sequence[str | torch.dtype] | None = None,
                                    max_elements: int = DEFAULT_MAX_ELEMENTS,
                                    layout_kinds: Collection[str] | None = None,
                                    offsets: Collection[str] | None = None,
                                    value_modes: Collection[str] | None = None,
                                    specials: bool = True,
                                    max_members: int = MAX_MEMBERS,
                                    boundary: bool = True,
                                    boundary_elements: int = DEFAULT_BOUNDARY_ELEMENTS,
                                    ) -> st.SearchStrategy[Family]:
    """Families of 1 to ``max_members`` valid ``diagonal_backward`` Cases (base first).

    The base is drawn as ``diagonal_backward_cases`` draws a Case. grad_output's shape is
    the diagonal's, so siblings share the base's input_sizes, dims and grad_output layout
    and draw their own dtype (word sizes 1 to 16 bytes) and values, and an offset among
    those whose diagonal has the base's length (``same_length_offsets``: the base's first),
    so every sibling of a base with a boundary length has that length too.

    Shrinks towards a family of one, then as ``diagonal_backward_cases`` does; a failing
    sibling's offset shrinks towards the base's.
    """
    n = narrowing(ranks=ranks, dtypes=dtypes, max_elements=max_elements,
                  layout_kinds=layout_kinds, offsets=offsets, value_modes=value_modes,
                  specials=specials, boundary=boundary, boundary_elements=boundary_elements)
    return family_strategy("diagonal_backward", n, check_max_members(max_members))


def invalid_case_families(op: str | Sequence[str] | None = None, *,
                          classes: Collection[str] | None = None,
                          ranks: int | Sequence[int] = DEFAULT_RANKS,
                          dtypes: Sequence[str | torch.dtype] | None = None,
                          max_elements: int = DEFAULT_MAX_ELEMENTS,
                          layout_kinds: Collection[str] | None = None,
                          devices: Sequence[str] = ("meta",),
                          max_members: int = MAX_MEMBERS) -> st.SearchStrategy[Family]:
    """Families of 1 to ``max_members`` invalid Cases of one op (base first).

    The base is drawn as ``invalid_cases`` draws a Case (same arguments). Most classes break
    a valid Case; siblings break the same valid Case, each as a class of its own (any of
    ``classes`` but the LOW_RANK ones, which build their own sizes): one to three choices
    each, about ten for a wrong grad_output. Siblings of a LOW_RANK base keep its class,
    sizes and layout and draw their own dims, offset, dtype and values. When ``classes``
    leaves a valid-based base no class to break it by, its family is just the base.

    Shrinks towards a family of one, then as ``invalid_cases`` does; a failing sibling's
    class shrinks towards the earliest class.
    """
    invalid_cases(op, classes=classes, ranks=ranks, dtypes=dtypes,
                  max_elements=max_elements, layout_kinds=layout_kinds, devices=devices)
    ops = invalid_ops(op)
    applicable = tuple(c for c, for_ops in INVALID_CLASSES.items()
                       if any(o in for_ops for o in ops))
    chosen = check_kinds("classes", classes, applicable)
    ops = tuple(o for o in ops if any(o in INVALID_CLASSES[c] for c in chosen))
    n = narrowing(ranks=ranks, dtypes=dtypes, max_elements=max_elements,
                  layout_kinds=layout_kinds)
    base = replace(n, max_elements=max(1, n.max_elements // 4))  # as invalid_cases
    valid = {o: case_strategy(o, base) for o in ops}
    breakable = {o: tuple(c for c in chosen if o in INVALID_CLASSES[c] and c not in LOW_RANK)
                 for o in ops}
    return _invalid_families(ops, chosen, n, valid, tuple(str(d) for d in devices),
                             breakable, check_max_members(max_members))


def case_families(op: str, *, ranks: int | Sequence[int] | None = None,
                  dtypes: Sequence[str | torch.dtype] | None = None,
                  max_elements: int = DEFAULT_MAX_ELEMENTS,
                  layout_kinds: Collection[str] | None = None,
                  offsets: Collection[str] | None = None,
                  value_modes: Collection[str] | None = None,
                  specials: bool = True,
                  max_members: int = MAX_MEMBERS,
                  boundary: bool = True,
                  boundary_elements: int = DEFAULT_BOUNDARY_ELEMENTS,
                  ) -> st.SearchStrategy[Family]:
    """Families of 1 to ``max_members`` valid Cases of ``op`` (any op of
    ``diagfuzz.specs``; base first), as ``diagonal_case_families`` describes them; ``ranks``
    defaults to the op's.

    Each sibling shares the base's sizes, dims and every tensor's layout, and draws its own
    offset, dtype and values (``draw_sibling``): where the op reads a diagonal-shaped
    tensor, an offset whose diagonal is as long as the base's (``same_length_offsets``).
    """
    spec = _spec(op)
    n = narrowing(ranks=spec.ranks if ranks is None else ranks, dtypes=dtypes,
                  max_elements=max_elements, layout_kinds=layout_kinds, offsets=offsets,
                  value_modes=value_modes, specials=specials, boundary=boundary,
                  boundary_elements=boundary_elements)
    return family_strategy(op, n, check_max_members(max_members))


def same_length_offsets(rows: int, cols: int, offset: int) -> tuple[int, ...]:
    """Offsets whose diagonal of a (rows, cols) matrix is as long as ``offset``'s.

    ``offset`` first, then, ascending, the ends of the runs of offsets of that length: for
    a non-empty diagonal of length L the offsets cols - L and L - rows and the runs
    [0, cols - rows] or [cols - rows, -1] of full-length diagonals; for an empty one ±size
    and EXTREME_OFFSETS (a kernel's offset arithmetic overflowing int64).
    """
    length = _length(rows, cols, offset)
    candidates = ({0, -1, cols - length, length - rows, cols - rows} if length
                  else {cols, -rows, *EXTREME_OFFSETS})
    others = sorted(o for o in candidates if o != offset and _length(rows, cols, o) == length)
    return (offset, *others)


def _length(rows: int, cols: int, offset: int) -> int:
    return max(0, min(rows, cols - offset) if offset >= 0 else min(rows + offset, cols))


# --- the family strategies ---------------------------------------------------------------

#: Each sibling follows its own "one more?" draw: below STOP_BELOW (of 100) the family ends.
_MORE = ints(0, 99)
STOP_BELOW = 8


def _siblings(draw: st.DrawFn, max_members: int) -> Iterator[int]:
    """Yields once per sibling to draw after the base, up to ``max_members - 1``.

    Each sibling is preceded by its own "one more?" draw, which shrinks to "no": the
    shrinker can delete any sibling with its draw, not only the last, so a failing later
    sibling loses the ones before it. (With one count drawn first, deleting an earlier
    sibling needed the count lowered and the sibling's span deleted together, which the
    shrinker did by luck: with families of up to 12, 6 of 20 seeds kept an unneeded
    sibling.)
    """
    for index in range(max_members - 1):
        if draw(_MORE) < STOP_BELOW:
            return
        yield index


def family_strategy(op: str, n: Narrowing, max_members: int) -> st.SearchStrategy[Family]:
    """A base Case of ``op`` drawn as ``case_strategy`` draws it, then siblings."""
    spec = spec_of(op)
    cases = case_strategy(op, n)
    sibling = spec.draw_sibling or draw_sibling

    @st.composite
    def draw_family(draw: st.DrawFn) -> Family:
        draw = fast(draw)
        base = draw(cases)
        family = [base]
        for _ in _siblings(draw, max_members):
            family.append(sibling(draw, base, n))
        return tuple(family)

    return draw_family()


def draw_sibling(draw: st.DrawFn, base: Case, n: Narrowing) -> Case:
    """A sibling of ``base``: its sizes, dims and layouts; its own offset, dtype and
    values. An op reading a diagonal-shaped tensor keeps the diagonal's length (the tensor
    must fit), so its offset is one of ``same_length_offsets`` (the base's first; for an
    op making a square tensor from it, ``OpSpec.square``, ± the base's); specials on a
    full tensor's diagonal follow the sibling's own offset."""
    spec = spec_of(base.op)
    rank = len(base.sizes)
    d1, d2 = base.dim1 % rank, base.dim2 % rank
    rows, cols = base.sizes[d1], base.sizes[d2]
    if any(o.role == "diagonal" for o in spec.operands):
        offsets = same_length_offsets(rows, cols, base.offset)
        if spec.square:  # the sizes follow from |offset| too: only its sign is free
            offsets = tuple(o for o in offsets if abs(o) == abs(base.offset))
        offset = offsets[below(draw, len(offsets))]
    else:
        offset = draw_offset(draw, n.offsets, rows, cols)
    dtype = draw(choice(dtype_options(n.dtypes)))
    diag = diagonal_of(base.sizes, offset, d1, d2)
    layouts = [(base.layout, spec.first), *((layout, o) for (_, layout, _), o in
                                            zip(base.others, spec.operands[1:], strict=True))]
    values = []
    for layout, operand in layouts:
        where = None
        if n.specials:
            reads = operand.role == "full" and operand.specials == "read"
            where = placement(layout, diag) if reads else placement(layout)
        values.append(draw_values(draw, dtype, where, n.value_modes))
    others = tuple((name, layout, v) for (name, layout, _), v in
                   zip(base.others, values[1:], strict=True))
    return base.replace(offset=offset, dtype=dtype, values=values[0], others=others)


def _invalid_families(ops: tuple[str, ...], classes: tuple[str, ...], n: Narrowing,
                      valid: dict[str, st.SearchStrategy[Case]], devices: tuple[str, ...],
                      breakable: dict[str, tuple[str, ...]],
                      max_members: int) -> st.SearchStrategy[Family]:
    @st.composite
    def draw_family(draw: st.DrawFn) -> Family:
        draw = fast(draw)
        base, unbroken = draw_invalid(draw, ops, classes, n, valid, devices)
        kinds = breakable[base.op]
        if unbroken is not None and not kinds:
            return (base,)
        family = [base]
        for _ in _siblings(draw, max_members):
            if unbroken is None:
                family.append(_low_rank_sibling(draw, base, n))
                continue
            kind = draw(choice(kinds)) if len(kinds) > 1 else kinds[0]
            family.append(break_case(draw, kind, unbroken, n, devices))
        return tuple(family)

    return draw_family()


def _low_rank_sibling(draw: st.DrawFn, base: Case, n: Narrowing) -> Case:
    """A LOW_RANK Case with ``base``'s sizes and layout, its own dims, offset, dtype and
    values (drawn as ``_low_rank`` draws them)."""
    dim1, dim2, offset = draw(SMALL_INTS), draw(SMALL_INTS), draw(SMALL_INTS)
    fixed = spec_of(base.op).dims
    if fixed is not None:
        dim1, dim2 = fixed
    dtype = draw(choice(n.dtypes))
    values = draw_values(draw, dtype, placement(base.layout), n.value_modes)
    return base.replace(dim1=dim1, dim2=dim2, offset=offset, dtype=dtype, values=values)
