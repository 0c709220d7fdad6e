"""Wrong and slow on offset == -1: each such call takes 2 s and flips a result bit (a
deterministic finding whose re-runs take seconds, for stops during classification)."""

from __future__ import annotations

import time

from tests.faulty._base import Faulty, flip_first_bit

SECONDS = 2.0


class SlowWrong(Faulty):
    def fault(self, result, offset):
        if offset != -1:
            return result
        time.sleep(SECONDS)
        return flip_first_bit(result)


impl = SlowWrong()
