"""triu and tril pass ``diagonal`` through an int32: a diagonal beyond its range wraps
(2**63 - 1 becomes -1: a triu that keeps nothing keeps almost everything)."""

from tests.mutants._base import Correct


class TriangleInt32Diagonal(Correct):
    def triangle_diagonal(self, diagonal: int) -> int:
        return (diagonal + 2**31) % 2**32 - 2**31


impl = TriangleInt32Diagonal()
