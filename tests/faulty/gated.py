"""Right, but a call with offset == 0 waits until the file DIAGFUZZ_GATE names exists: a test
keeps a Case in flight exactly as long as it needs, with no guess at how long is enough."""

from __future__ import annotations

import os
import time
from pathlib import Path

from tests.faulty._base import Faulty

#: Longest wait for the gate: a test that never opens it fails instead of hanging.
GATE_TIMEOUT = 60.0


class Gated(Faulty):
    def fault(self, result, offset):
        if offset == 0:
            gate = Path(os.environ["DIAGFUZZ_GATE"])
            deadline = time.monotonic() + GATE_TIMEOUT
            while not gate.exists():
                if time.monotonic() > deadline:
                    raise TimeoutError(f"gated impl: {gate} was never created")
                time.sleep(0.01)
        return result


impl = Gated()
