"""Boundary Cases: extents just around the block sizes Triton kernels tile with.

The classic Triton bug is a wrong mask in the last, partial block of 128, 256 or 1,024
lanes. Plain Cases cannot reach it: they hold at most ``max_elements`` elements, and a
diagonal of length L needs a result of at least L² elements in diagonal_backward (a
4,096-element budget stops at L = 64). So a small share of valid Cases (BOUNDARY_PERCENT in
100) sets one extent to a size of BOUNDARY_SIZES, B - 1, B or B + 1 for each block B of
BOUNDARY_BLOCKS, under a budget of their own (``boundary_elements``):

* ``extent``: one dim of the result is that size (diagonal_backward: any dim of
  input_sizes; diagonal: a dim besides the two diagonal dims, so rank >= 3), the rest of
  the Case drawn as a plain one whose other extents share what the budgets leave;
* ``length``: the diagonal's length is that size, on a B x (B + e) or (B + e) x B matrix
  (e <= MAX_EXTRA) at an offset of the full-length run (0 first), other dims as above.

A Case's cost under Triton's interpreter grows with its result, so BOUNDARY_WEIGHTS makes
the large blocks of diagonal_backward's lengths rare (a length of 1,025 writes a result of
about a million elements: 0.2-0.4 s on one CPU core, oracle included, against about
20 ms for a plain diagonal_backward Case).

A Case draws its plain geometry first; then one draw (``is_boundary``) says whether it is
a boundary Case, and if so a span of its own draws the boundary geometry, first which
(kind, block) in ``options`` order (extents before lengths, blocks ascending), then which
of B, B + 1 and B - 1. All shrink towards 0, so a boundary failure shrinks to the
smallest block that still fails and, when the failure needs no boundary size at all, to
the plain Case drawn before the span.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from functools import lru_cache
from itertools import accumulate

from hypothesis import strategies as st

from diagfuzz.core.case import Case
from diagfuzz.core.geometry import diagonal_of
from diagfuzz.strategies._draws import ints

#: Block sizes whose neighbourhoods boundary Cases reach: every power of two a kernel of
#: ours or a typical Triton kernel uses as a block of words or lanes (ops/_tiling.py: 64 to
#: 4,096 words a program on a GPU; 128-, 256- and 1,024-lane blocks are the common choice).
#: 64 is reachable by plain diagonal_backward Cases only at exactly 4,096 elements, and 2,048
#: by no plain Case of a 4,096 budget.
BOUNDARY_BLOCKS = (64, 128, 256, 512, 1024, 2048)
#: Every boundary size, ascending.
BOUNDARY_SIZES = tuple(b + d for b in BOUNDARY_BLOCKS for d in (-1, 0, 1))
#: About this many valid Cases in 100 are boundary Cases (when the budgets let them be).
#: Set against CPU cost under Triton's interpreter (one idle core, oracle included): a
#: boundary Case costs about 17 ms for diagonal and 37 ms for diagonal_backward against
#: 6 and 19 ms for a plain one, so 5 in 100 add about 9% and 5% to those streams' checking
#: (the suite's own run-to-run noise on a shared 2-core machine is larger). At 4 in 100 a
#: tail-mask bug past element 128 (tests/test_boundary_bug.py) escaped the gate's 400
#: diagonal_backward Cases at 1 run seed of 30 (8 boundary Cases, none of them a length
#: past 128); 5 in 100 with the weights below give about 6.7 such lengths a gate run.
BOUNDARY_PERCENT = 5
#: The default of ``boundary_elements``: room for a diagonal_backward result of
#: 1,025 x 1,028 elements (2**20 is one short of 1,025²).
DEFAULT_BOUNDARY_ELEMENTS = 2**21
#: The longer diagonal dim of a ``length`` Case exceeds the shorter by at most this.
MAX_EXTRA = 3
KINDS = ("extent", "length")
#: Weight of each size of a block, per (what the tensor of the sizes is to the op, kind):
#: "read" for an op that reads it (diagonal), "result" for one that makes it
#: (diagonal_backward; ``OpSpec.full``). A size of weight w is drawn w times as often as one
#: of weight 1. A made result's lengths cost their square under the interpreter
#: (diagonal_backward 1,023-1,025: 0.17-0.3 s a Case, 255-257: ~0.05 s, 127-129:
#: ~0.025 s), so their large blocks are rare; the 128 and 256 blocks, cheap and the usual
#: block sizes, are the most common. The other kinds cost about a plain Case.
BOUNDARY_WEIGHTS: dict[tuple[str, str], dict[int, int]] = {
    ("read", "extent"): {64: 1, 128: 2, 256: 2, 512: 1, 1024: 2, 2048: 1},
    ("read", "length"): {64: 1, 128: 2, 256: 2, 512: 1, 1024: 2, 2048: 1},
    ("result", "extent"): {64: 1, 128: 1, 256: 1, 512: 1, 1024: 1, 2048: 1},
    ("result", "length"): {64: 2, 128: 8, 256: 6, 512: 1, 1024: 1, 2048: 1},
}

#: The first draw of a Case when boundary draws are on: a boundary Case at the top
#: BOUNDARY_PERCENT values (a range this small is drawn about uniformly; 0 is plain).
_PICK = ints(0, 99)


@dataclass(frozen=True)
class Option:
    """A kind of boundary Case, and the sizes of one block it may take, in shrink order."""

    kind: str
    block: int
    sizes: tuple[int, ...]


@dataclass(frozen=True)
class Options:
    """The boundary options a strategy draws from, with cumulative weights."""

    options: tuple[Option, ...]
    cumulative: tuple[int, ...]


@lru_cache(maxsize=64)
def boundary_options(full: str, cap: int, ranks: tuple[int, int], zero_offset: bool,
                     expanded: bool, square: bool = False) -> Options:
    """The (kind, block) options, with the block's sizes whose smallest Case fits the
    budget ``cap``, in shrink order; each size weighs what BOUNDARY_WEIGHTS gives its block.

    ``full`` is what the tensor of the sizes is to the op (``OpSpec.full``). ``extent``:
    the size itself must fit (an op that reads the full tensor, or makes a square one from
    the diagonal, ``square``, also needs rank 3 for a batch dim). ``length`` needs offset
    0 among the offset kinds (``zero_offset``) and, where the op makes the full tensor, a
    size² result; an op reading it holds a size² input only when ``expanded`` layouts are
    not allowed, otherwise it expands a diagonal dim (stride 0) when the input would not
    fit.
    """
    options: list[Option] = []
    weights: list[int] = []
    batch = full == "read" or square
    for kind in KINDS:
        for block in BOUNDARY_BLOCKS:
            sizes = tuple(s for s in (block, block + 1, block - 1)
                          if _fits(full, kind, s, cap, ranks, zero_offset, expanded, batch))
            if sizes:
                options.append(Option(kind, block, sizes))
                weights.append(BOUNDARY_WEIGHTS[(full, kind)][block] * len(sizes))
    return Options(tuple(options), tuple(accumulate(weights)))


def _fits(full: str, kind: str, size: int, cap: int, ranks: tuple[int, int],
          zero_offset: bool, expanded: bool, batch: bool) -> bool:
    if kind == "extent":
        return size <= cap and (not batch or ranks[1] >= 3)
    if full == "result" or not expanded:
        return zero_offset and size * size <= cap
    return zero_offset and size <= cap


def is_boundary(draw: st.DrawFn) -> bool:
    """One draw: whether this Case is a boundary Case (the top BOUNDARY_PERCENT values).

    The lowest boundary value is one above the highest plain one, so the shrinker's "lower
    by one, delete the span after it" step turns a boundary Case into a plain one.
    """
    return draw(_PICK) >= 100 - BOUNDARY_PERCENT


def draw_option(draw: st.DrawFn, options: Options) -> tuple[str, int]:
    """The kind and size of a boundary Case, weighted by BOUNDARY_WEIGHTS.

    Two draws, (kind, block) then which of its sizes, so each shrinks on its own: a
    failure at 1,025 that needs a size one past a block tries 513, 257, 129 and 65 in turn
    (a single draw over all sizes stopped at 1,025: 1,024 passes). A block's sizes shrink
    in the order B, B + 1, B - 1: the exact block, then one element past it (the classic
    tail), then one short; so a tail failure drawn at 255 moves to 257 and then down the
    blocks to 129, where B - 1 first would stay at 255 (127 passes).
    """
    pick = draw(ints(0, options.cumulative[-1] - 1))
    option = options.options[bisect_right(options.cumulative, pick)]
    sizes = option.sizes
    return option.kind, sizes[draw(ints(0, len(sizes) - 1))] if len(sizes) > 1 else sizes[0]


def near_block(n: int) -> int | None:
    """The block of BOUNDARY_BLOCKS that ``n`` is within one of, or None."""
    for block in BOUNDARY_BLOCKS:
        if abs(n - block) <= 1:
            return block
    return None


def boundary_class(case: Case) -> str:
    """A valid Case's boundary class: "length B±1", "extent B±1" or "none".

    "length B±1": the diagonal's length is within one of block B of BOUNDARY_BLOCKS.
    Otherwise "extent B±1" for the largest such B among the Case's sizes (the extents of
    the tensor the op reads or writes at full size: diagonal's input, diagonal_backward's
    result; the other tensor's extents are among them, but for the length). So every
    Case a boundary draw made, and every sibling sharing its sizes, has a class; plain
    Cases have one too when a size happens to be there. An invalid Case is "n/a".
    """
    if case.invalid:
        return "n/a"
    try:
        diag = diagonal_of(case.sizes, case.offset, case.dim1, case.dim2)
    except (IndexError, RuntimeError, TypeError):
        return "n/a"
    block = near_block(diag.length)
    if block is not None:
        return f"length {block}±1"
    blocks = [b for b in map(near_block, case.sizes) if b is not None]
    return f"extent {max(blocks)}±1" if blocks else "none"
