"""Wrong as ``tests.faulty.wrong`` (flips a result bit when offset > 0), and its first call
kills the process whose id DIAGFUZZ_TEST_KILL_PID holds: a shared example database server
that goes away in the middle of a run (tests/test_campaign_database.py starts that server)."""

from __future__ import annotations

import os
import signal

from tests.faulty.wrong import Wrong


class KillsServer(Wrong):
    killed = False

    def fault(self, result, offset):
        if not KillsServer.killed:
            KillsServer.killed = True
            pid = os.environ.get("DIAGFUZZ_TEST_KILL_PID")
            if pid:
                os.kill(int(pid), signal.SIGKILL)
        return super().fault(result, offset)


impl = KillsServer()
