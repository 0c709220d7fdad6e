"""A kernel left running, simulated: offset == 1 returns a wrong result and leaves the
process's device stuck, as a kernel that never ends leaves a GPU.

The call itself returns (a launch is asynchronous), so the Case fails as a mismatch; from
then on every kernel in the process waits for good where no signal reaches it, as a
host does in a device synchronisation (``diagfuzz.ops.diagonal_copy``, the health
check's kernel, is replaced by a wait with the executor's stop signal blocked).
"""

from __future__ import annotations

import signal
import time

import diagfuzz.ops as ops
from diagfuzz.execution.beacon import StallWatch
from tests.faulty._base import Faulty, flip_first_bit


def _stuck(*args: object, **kwargs: object) -> None:
    signal.pthread_sigmask(signal.SIG_BLOCK, {StallWatch.SIGNAL})
    while True:
        time.sleep(1.0)


class LeftRunning(Faulty):
    def fault(self, result, offset):
        if offset == 1:
            ops.diagonal_copy = _stuck
            return flip_first_bit(result)
        return result


impl = LeftRunning()
