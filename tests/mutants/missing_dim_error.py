"""Wraps out-of-range dims modulo the rank instead of raising aten's IndexError."""

from tests.mutants._base import Correct


class MissingDimError(Correct):
    def dims(self, ndim: int, offset: int, dim1: int, dim2: int) -> tuple[int, int, int]:
        rank = max(ndim, 1)
        return offset, dim1 % rank, dim2 % rank


impl = MissingDimError()
