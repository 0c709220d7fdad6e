"""Wrong only where integers leave int32: offsets of 2**31 and beyond, and raw arguments
beyond int64 (the bug an int32 offset computation has). Every other Case is aten's.

``diagonal`` of an offset with |offset| >= 2**31 returns one zero element instead of the
empty diagonal; a call whose offset does not fit int64 returns zeros instead of raising.
"""

from __future__ import annotations

import torch

from diagfuzz.impl import aten

INT32_LIMIT = 2**31
INT64_LIMIT = 2**63


class WideInts:
    uses_triton_registration = False

    def diagonal(self, x, offset=0, dim1=0, dim2=1):
        if isinstance(offset, int) and abs(offset) >= INT32_LIMIT:
            if not -INT64_LIMIT <= offset < INT64_LIMIT:
                return torch.zeros(1, dtype=x.dtype, device=x.device)
            result = aten.diagonal(x, offset, dim1, dim2)
            shape = (*result.shape[:-1], 1)
            return torch.zeros(shape, dtype=x.dtype, device=x.device)
        return aten.diagonal(x, offset, dim1, dim2)

    def diagonal_backward(self, grad_output, input_sizes, offset, dim1, dim2):
        return aten.diagonal_backward(grad_output, input_sizes, offset, dim1, dim2)


impl = WideInts()
