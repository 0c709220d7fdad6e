"""aten, but every call takes ``SECONDS`` longer: a slow implementation for time caps."""

from __future__ import annotations

import time

from diagfuzz.impl import aten

SECONDS = 0.05


class Slow:
    uses_triton_registration = False

    def diagonal(self, x, offset=0, dim1=0, dim2=1):
        time.sleep(SECONDS)
        return aten.diagonal(x, offset, dim1, dim2)

    def diagonal_backward(self, grad_output, input_sizes, offset, dim1, dim2):
        time.sleep(SECONDS)
        return aten.diagonal_backward(grad_output, input_sizes, offset, dim1, dim2)


impl = Slow()
