"""aten, but each process's first ``diagonal`` call on a float64 input takes ``SECONDS``
without progress: a lazy import some dtype reaches (torch._refs pulling in torch._dynamo),
or a first call on a loaded machine. Not a hang: a Case stalled past its calibrated
allowance by it must pass when confirmed, in a fresh executor where it is slow again."""

from __future__ import annotations

import time

from diagfuzz.impl import aten

SECONDS = 3.0


class SlowStart:
    uses_triton_registration = False

    def __init__(self) -> None:
        self._started = False

    def diagonal(self, x, offset=0, dim1=0, dim2=1):
        if x.dtype.is_floating_point and x.element_size() == 8 and not self._started:
            self._started = True
            time.sleep(SECONDS)
        return aten.diagonal(x, offset, dim1, dim2)

    def diagonal_backward(self, grad_output, input_sizes, offset, dim1, dim2):
        return aten.diagonal_backward(grad_output, input_sizes, offset, dim1, dim2)


impl = SlowStart()
