"""A sticky-error simulation: offset == 1 poisons the process, as an illegal address would.

The call raises like a CUDA error does, and from then on every kernel in the process fails
(``diagfuzz.ops.diagonal_copy`` is replaced), so only a fresh executor can run Cases again.
"""

from __future__ import annotations

import diagfuzz.ops as ops
from tests.faulty._base import Faulty

MESSAGE = "CUDA error: an illegal memory access was encountered (simulated)"


def _poisoned(*args: object, **kwargs: object) -> None:
    raise RuntimeError(MESSAGE)


class Poison(Faulty):
    def fault(self, result, offset):
        if offset == 1:
            ops.diagonal_copy = _poisoned
            raise RuntimeError(MESSAGE)
        return result


impl = Poison()
