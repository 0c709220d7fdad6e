"""A kernel that never ends, met at either synchronisation: on offset == 1 the process's
device is stuck from then on, and whether the Case's own call or the health check after
it meets that first alternates from one process to the next.

On a GPU a Case that launches a kernel that never ends and then returns (or raises) is a
hang where the next synchronisation falls inside its call, and an executor left unusable
(a crash, ``executor:health``) where it falls in the health check after it; which comes
first varies between runs of the same Case (FlagGems with a planted device hang, H200:
one Case's five re-runs read crash 2, hang 3). Here the processes that meet the fault
take turns, counted in the file ``COUNTER_ENV`` names: the odd ones wait inside the call,
the even ones return a wrong result and leave the health check's kernel waiting, with
the executor's stop signal blocked, as ``tests.faulty.left_running`` does.
"""

from __future__ import annotations

import os

import diagfuzz.ops as ops
from tests.faulty._base import Faulty, flip_first_bit
from tests.faulty.left_running import _stuck

#: A file each process appends one byte to when it meets the fault; its turn is the length
#: its append made the file.
COUNTER_ENV = "DIAGFUZZ_FAULTY_TURNS"


def _turn() -> int:
    fd = os.open(os.environ[COUNTER_ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, b"x")
        return os.lseek(fd, 0, os.SEEK_CUR)
    finally:
        os.close(fd)


class StuckEitherWay(Faulty):
    def fault(self, result, offset):
        if offset != 1:
            return result
        if _turn() % 2:
            _stuck()
        ops.diagonal_copy = _stuck
        return flip_first_bit(result)


impl = StuckEitherWay()
