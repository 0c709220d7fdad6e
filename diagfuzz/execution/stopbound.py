"""A stop always ends: from SIGTERM or SIGINT to exit in at most ``STOP_BOUND`` seconds.

The gate and the pytest plugin stop cooperatively: they stop their children, wait for
their threads and write their outputs from what finished, in a few seconds. But a thread
can block where no stop reaches it (an import that waits, a C call, a lock another thread
holds, the interpreter's exit joining a pool's worker thread), and a child can ignore
SIGTERM. So a stop also arms a ``StopBound``: if the process is still there ``STOP_BOUND``
seconds after the signal, it kills every process descended from this one (and their
process groups), writes the outputs from what the process holds (unless the cooperative
path wrote them already; a writer that itself blocks gets ``WRITE_BOUND`` seconds), and
ends the process with ``os._exit``: the written result's code, else 7 (stopped).

Everything the expiry needs is imported here, at import time: an import at expiry could
wait on the very import lock a blocked thread holds.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from diagfuzz.core.exits import ExitCode

#: Seconds from the stop signal to the process's end, at most (the expiry's own writing
#: included: WRITE_BOUND is inside it).
STOP_BOUND = 10.0
#: Of STOP_BOUND, the seconds the expiry gives its writer of what the process holds.
WRITE_BOUND = 2.0
#: Environment variable: another bound in seconds (tests use a short one).
STOP_BOUND_ENV = "DIAGFUZZ_STOP_BOUND"


def stop_bound() -> float:
    """STOP_BOUND, or ``$DIAGFUZZ_STOP_BOUND`` where set to a positive number."""
    with contextlib.suppress(ValueError):
        value = float(os.environ.get(STOP_BOUND_ENV, ""))
        if value > 0:
            return value
    return STOP_BOUND


def descendants(root: int | None = None) -> list[int]:
    """Pids of every live process descended from ``root`` (this process), children first
    (Linux: ``/proc``; elsewhere none are found and the caller's own kills stand)."""
    root = os.getpid() if root is None else root
    children: dict[int, list[int]] = {}
    proc = Path("/proc")
    if not proc.is_dir():
        return []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            # ``pid (name) state ppid ...``: the name may hold spaces and parentheses.
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


#: ``prctl`` option: orphaned descendants are re-parented to this process, not to init.
PR_SET_CHILD_SUBREAPER = 36


def adopt_orphans() -> bool:
    """Make this process its descendants' subreaper (Linux ``prctl``): a grandchild whose
    parent died (inductor's compile workers when their executor is killed) becomes this
    process's child, so ``descendants`` still finds it and a stopped run leaves no process
    behind. False where the platform has no such call."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def kill_descendants() -> list[int]:
    """SIGKILL every process descended from this one, and the process groups they lead
    (a suite's pytest runs in a session of its own); this process's group is spared."""
    mine = os.getpgrp()
    killed = descendants()
    for pid in killed:
        with contextlib.suppress(OSError):
            group = os.getpgid(pid)
            if group == pid and group != mine:
                os.killpg(group, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return killed


class StopBound:
    """The watchdog of one stop (module docstring). ``write`` writes the outputs from what
    the process holds and returns the exit code; ``exit`` ends the process (``os._exit``;
    a test passes its own)."""

    def __init__(self, write: Callable[[], int], bound: float | None = None,
                 exit: Callable[[int], object] = os._exit) -> None:
        self.write = write
        self.bound = stop_bound() if bound is None else bound
        self.exit = exit
        self.code: int | None = None  # set once the cooperative path wrote its outputs
        self.summary = ""  # its last line, printed where the expiry cuts it short
        self.armed_at: float | None = None
        self._done = threading.Event()
        self._lock = threading.Lock()

    def arm(self) -> None:
        """Start the bound's clock (the first call only: a second signal does not reset
        it)."""
        with self._lock:
            if self.armed_at is not None:
                return
            self.armed_at = time.monotonic()
        threading.Thread(target=self._expire, name="diagfuzz-stop-bound", daemon=True).start()

    def deadline(self) -> float:
        """``time.monotonic()`` at which the expiry fires (inf when not armed)."""
        if self.armed_at is None:
            return float("inf")
        return self.armed_at + self.bound - WRITE_BOUND

    def written(self, code: int, summary: str = "") -> None:
        """The cooperative path wrote its outputs: an expiry only ends the process, after
        printing ``summary`` (what the cooperative path would have printed last)."""
        self.summary = summary  # before the code: an expiry that sees the code sees it
        self.code = int(code)

    def disarm(self) -> None:
        """The process goes on (an in-process caller): the expiry never fires."""
        self._done.set()

    def _expire(self) -> None:
        assert self.armed_at is not None
        if self._done.wait(max(0.0, self.deadline() - time.monotonic())):
            return
        killed = kill_descendants()
        with contextlib.suppress(Exception):
            sys.stderr.write(f"diagfuzz: not ended {self.bound - WRITE_BOUND:g} s after the stop "
                             f"signal: {len(killed)} process(es) it started killed; writing "
                             f"what it holds and exiting\n")
            sys.stderr.flush()
        code = self.code
        if code is None:
            code = self._write_bounded()
        elif self.summary:
            with contextlib.suppress(Exception):
                sys.stdout.write(self.summary + "\n")
        if self._done.is_set():
            return
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        self.exit(int(code))

    def _write_bounded(self) -> int:
        """``write``'s code, in a thread of its own given WRITE_BOUND seconds; 7 where it
        blocks or raises."""
        result: list[int] = []

        def run() -> None:
            with contextlib.suppress(BaseException):
                result.append(int(self.write()))

        writer = threading.Thread(target=run, name="diagfuzz-stop-write", daemon=True)
        writer.start()
        writer.join(WRITE_BOUND)
        return result[0] if result else int(ExitCode.STOPPED)


class EarlyStop:
    """A stop signal that comes while a command starts (its imports, the fork server it
    starts first): recorded, not fatal, so the command's own stop handling takes it over
    and writes its outputs (the gate: every stage stopped, exit 7). It arms a StopBound at
    once (its writer replaced by the command's), so a start-up that blocks ends too."""

    signal: str = ""
    bound: StopBound | None = None

    @classmethod
    def install(cls) -> None:
        """Record SIGTERM and SIGINT from now on (main thread only), and adopt orphaned
        descendants (``adopt_orphans``)."""
        if threading.current_thread() is not threading.main_thread():
            return
        adopt_orphans()
        names: dict[int, str] = {signal.SIGTERM: "SIGTERM", signal.SIGINT: "SIGINT"}

        def handler(signum: int, _frame: object) -> None:
            cls.signal = cls.signal or names.get(signum, str(signum))
            if cls.bound is None:
                cls.bound = StopBound(lambda: int(ExitCode.STOPPED))
            cls.bound.arm()

        for signum in names:
            signal.signal(signum, handler)
