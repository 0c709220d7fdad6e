"""The huge tier's Cases: a handful per op whose tensors or address ranges pass 2**31
elements and 2**32 bytes (``diagfuzz.core.huge``), where an int32 offset wraps.

Not Hypothesis: a seeded ``random.Random`` picks, per op, among geometries that reach past
the threshold in different ways, each built from the op's spec (which operand is shaped
like ``Case.sizes``, which like its diagonal, whether the sizes are square or rank 2):

* ``square``: an n x n tensor with n**2 past the threshold, at an offset near an edge
  (``-(n - 1)``: the one element sits past 2**31) or 0;
* ``batch``: a batch dim past half the threshold over 2 x 2 diagonals (rank 3 ops);
* ``long_rows``: a short diagonal across rows of a quarter of the threshold (rank 3 ops);
* ``expanded``: the first operand expanded (stride 0) over a small storage, its logical
  size (or the result's) past the threshold;
* ``far``: a small view whose strides reach past 2**31 elements and 2**32 bytes;
* ``offset``: a small view at a storage offset past the threshold.

Values are ``index_hash`` (made on the device, chunk by chunk); dtypes are the narrowest
the implementation declares (1-byte ones first), so a Case of 2**31 elements is 2 GiB.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from math import isqrt, prod

from diagfuzz.core import huge
from diagfuzz.core.case import (
    Case,
    Layout,
    Values,
    available_dtypes,
    contiguous_strides,
    dtype_of,
)
from diagfuzz.core.geometry import diagonal_of
from diagfuzz.specs import SPECS, spec_of
from diagfuzz.specs.base import OpSpec

#: Dtypes in the order the tier prefers them: narrow first (memory).
NARROW_FIRST = ("int8", "uint8", "bool", "int16", "float16", "bfloat16", "int32", "float32",
                "int64", "float64", "complex64", "complex128")
#: Huge Cases per op by default.
DEFAULT_PER_OP = 4
#: Geometries (see the module docstring), in the order a seed's draw starts from.
KINDS = ("square", "expanded", "far", "offset", "batch", "long_rows")

Geometry = tuple[tuple[int, ...], int, int, int]


def _dims(spec: OpSpec, rank: int, rng: random.Random) -> tuple[int, int]:
    if spec.dims is not None:
        return spec.dims
    if rank == 2:
        return rng.choice(((0, 1), (1, 0)))
    return rng.choice(((1, 2), (2, 1), (-2, -1)))


def _square(spec: OpSpec, t: int, rng: random.Random) -> Geometry:
    n = isqrt(t) + 1 + rng.randrange(64)
    offset = rng.choice((-(n - 1), n - 1, -(n - 2 - rng.randrange(8)), rng.randrange(-9, 10), 0))
    return (n, n), offset, *_dims(spec, 2, rng)


def _batch(spec: OpSpec, t: int, rng: random.Random) -> Geometry:
    return (t // 2 + 1 + rng.randrange(64), 2, 2), rng.choice((0, 1, -1)), *_dims(spec, 3, rng)


def _long_rows(spec: OpSpec, t: int, rng: random.Random) -> Geometry:
    # An op of fixed dims (triu: the last two) takes its own: 2 x long matrices.
    return (2, 2, t // 4 + 1 + rng.randrange(64)), rng.choice((0, 1, -1)), *(spec.dims
                                                                              or (0, 1))


def _small(spec: OpSpec, rng: random.Random) -> Geometry:
    k = 4 + rng.randrange(5)
    return (k, k), rng.randrange(-2, 3), *_dims(spec, 2, rng)


def _expanded_geometry(spec: OpSpec, t: int, rng: random.Random) -> Geometry:
    if spec.max_rank == 2:  # an n x n (or n-vector) view of one row: n**2 past t
        return _square(spec, t, rng)[0], 0, *(spec.dims or (0, 1))
    if spec.full == "read":  # a diagonal of every one of B m x m matrices: B * m past t
        m = max(4, isqrt(t) // 8)
        return (t // (m - 1) + 1 + rng.randrange(64), m, m), 1, 2, 1
    return _batch(spec, t, rng)  # diag_embed, backward: B x 2 x 2; scatter: a dense clone


def _layout(shape: tuple[int, ...], kind: str, t: int, item: int,
            rng: random.Random) -> Layout:
    """A layout of ``shape`` for ``kind``: contiguous, expanded along dim 0, strided far,
    or at a far storage offset."""
    strides = contiguous_strides(shape)
    if kind == "expanded":
        return Layout(shape, (0, *strides[1:]), 0, ("expanded",))
    if kind == "far":
        # The address range passes t elements and 2t bytes (2**31 and 2**32 by default).
        reach = max(t, 2 * t // item) + 1 + rng.randrange(64)
        stride = -(-reach // max(shape[0] - 1, 1))
        return Layout(shape, (stride, *strides[1:]), rng.randrange(4), ("sliced",))
    if kind == "offset":
        return Layout(shape, strides, t + 1 + rng.randrange(1024), ("offset",))
    return Layout.contiguous(shape)


def _geometry(spec: OpSpec, kind: str, t: int, rng: random.Random) -> Geometry:
    if kind == "square":
        return _square(spec, t, rng)
    if kind == "batch":
        return _batch(spec, t, rng)
    if kind == "long_rows":
        return _long_rows(spec, t, rng)
    if kind == "expanded":
        return _expanded_geometry(spec, t, rng)
    return _small(spec, rng)  # far, offset: the layout reaches past t


def _square_sizes(spec: OpSpec, g: Geometry) -> Geometry:
    """A square op's sizes (``OpSpec.square``): both diagonal dims equal, as long as the
    diagonal plus ``|offset|``; the offset is clamped into the dims."""
    sizes, offset, dim1, dim2 = g
    d1, d2 = (d % len(sizes) for d in (dim1, dim2))
    side = max(sizes[d1], sizes[d2])
    offset = max(-(side - 1), min(side - 1, offset))
    square = tuple(side if d in (d1, d2) else n for d, n in enumerate(sizes))
    return square, offset, dim1, dim2


def _case(spec: OpSpec, kind: str, dtype: str, t: int, rng: random.Random) -> Case:
    geometry = _geometry(spec, kind, t, rng)
    if spec.square:
        geometry = _square_sizes(spec, geometry)
    sizes, offset, dim1, dim2 = geometry
    diag = diagonal_of(sizes, offset, dim1, dim2)
    item = _itemsize(dtype)
    tensors = []
    for n, operand in enumerate(spec.operands):
        shape = sizes if operand.role == "full" else diag.shape
        chosen = kind if n == 0 and kind in ("expanded", "far", "offset") else "contiguous"
        tensors.append((operand.name, _layout(shape, chosen, t, item, rng),
                        Values(rng.randrange(2**31), "index_hash")))
    (_, layout, values), *others = tensors
    return Case(spec.name, sizes, offset, dim1, dim2, dtype, layout, values,
                others=tuple(others))


def _itemsize(dtype: str) -> int:
    return dtype_of(dtype).itemsize


def _reaches(case: Case, t: int) -> bool:
    """Whether some tensor of ``case`` (an operand's logical size or storage, or the
    tensor of its sizes) passes ``t`` elements."""
    layouts = [case.layout, *(lay for _, lay, _ in case.others)]
    return prod(case.sizes) > t or any(
        prod(lay.shape) > t or lay.storage_size > t for lay in layouts)


def _dtype(op: str, allowed: Callable[[str], tuple[str, ...] | None] | None,
           rng: random.Random) -> str | None:
    """The narrowest dtype ``allowed`` gives ``op`` (any of the 1-byte ones), None: none."""
    have = available_dtypes()
    names = allowed(op) if allowed is not None else None
    pool = [d for d in NARROW_FIRST if d in have and (names is None or d in names)]
    if not pool:
        return None
    narrowest = [d for d in pool if _itemsize(d) == _itemsize(pool[0])]
    return rng.choice(narrowest)


def huge_cases(seed: int, count_per_op: int = DEFAULT_PER_OP, threshold: int | None = None,
               ops: tuple[str, ...] | None = None,
               dtypes: Callable[[str], tuple[str, ...] | None] | None = None) -> list[Case]:
    """``count_per_op`` huge Cases of every op of ``ops`` (default: every op of
    ``diagfuzz.specs``), drawn from ``seed``: geometries past ``threshold`` elements
    (default ``diagfuzz.core.huge.threshold()``) of the narrowest dtype ``dtypes(op)``
    allows (None: any). The same arguments give the same Cases. An in-place op
    (``OpSpec.inplace``) has none: the tier's chunked judgement (``oracles/huge.py``)
    compares a new result, not a storage written where it lies."""
    t = huge.threshold() if threshold is None else threshold
    found = []
    for op in ops or SPECS:
        spec = spec_of(op)
        if spec.inplace:
            continue
        rng = random.Random(f"{seed}:{op}")
        kinds = [k for k in KINDS if k not in ("batch", "long_rows") or spec.max_rank != 2]
        start = rng.randrange(len(kinds))
        for i in range(count_per_op):
            dtype = _dtype(op, dtypes, rng)
            if dtype is None:
                break
            case = _case(spec, kinds[(start + i) % len(kinds)], dtype, t, rng)
            assert _reaches(case, t), case.describe()
            found.append(case)
    return found


__all__ = ["DEFAULT_PER_OP", "KINDS", "NARROW_FIRST", "huge_cases"]
