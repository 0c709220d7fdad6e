"""Wrong about one call in three: flips one result bit (a race-like, flaky bug).

Which calls are wrong: with DIAGFUZZ_FAULTY_COUNTER=PATH, every third call counted in that
file across all processes (so a test can predict k of k/R exactly); otherwise each call is
wrong with probability 1/3, drawn from the OS (fresh processes do not repeat a sequence).
"""

from __future__ import annotations

import fcntl
import os
import random

from tests.faulty._base import Faulty, flip_first_bit


def _wrong_this_time() -> bool:
    path = os.environ.get("DIAGFUZZ_FAULTY_COUNTER")
    if not path:
        return random.SystemRandom().random() < 1 / 3
    with open(path, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        count = int(f.read() or 0) + 1
        f.seek(0)
        f.truncate()
        f.write(str(count))
    return count % 3 == 0


class Flaky(Faulty):
    def fault(self, result, offset):
        return flip_first_bit(result) if result.numel() and _wrong_this_time() else result


impl = Flaky()
