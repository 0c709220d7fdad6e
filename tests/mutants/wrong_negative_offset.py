"""Treats a negative offset as its absolute value (the diagonal below taken from above)."""

from tests.mutants._base import Correct


class WrongNegativeOffset(Correct):
    def dims(self, ndim: int, offset: int, dim1: int, dim2: int) -> tuple[int, int, int]:
        return abs(offset), dim1, dim2


impl = WrongNegativeOffset()
