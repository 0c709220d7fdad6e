"""Never returns (like a kernel stuck in a loop) when offset == -1."""

from __future__ import annotations

import time

from tests.faulty._base import Faulty


class Hang(Faulty):
    def fault(self, result, offset):
        while offset == -1:
            time.sleep(0.5)
        return result


impl = Hang()
