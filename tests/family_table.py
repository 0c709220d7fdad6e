"""Hand-written tables for diag_embed, diagonal_scatter, diag, triu and tril, and their
tensors.

Tensors come from ``diagfuzz.case.materialise`` (seeded storages, special bit patterns), in
the layouts of ``tests/kernel_table.py`` plus channels-last and a storage larger than the
view, so every row rebuilds bit for bit from its description.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import torch

import diagfuzz.ops as ops
from diagfuzz.case import (
    Case,
    Layout,
    Values,
    available_dtypes,
    contiguous_strides,
    materialise,
)
from tests.kernel_table import INT64_MAX, INT64_MIN, SPECIAL_BITS, layout_of

KINDS = ("contiguous", "permuted", "sliced", "offset", "expanded", "channels_last", "storage")


def layout(shape: tuple[int, ...], kind: str) -> Layout:
    """``kernel_table.layout_of``'s kinds, and channels-last (4-D; else contiguous)."""
    if kind == "channels_last":
        if len(shape) != 4:
            return Layout.contiguous(shape)
        _, c, h, w = shape
        return Layout(shape, (h * w * c, 1, w * c, c), 0, ("channels_last",))
    return layout_of(shape, kind)


def tensor(shape: tuple[int, ...], kind: str = "contiguous", dtype: str = "float32",
           seed: int = 0, specials: tuple = ()) -> torch.Tensor:
    """A tensor of ``shape`` in layout ``kind`` on the kernels' device: random bits (bool:
    random values) and the special bit patterns, through ``materialise``. ``storage``: the
    contiguous view 3 elements into a storage of twice its elements plus 3."""
    mode = "normal" if dtype == "bool" else "bits"
    values = Values(seed, mode, tuple(specials))
    if kind == "storage":
        numel = math.prod(shape)
        flat = materialise(Case("diagonal", (2 * numel + 3,), 0, 0, 1, dtype,
                                Layout.contiguous((2 * numel + 3,)), values), ops.DEVICE)
        return flat.as_strided(shape, contiguous_strides(tuple(shape)), 3)
    row = Case("diagonal", tuple(shape), 0, 0, 1, dtype, layout(tuple(shape), kind), values)
    return materialise(row, ops.DEVICE)


def specials_for(dtype: str) -> tuple:
    """-0.0, NaN payloads, infinities and extremes for ``dtype``'s width (none for bool)."""
    if dtype == "bool":
        return ()
    return tuple(enumerate(SPECIAL_BITS[getattr(torch, dtype).itemsize]))


@dataclass(frozen=True)
class Row:
    """One call: ``shape`` and ``kind`` of the input, ``offset`` and ``dims``, the dtype;
    for diagonal_scatter also src's layout kind."""

    op: str
    shape: tuple[int, ...]
    offset: int
    dims: tuple[int, ...]
    dtype: str = "float32"
    kind: str = "contiguous"
    src_kind: str = "contiguous"
    seed: int = 0

    def describe(self) -> str:
        return (f"{self.op}({list(self.shape)}, offset={self.offset}, dims={self.dims}, "
                f"{self.dtype}, {self.kind}, src {self.src_kind})")


#: diag_embed: (input shape, offset, dim1, dim2): ranks 1-5, default, negative, swapped
#: and inner dims, offsets 0, +-1, at and beyond the size, empty inputs.
EMBED_GEOMETRIES = [
    ((4,), 0, -2, -1),
    ((4,), 1, -2, -1),
    ((4,), -1, -1, -2),
    ((3,), 5, 0, 1),
    ((3,), -7, 1, 0),
    ((0,), 2, -2, -1),
    ((1,), 0, 0, 1),
    ((2, 3), 0, -2, -1),
    ((2, 3), 2, 0, 2),
    ((2, 3), -3, 2, 0),
    ((2, 3), 1, 0, 1),
    ((3, 2), -1, -3, -1),
    ((0, 3), 1, -2, -1),
    ((3, 0), -1, -2, -1),
    ((2, 3, 4), 0, 1, 3),
    ((2, 3, 4), -2, 3, 0),
    ((2, 1, 3), 1, -1, -4),
    ((2, 2, 3, 2), 1, 2, 4),
    ((1, 2, 2, 1, 3), -1, 5, 1),
]

#: diagonal_scatter: (input shape, offset, dim1, dim2): ranks 2-5, negative and swapped
#: dims, offsets 0, +-1, +-size, beyond, int64 limits, empty diagonals and inputs.
SCATTER_GEOMETRIES = [
    ((4, 4), 0, 0, 1),
    ((3, 5), 1, 0, 1),
    ((3, 5), -1, 0, 1),
    ((5, 3), 2, 1, 0),
    ((5, 3), -2, -1, -2),
    ((3, 5), 5, 0, 1),
    ((3, 5), -3, 0, 1),
    ((3, 5), 17, 0, 1),
    ((3, 5), INT64_MAX, 0, 1),
    ((3, 5), INT64_MIN, 1, 0),
    ((0, 4), 0, 0, 1),
    ((4, 0, 3), 0, 0, 2),
    ((1, 1), 0, 0, 1),
    ((2, 3, 4), 0, 0, 1),
    ((2, 3, 4), -1, 2, 0),
    ((2, 3, 4), 1, 1, 2),
    ((3, 1, 4), 0, 0, 2),
    ((2, 3, 4, 5), 1, 1, 3),
    ((2, 3, 3, 2), 0, 1, 2),
    ((2, 2, 3, 2, 3), -1, 4, 2),
]


def embed_rows() -> list[Row]:
    """Every geometry in every layout kind (float32 random bits), then every dtype."""
    rows = [Row("diag_embed", shape, offset, (d1, d2), kind=kind, seed=i)
            for i, ((shape, offset, d1, d2), kind) in enumerate(
                itertools.product(EMBED_GEOMETRIES, KINDS))]
    rows += [Row("diag_embed", (3, 4), 1, (-2, -1), dtype=dtype, kind=kind)
             for dtype, kind in itertools.product(available_dtypes(), ("contiguous", "sliced"))]
    return rows


def scatter_rows() -> list[Row]:
    """Every geometry with input and src in turning layout kinds (float32 random bits),
    then every dtype in two geometries."""
    kinds = itertools.cycle(KINDS)
    src_kinds = itertools.cycle(("contiguous", "permuted", "sliced", "expanded"))
    rows = []
    for shape, offset, d1, d2 in SCATTER_GEOMETRIES:
        for _ in range(3):
            rows.append(Row("diagonal_scatter", shape, offset, (d1, d2), kind=next(kinds),
                            src_kind=next(src_kinds), seed=len(rows)))
    for dtype, geometry in itertools.product(available_dtypes(),
                                             [((3, 4), 1, 0, 1), ((2, 3, 4), -1, 2, 0)]):
        shape, offset, d1, d2 = geometry
        for kind in ("storage", "expanded"):
            rows.append(Row("diagonal_scatter", shape, offset, (d1, d2), dtype=dtype,
                            kind=kind, src_kind="sliced", seed=len(rows)))
    return rows


def diag_rows() -> list[Row]:
    """torch.diag on 1-D (diag_embed) and 2-D (diagonal_copy) inputs."""
    rows = []
    for shape, offsets in (((4,), (0, 1, -2, 6)), ((0,), (0, 3)),
                           ((3, 5), (0, 2, -1, 5, -3, INT64_MIN)), ((0, 2), (0,))):
        for offset, kind in itertools.product(offsets, ("contiguous", "sliced", "expanded")):
            rows.append(Row("diag", shape, offset, (), kind=kind, seed=len(rows)))
    rows += [Row("diag", (5,), 1, (), dtype=dtype) for dtype in available_dtypes()]
    return rows


#: triu and tril: (input shape, diagonal): ranks 2-5, square, wide and tall matrices,
#: diagonals 0, ±1, inside, at and beyond the edges, the int64 limits, empty matrices and
#: batches, size-1 dims.
TRIANGLE_GEOMETRIES = [
    ((4, 4), 0),
    ((3, 5), 1),
    ((5, 3), -1),
    ((3, 5), -2),
    ((3, 5), 4),
    ((3, 5), 5),
    ((5, 3), -5),
    ((3, 5), 17),
    ((3, 5), INT64_MAX),
    ((3, 5), INT64_MIN),
    ((0, 4), 0),
    ((4, 0), 1),
    ((1, 1), 0),
    ((2, 3, 4), 0),
    ((2, 3, 4), -1),
    ((2, 0, 3), 1),
    ((3, 1, 4), 2),
    ((2, 3, 4, 5), 1),
    ((2, 2, 3, 2, 3), -1),
]
TRIANGLES = ("triu", "tril")


def triangle_rows() -> list[Row]:
    """Every geometry of both ops in turning layout kinds (float32 random bits), then every
    dtype aten's triu takes, contiguous and expanded."""
    from diagfuzz.ops.triangle import SUPPORTED

    kinds = itertools.cycle(KINDS)
    rows = [Row(op, shape, offset, (), kind=next(kinds), seed=i)
            for i, ((shape, offset), op) in enumerate(
                itertools.product(TRIANGLE_GEOMETRIES, TRIANGLES))
            for _ in range(3)]
    rows += [Row(op, (2, 3, 4), offset, (), dtype=dtype, kind=kind, seed=len(rows))
             for dtype in available_dtypes() if getattr(torch, dtype) in SUPPORTED
             for op, offset in zip(TRIANGLES, (1, -1), strict=True)
             for kind in ("storage", "expanded")]
    return rows


def inputs(row: Row) -> tuple[torch.Tensor, ...]:
    """The row's tensors: input (with special bit patterns; triu's and tril's also at the
    end of the storage, where the triangle they drop lies), and src for diagonal_scatter."""
    specials = specials_for(row.dtype)
    if row.op in TRIANGLES:
        specials += tuple((-1 - i, bits) for i, bits in specials)
    x = tensor(row.shape, row.kind, row.dtype, row.seed, specials)
    if row.op != "diagonal_scatter":
        return (x,)
    shape = torch.empty(row.shape, device="meta").diagonal(row.offset, *row.dims).shape
    src = tensor(tuple(shape), row.src_kind, row.dtype, row.seed + 1000,
                 specials_for(row.dtype)[::-1])
    return x, src


def storage_difference(actual: torch.Tensor, expected: torch.Tensor) -> str:
    """Empty when the storage offsets, storage sizes and every storage byte agree (a
    diagonal_scatter result clones its input's whole storage)."""
    if actual.storage_offset() != expected.storage_offset():
        return f"storage offset {actual.storage_offset()} != {expected.storage_offset()}"
    a, b = (_bytes(t) for t in (actual, expected))
    if a.numel() != b.numel():
        return f"storage bytes {a.numel()} != {b.numel()}"
    if not torch.equal(a, b):
        return f"{int((a != b).sum())} storage bytes differ"
    return ""


def _bytes(t: torch.Tensor) -> torch.Tensor:
    """``t``'s whole storage as uint8 (on its device)."""
    return torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage())
