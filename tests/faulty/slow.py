"""Right, but half a second late on every call with offset == 0: keeps a Case in flight."""

from __future__ import annotations

import time

from tests.faulty._base import Faulty


class Slow(Faulty):
    def fault(self, result, offset):
        if offset == 0:
            time.sleep(0.5)
        return result


impl = Slow()
