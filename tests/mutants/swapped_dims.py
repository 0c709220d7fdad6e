"""Normalises dim1 > dim2 by swapping them but forgets to negate the offset."""

from tests.mutants._base import Correct


class SwappedDims(Correct):
    def dims(self, ndim: int, offset: int, dim1: int, dim2: int) -> tuple[int, int, int]:
        rank = max(ndim, 1)
        d1, d2 = dim1 % rank, dim2 % rank
        if d1 > d2:
            return offset, dim2, dim1
        return offset, dim1, dim2


impl = SwappedDims()
