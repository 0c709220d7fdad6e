"""Layouts of the tensor an op reads: how a real program could have produced it.

A drawn layout is the result of a short recipe applied to a fresh contiguous buffer: a
physical dimension order (row-major, channels-last style, or any permutation), expanded
dims (stride 0, as ``.sum().backward()`` hands out), slicing with steps and trailing
padding, and a storage offset. ``Layout`` keeps only the resulting shape, strides and
storage offset, plus ``kinds`` tags naming which steps of the recipe applied.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from math import factorial, prod

from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from diagfuzz.core.case import Layout
from diagfuzz.core.names import LAYOUT_KINDS as LAYOUT_KINDS  # re-exported
from diagfuzz.strategies._args import DEFAULT_MAX_ELEMENTS, check_kinds, check_max_elements
from diagfuzz.strategies._draws import below, choice, ints

#: Layout kinds in shrink order: each Layout's ``kinds`` tags are a sub-tuple of these.
#: The largest slicing step and trailing padding per dim (they multiply the storage).
MAX_STEP = 4
MAX_PAD = 3


def layouts(shape: Sequence[int], *, kinds: Collection[str] | None = None,
            max_elements: int = DEFAULT_MAX_ELEMENTS) -> st.SearchStrategy[Layout]:
    """Strided layouts of ``shape`` whose storage holds at most ``max_elements`` elements.

    ``kinds`` narrows the recipe to a subset of LAYOUT_KINDS: "permuted" (any physical dim
    order), "channels_last" (dim 1 innermost, rank >= 3), "sliced" (steps up to MAX_STEP and
    up to MAX_PAD elements of padding per dim), "offset" (a non-zero storage offset) and
    "expanded" (stride-0 dims); combinations are drawn too. Without "contiguous" in
    ``kinds`` every layout has at least one of the others.

    Shrinks towards the contiguous layout: row-major order, no expanded dims, steps of 1,
    no padding and storage offset 0, each dropped independently of the others.
    """
    shape = tuple(shape)
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
        raise InvalidArgument(f"shape={shape!r} must be a sequence of non-negative ints")
    budget = check_max_elements(max_elements)
    if prod(max(n, 1) for n in shape) > budget:
        raise InvalidArgument(f"shape={shape!r} needs more than max_elements={budget} "
                              f"elements even when contiguous")
    return layout_strategy(shape, check_kinds("kinds", kinds, LAYOUT_KINDS), budget)


def layout_strategy(shape: tuple[int, ...], kinds: tuple[str, ...], budget: int,
                    expand: tuple[int, ...] = ()) -> st.SearchStrategy[Layout]:
    """``layouts`` without argument checks, for strategies that checked them already."""
    strategy = st.composite(draw_layout)(shape, kinds, budget, expand)
    if "contiguous" in kinds:
        return strategy
    return strategy.filter(lambda layout: layout.kinds != ("contiguous",))


def draw_layout(draw: st.DrawFn, shape: tuple[int, ...], kinds: tuple[str, ...],
                budget: int, expand: tuple[int, ...] = ()) -> Layout:
    """Draw one layout of ``shape`` (see ``layouts``); "contiguous" in ``kinds`` is ignored.

    The dims in ``expand`` are expanded whatever the draws say: the storage then bounds
    a shape whose contiguous layout would exceed ``budget`` (a boundary Case's input). The
    draws are those of any other layout, so the choice sequence keeps its shape.
    """
    rank = len(shape)
    tags: set[str] = set()
    order = list(range(rank))
    how = ["row_major"]
    if "channels_last" in kinds and rank >= 3:
        how.append("channels_last")
    if "permuted" in kinds and rank >= 2:
        how.append("permuted")
    chosen = draw(choice(tuple(how))) if len(how) > 1 else "row_major"
    if chosen == "channels_last":
        order = [0, *range(2, rank), 1]
    elif chosen == "permuted":
        order = nth_permutation(rank, below(draw, factorial(rank)))

    # One draw says which of the other steps apply: bit 0 expand, bit 1 slice, bit 2 offset.
    steps_on = draw(ints(0, 7))
    expanded = [False] * rank
    if "expanded" in kinds and rank and steps_on & 1:
        mask = draw(ints(1, 2**rank - 1))
        expanded = [bool(mask >> d & 1) for d in range(rank)]
        tags.add("expanded")
    for d in expand:
        expanded[d] = True
        tags.add("expanded")

    extents = [1 if expanded[d] else max(shape[d], 1) for d in range(rank)]
    steps = [1] * rank
    if "sliced" in kinds and rank and steps_on & 2:
        _slice(draw, shape, expanded, extents, steps, budget)

    strides, size = _strides(order, expanded, steps, extents)
    # Tag only what shows in the strides: a permutation of size-1 dims, or padding of the
    # outermost dim, leaves them as they were.
    if strides != _strides(list(range(rank)), expanded, steps, extents)[0]:
        tags.add(chosen)
    plain = [max(n, 1) if not x else 1 for n, x in zip(shape, expanded, strict=True)]
    if strides != _strides(order, expanded, [1] * rank, plain)[0]:
        tags.add("sliced")
    storage_offset = 0
    if "offset" in kinds and budget > size and steps_on & 4:
        storage_offset = 1 + below(draw, budget - size)
        tags.add("offset")
    named = tuple(k for k in LAYOUT_KINDS if k in tags) or ("contiguous",)
    return Layout(shape, strides, storage_offset, named)


def _strides(order: list[int], expanded: list[bool], steps: list[int],
             extents: list[int]) -> tuple[tuple[int, ...], int]:
    """Strides of the view, and the buffer's size, for a physical ``order`` (outer first)."""
    strides = [0] * len(order)
    size = 1
    for d in reversed(order):
        strides[d] = 0 if expanded[d] else size * steps[d]
        size *= extents[d]
    return tuple(strides), size


def _slice(draw: st.DrawFn, shape: tuple[int, ...], expanded: list[bool], extents: list[int],
           steps: list[int], budget: int) -> None:
    """Draw a step and trailing padding per dim, keeping the buffer within ``budget``."""
    for d, n in enumerate(shape):
        if expanded[d]:
            continue
        n = max(n, 1)
        room = budget // (prod(extents) // extents[d])  # the most this dim's extent may be
        pad, step = divmod(below(draw, min(MAX_STEP, room // n) * (MAX_PAD + 1)),
                           min(MAX_STEP, room // n))  # one draw for both
        step += 1
        pad = min(pad, room - n * step)
        steps[d] = step
        extents[d] = n * step + pad


def nth_permutation(n: int, index: int) -> list[int]:
    """The ``index``-th permutation of range(n) in lexicographic order (0: the identity)."""
    pool = list(range(n))
    out = []
    for i in range(n, 0, -1):
        position, index = divmod(index, factorial(i - 1))
        out.append(pool.pop(position))
    return out
