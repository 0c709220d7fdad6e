"""The beacon: one shared word through which an executor tells its runner when its judging
last moved on (``diagfuzz.core.progress``).

Why a shared word and not a message: the runner must know, at any moment, how long the call
running now has run, also inside a batch the executor answers only at its end. A message per
mark would cost a pipe write per call and a read on the runner's side; a store into a shared
page costs the executor ~0.3 us and the runner nothing until it checks a deadline.

The runner creates the file and passes its path in ``BEACON_ENV``; each executor it starts
maps it. The word holds ``time.monotonic()`` of the last mark (the clock is the same for
every process of a host). The executor also keeps the longest stretch between two marks of
the request it judges: what its reply reports, and what the runner calibrates on.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import signal
import struct
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from diagfuzz.core import progress

#: Where an executor finds its runner's beacon file.
BEACON_ENV = "DIAGFUZZ_BEACON"
_WORD = struct.Struct("d")


class Beacon:
    """The runner's side: the file, and the time of the executor's last mark."""

    def __init__(self, directory: Path | None = None) -> None:
        fd, name = tempfile.mkstemp(prefix="beacon-", dir=directory)
        self.path = Path(name)
        with contextlib.closing(os.fdopen(fd, "r+b")) as f:
            f.write(bytes(_WORD.size))
            f.flush()
            self._map: mmap.mmap | None = mmap.mmap(f.fileno(), _WORD.size)

    def reset(self) -> None:
        """No mark yet (a new executor starts)."""
        if self._map is not None:
            _WORD.pack_into(self._map, 0, 0.0)

    def last(self) -> float:
        """``time.monotonic()`` of the executor's last mark (0.0: none)."""
        return _WORD.unpack_from(self._map, 0)[0] if self._map is not None else 0.0

    def close(self) -> None:
        if self._map is not None:
            self._map.close()
            self._map = None
        with contextlib.suppress(OSError):
            self.path.unlink()


class Marks:
    """The executor's side: each ``tick`` stores the time in the runner's beacon (where one
    was given) and keeps the longest stretch between marks since ``begin``."""

    def __init__(self, path: str | None) -> None:
        self._map: mmap.mmap | None = None
        if path:
            with contextlib.suppress(OSError, ValueError), open(path, "r+b") as f:
                self._map = mmap.mmap(f.fileno(), _WORD.size)
        self.last = time.monotonic()
        self.longest = 0.0

    def begin(self) -> None:
        """A request starts: its stretches are measured from now."""
        self.longest = 0.0
        self.tick()

    def tick(self) -> None:
        now = time.monotonic()
        stretch = now - self.last
        if stretch > self.longest:
            self.longest = stretch
        self.last = now
        if self._map is not None:
            _WORD.pack_into(self._map, 0, now)

    def end(self) -> float:
        """The request is judged: the longest stretch between its marks (seconds)."""
        self.tick()
        return self.longest


def install_marks() -> Marks:
    """The executor's marks, on its runner's beacon, called at every progress tick."""
    marks = Marks(os.environ.get(BEACON_ENV))
    progress.install(marks.tick)
    return marks


class Stalled(BaseException):
    """Raised in the executor's main thread when the Case it judges made no progress within
    the allowance its runner sent. A BaseException: no oracle or implementation handler of
    ``Exception`` may take it for the implementation's own error."""


class StallWatch:
    """Stops a stuck Case inside the executor, so that a known hang costs its allowance and
    no executor start (interpreter, impl import, a first call again).

    The runner sends an allowance with each Case of an op whose hang is confirmed;
    ``watch`` arms a thread that, once no mark came for that long, sends the main thread
    ``SIGNAL``, whose handler raises ``Stalled`` there. That reaches a stall in Python code
    (an interpreted kernel's loop, a sleep); a call stuck in C (a device synchronisation)
    takes the signal only when it returns, and its runner kills the executor as for any
    hang.
    """

    SIGNAL = signal.SIGUSR2

    def __init__(self, marks: Marks) -> None:
        self.marks = marks
        self.allowance = 0.0
        self._armed = threading.Event()
        self._fired = False
        signal.signal(self.SIGNAL, self._handler)
        threading.Thread(target=self._run, name="diagfuzz-stall-watch", daemon=True).start()

    @contextlib.contextmanager
    def watch(self, allowance: float) -> Iterator[None]:
        """Within the block, a stall past ``allowance`` seconds raises ``Stalled`` (0: no
        watch)."""
        if allowance <= 0:
            yield
            return
        self.allowance, self._fired = allowance, False
        self._armed.set()
        try:
            yield
        finally:
            self._armed.clear()

    def _handler(self, _signum: int, _frame: object) -> None:
        if self._armed.is_set() and self._fired:
            self._armed.clear()
            raise Stalled(f"no progress within {self.allowance:g}s")

    def _run(self) -> None:
        main = threading.main_thread().ident
        assert main is not None
        while True:
            self._armed.wait()
            left = self.allowance - (time.monotonic() - self.marks.last)
            if left > 0:
                time.sleep(min(left, 0.05))
                continue
            if self._armed.is_set() and not self._fired:
                self._fired = True
                signal.pthread_kill(main, self.SIGNAL)
            time.sleep(0.05)
