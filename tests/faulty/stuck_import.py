"""An implementation whose import never ends, and whose processes ignore SIGTERM: what a
stop must still end (tests/test_stop_bound.py). Imported in a process's main thread (an
executor, the suite's pytest) it ignores SIGTERM first; in the gate it blocks the stages'
thread. Each importing process leaves a file named by its pid in
``$DIAGFUZZ_TEST_STUCK_MARK``, so the test knows when every part is stuck. With
``DIAGFUZZ_TEST_STUCK_WORKERS_ONLY=1`` only pytest-xdist workers get stuck; elsewhere it is
plain PyTorch (a pytest controller that plans and reports)."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

if os.environ.get("DIAGFUZZ_TEST_STUCK_WORKERS_ONLY") and "PYTEST_XDIST_WORKER" not in os.environ:
    from examples.plain_torch import *  # noqa: F403

    impl = sys.modules[__name__]
else:
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _MARK = os.environ.get("DIAGFUZZ_TEST_STUCK_MARK")
    if _MARK:
        Path(_MARK).mkdir(parents=True, exist_ok=True)
        (Path(_MARK) / f"{os.getpid()}-{threading.current_thread().name}").touch()
    while True:
        time.sleep(0.5)
