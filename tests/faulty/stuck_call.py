"""Plain PyTorch whose ``diagonal`` never returns in a pytest-xdist worker, with SIGTERM
ignored there: a worker a stopped run cannot end (tests/test_stop_bound.py). The worker
leaves a file named by its pid in ``$DIAGFUZZ_TEST_STUCK_MARK`` once it is stuck."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import torch

from examples import plain_torch
from examples.plain_torch import diagonal_backward, diagonal_backward_out, diagonal_out

__all__ = ["diagonal", "diagonal_backward", "diagonal_backward_out", "diagonal_out"]
uses_triton_registration = False


def diagonal(x: torch.Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> torch.Tensor:
    in_worker = "PYTEST_XDIST_WORKER" in os.environ
    if in_worker and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        mark = Path(os.environ["DIAGFUZZ_TEST_STUCK_MARK"])
        mark.mkdir(parents=True, exist_ok=True)
        (mark / str(os.getpid())).touch()
        while True:
            time.sleep(0.5)
    return plain_torch.diagonal(x, offset, dim1, dim2)


impl = sys.modules[__name__]
