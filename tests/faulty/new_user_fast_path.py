"""diagonal with the fast path a library written from the README alone had.

For a 2-D input and dims (0, 1) (any spelling) it reads the diagonal at stride
``size(1) + 1`` from the input's storage offset, as if the input were contiguous: right
for a contiguous input, silently wrong values for a transposed or sliced one (every read
stays inside the storage, so nothing crashes). Everything else is aten (registration off).
"""

from __future__ import annotations

import torch

from diagfuzz.core.geometry import diagonal_of
from diagfuzz.impl import aten
from tests.faulty._base import Faulty


class NewUserFastPath(Faulty):
    def fault(self, result: torch.Tensor, offset: int) -> torch.Tensor:
        return result

    def diagonal(self, x, offset=0, dim1=0, dim2=1):
        if x.dim() != 2 or {dim1 % 2, dim2 % 2} != {0, 1} or dim1 % 2 != 0:
            return aten.diagonal(x, offset, dim1, dim2)
        diag = diagonal_of(tuple(x.shape), offset, dim1, dim2)
        if diag.length == 0:
            return aten.diagonal(x, offset, dim1, dim2)
        cols = x.shape[1]
        start = x.storage_offset() + diag.row0 * cols + diag.col0  # the contiguous guess
        return x.as_strided((diag.length,), (cols + 1,), start).clone()

    def diagonal_out(self, x, offset=0, dim1=0, dim2=1, *, out):
        """The ``.out`` overload as a user writes it: the functional result copied out."""
        return out.copy_(self.diagonal(x, offset, dim1, dim2))


impl = NewUserFastPath()
