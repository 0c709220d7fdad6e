"""Coverage classes of a Case: what a report (or a coverage test) counts.

A Case falls into several classes at once, one per aspect: rank, each size seen, the
spelling and order of its dims, its offset, dtype, layout kinds, value mode and specials.
"""

from __future__ import annotations

from diagfuzz.core.case import Case
from diagfuzz.core.geometry import wrap_dim
from diagfuzz.strategies._boundary import boundary_class
from diagfuzz.strategies._values import classify_bits


def offset_class(offset: int, rows: int, cols: int) -> str:
    """The offset's class for a (rows, cols) matrix (rows: dim1's size, cols: dim2's).

    One of "0", "+1", "-1", "+size-1", "-size-1", "+size", "-size", "+inside", "-inside",
    "+beyond", "-beyond", "+max" (2**63 - 1), "-max" (-(2**63 - 1)), "-min" (-2**63),
    checked in that order, so "+size-1" means a size of at least 3.
    """
    if offset == 0:
        return "0"
    sign, size = ("+", cols) if offset > 0 else ("-", rows)
    magnitude = abs(offset)
    if magnitude == 1:
        return sign + "1"
    if magnitude == size - 1:
        return sign + "size-1"
    if magnitude == size:
        return sign + "size"
    if magnitude < size:
        return sign + "inside"
    if magnitude == 2**63 - 1:
        return sign + "max"
    if magnitude == 2**63:
        return "-min"
    return sign + "beyond"


def case_classes(case: Case) -> frozenset[str]:
    """Every coverage class of a valid Case, as "aspect:value" strings.

    Aspects: op, rank, size (each distinct size), pair (normalised dim1,dim2 per rank:
    "pair:r4:3,1"), spelling ("+-": dim1 positive, dim2 negative), order ("dim1>dim2"),
    offset (see ``offset_class``), dtype, layout (each kind, and "combined" for two or more),
    mode, special (dtype:class of each special bit pattern), boundary (``boundary_class``)
    and invalid (its class).
    """
    rank = len(case.sizes)
    out = {f"op:{case.op}", f"rank:{rank}", f"dtype:{case.dtype}",
           f"mode:{case.values.mode}"}
    out.update(f"size:{n}" for n in set(case.sizes))
    out.update(f"layout:{k}" for k in case.layout.kinds)
    if len(case.layout.kinds) > 1:
        out.add("layout:combined")
    if case.invalid:
        out.add(f"invalid:{case.invalid}")
        return frozenset(out)
    d1, d2 = wrap_dim(case.dim1, rank), wrap_dim(case.dim2, rank)
    out.add(f"pair:r{rank}:{d1},{d2}")
    out.add("spelling:" + ("-" if case.dim1 < 0 else "+") + ("-" if case.dim2 < 0 else "+"))
    out.add("order:dim1>dim2" if d1 > d2 else "order:dim1<dim2")
    out.add("offset:" + offset_class(case.offset, case.sizes[d1], case.sizes[d2]))
    out.add("boundary:" + boundary_class(case))
    out.update(f"special:{case.dtype}:{classify_bits(case.dtype, bits)}"
               for _, bits in case.values.specials)
    return frozenset(out)
