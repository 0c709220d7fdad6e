"""The hand-written case table of the foundation tests: geometry, layouts, dtypes, values.

Every row is a plain ``Case``, so a failing row prints as JSON and replays anywhere.
"""

from __future__ import annotations

import itertools

from diagfuzz.core.case import Case, Layout, Values, available_dtypes
from diagfuzz.core.geometry import diagonal_of

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)

#: (sizes, offset, dim1, dim2): ranks 2-10, negative dims, dim1 > dim2, offsets at and beyond
#: the sizes and at the int64 limits, zero-size and size-1 dims.
GEOMETRIES: list[tuple[tuple[int, ...], int, int, int]] = [
    ((4, 4), 0, 0, 1),
    ((3, 5), 1, 0, 1),
    ((3, 5), -1, 0, 1),
    ((5, 3), 2, 1, 0),
    ((5, 3), -2, -1, -2),
    ((3, 5), 4, 0, 1),          # offset = size - 1
    ((3, 5), 5, 0, 1),          # offset = size: empty diagonal
    ((3, 5), -3, 0, 1),         # offset = -size: empty
    ((3, 5), 17, 0, 1),         # beyond the sizes
    ((3, 5), INT64_MAX, 0, 1),
    ((3, 5), INT64_MIN, 1, 0),
    ((3, 5), INT64_MIN + 1, 0, 1),
    ((0, 4), 0, 0, 1),          # zero-size diagonal dim
    ((4, 0, 3), 0, 0, 2),       # zero-size other dim
    ((1, 1), 0, 0, 1),
    ((1, 6), 0, 0, 1),
    ((6, 1), -3, 0, 1),
    ((2, 3, 4), 0, 0, 1),
    ((2, 3, 4), 1, 0, 2),
    ((2, 3, 4), -1, 2, 0),
    ((2, 3, 4), 0, 1, 2),
    ((2, 3, 4), 2, -1, -2),
    ((3, 1, 4), 0, 0, 2),
    ((4, 3, 1), 0, 0, 1),       # trailing size-1 dim after the diagonal dims
    ((2, 3, 4, 5), 1, 1, 3),
    ((2, 3, 4, 5), -2, 3, 0),
    ((5, 2, 4, 3), 0, 0, 2),
    ((2, 2, 3, 2, 3), -1, 4, 2),
    ((2, 1, 3, 1, 2, 2), 0, -6, -1),
    ((2, 2, 2, 2, 2, 2, 2, 2), 1, 3, 6),
    ((2, 1, 2, 1, 2, 1, 2, 1, 3), 0, 8, 0),        # rank 9
    ((2, 2, 1, 2, 1, 2, 1, 2, 2, 3), -1, 9, 4),    # rank 10
]

LAYOUT_NAMES = ("contiguous", "permuted", "sliced", "offset", "expanded")


def layout_of(shape: tuple[int, ...], kind: str) -> Layout:
    """A layout of ``shape`` of the given kind, built from plain stride arithmetic."""
    rank = len(shape)
    if kind == "contiguous":
        return Layout.contiguous(shape)
    if kind == "permuted":  # a reversed contiguous base, viewed back in this dim order
        base = Layout.contiguous(tuple(reversed(shape)))
        return Layout(shape, tuple(reversed(base.strides)), 0, ("permuted",))
    if kind == "sliced":  # every dim taken with step 2 (innermost) or 3 from a larger base
        base = Layout.contiguous(tuple(n * (2 if d == rank - 1 else 3) for d, n in
                                       enumerate(shape)))
        steps = [2 if d == rank - 1 else 3 for d in range(rank)]
        return Layout(shape, tuple(s * k for s, k in zip(base.strides, steps, strict=True)),
                      0, ("sliced",))
    if kind == "offset":
        return Layout(shape, Layout.contiguous(shape).strides, 7, ("offset",))
    if kind == "expanded":  # the outermost non-trivial dim broadcast with stride 0
        strides = list(Layout.contiguous(shape).strides)
        if rank:
            strides[0] = 0
        return Layout(shape, tuple(strides), 2, ("expanded", "offset"))
    raise ValueError(f"unknown layout kind {kind!r}")


def case(op: str, sizes, offset, dim1, dim2, dtype="float32", layout="contiguous",
         seed=0, mode="bits", specials=()) -> Case:
    """One table row: the read tensor (input or grad_output) gets the named layout."""
    shape = sizes if op == "diagonal" else diagonal_of(sizes, offset, dim1, dim2).shape
    return Case(op, tuple(sizes), offset, dim1, dim2, dtype, layout_of(tuple(shape), layout),
                Values(seed, mode, tuple(specials)))


def geometry_rows(op: str) -> list[Case]:
    """Every geometry in every layout, float32 with random bits (NaN payloads included)."""
    return [case(op, *g, layout=kind, seed=i)
            for i, (g, kind) in enumerate(itertools.product(GEOMETRIES, LAYOUT_NAMES))]


#: Special bit patterns by element width: signed zeros, NaN payloads, infinities, extremes.
SPECIAL_BITS = {
    1: (0x80, 0x7F, 0xFF, 0x01, 0x00),
    2: (0x8000, 0x7C01, 0xFE01, 0x7FFF, 0x0001, 0xFC00),
    4: (0x80000000, 0x7FC00001, 0xFFA00001, 0x7F800000, 0x00000001, 0x7F7FFFFF),
    8: (0x8000000000000000, 0x7FF0000000000001, 0xFFF8000000000123, 0x0000000000000001),
    16: ((0x7FF0000000000001 << 64) | 0x8000000000000000, 1 << 127),
}


def dtype_rows(op: str) -> list[Case]:
    """Every available dtype, in three geometries and two layouts, with special values."""
    rows = []
    for dtype in available_dtypes():
        width = 1 if dtype == "bool" else _itemsize(dtype)
        specials = () if dtype == "bool" else tuple(
            enumerate(SPECIAL_BITS[width]))
        mode = "normal" if dtype == "bool" else "bits"
        for g, kind in itertools.product(
            [((3, 4), 1, 0, 1), ((2, 3, 4), -1, 2, 0), ((4, 2, 3), 0, 0, 1)],
            ["contiguous", "sliced"],
        ):
            rows.append(case(op, *g, dtype=dtype, layout=kind, mode=mode, specials=specials))
    return rows


def _itemsize(name: str) -> int:
    import torch

    return getattr(torch, name).itemsize
