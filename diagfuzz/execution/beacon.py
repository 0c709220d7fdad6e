"""The beacon: one shared word through which an executor tells its runner when its judging
last moved on (``diagfuzz.core.progress``).

Why a shared word and not a message: the runner must know, at any moment, how long the call
running now has run, also inside a batch the executor answers only at its end. A message per
mark would cost a pipe write per call and a read on the runner's side; a store into a shared
page costs the executor ~0.3 us and the runner nothing until it checks a deadline.

The runner creates the file and passes its path in ``BEACON_ENV``; each executor it starts
maps it. The first word holds ``time.monotonic()`` of the last mark (the clock is the same
for every process of a host), the second 1.0 while Triton compiles a kernel (a JIT
library's warm call may compile a new specialisation: the runner then allows what a first
call gets). The executor also keeps the longest stretch between two marks of the request
it judges: what its reply reports, and what the runner calibrates on.
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
from typing import Any

from diagfuzz.core import progress

#: Where an executor finds its runner's beacon file.
BEACON_ENV = "DIAGFUZZ_BEACON"
_WORDS = struct.Struct("dd")


class Beacon:
    """The runner's side: the file, and the time of the executor's last mark."""

    def __init__(self, directory: Path | None = None) -> None:
        fd, name = tempfile.mkstemp(prefix="beacon-", dir=directory)
        self.path = Path(name)
        with contextlib.closing(os.fdopen(fd, "r+b")) as f:
            f.write(bytes(_WORDS.size))
            f.flush()
            self._map: mmap.mmap | None = mmap.mmap(f.fileno(), _WORDS.size)

    def reset(self) -> None:
        """No mark yet (a new executor starts)."""
        if self._map is not None:
            _WORDS.pack_into(self._map, 0, 0.0, 0.0)

    def read(self) -> tuple[float, bool]:
        """(``time.monotonic()`` of the executor's last mark, 0.0 for none; whether it is
        compiling a kernel now)."""
        if self._map is None:
            return 0.0, False
        last, compiling = _WORDS.unpack_from(self._map, 0)
        return last, compiling > 0

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
                self._map = mmap.mmap(f.fileno(), _WORDS.size)
        self.last = time.monotonic()
        self.longest = 0.0
        #: Kernels Triton is compiling now (its hooks: ``watch_compiles``).
        self.compiling = 0

    def begin(self) -> None:
        """A request starts: its stretches are measured from now."""
        self.longest = 0.0
        self.compiling = 0  # a compile that raised never said it ended
        self.tick()

    def tick(self) -> None:
        now = time.monotonic()
        stretch = now - self.last
        if stretch > self.longest and not self.compiling:
            self.longest = stretch
        self.last = now
        if self._map is not None:
            _WORDS.pack_into(self._map, 0, now, float(self.compiling > 0))

    def compile_begin(self) -> None:
        """Triton starts compiling (or loading) a kernel: a stretch a warm call may take."""
        self.tick()
        self.compiling += 1
        self.tick()

    def compile_end(self) -> None:
        self.compiling = max(0, self.compiling - 1)
        self.tick()

    def end(self) -> float:
        """The request is judged: the longest stretch between its marks (seconds)."""
        self.tick()
        return self.longest


def install_marks() -> Marks:
    """The executor's marks, on its runner's beacon, called at every progress tick and
    around every Triton compile."""
    marks = Marks(os.environ.get(BEACON_ENV))
    progress.install(marks.tick)
    watch_compiles(marks)
    return marks


def watch_compiles(marks: Marks) -> bool:
    """Mark Triton's compiles (``triton.knobs.runtime``'s JIT hooks, chained to any hook
    already set); False where this Triton has no such hooks (then a warm call that compiles
    may stall past its allowance, and is judged again alone, as a first call)."""
    try:
        from triton import knobs
    except ImportError:
        return False
    runtime: Any = getattr(knobs, "runtime", None)
    if not (hasattr(runtime, "jit_cache_hook") and hasattr(runtime, "jit_post_compile_hook")):
        return False
    before, after = runtime.jit_cache_hook, runtime.jit_post_compile_hook

    def cache_hook(*args: object, **kwargs: object) -> object:
        skip = before(*args, **kwargs) if before is not None else None
        if not skip:  # it compiles (a truthy answer skips the compile and its post hook)
            marks.compile_begin()
        return skip

    def post_compile_hook(*args: object, **kwargs: object) -> object:
        marks.compile_end()
        return after(*args, **kwargs) if after is not None else None

    runtime.jit_cache_hook = cache_hook
    runtime.jit_post_compile_hook = post_compile_hook
    return True


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

    @property
    def fired(self) -> bool:
        """Whether the last ``watch`` sent its stop: where the ``Stalled`` it raised landed
        in a C call that turned it into an error of its own (torch's argument parser makes
        it a TypeError, Triton's interpreter an InterpreterError), the Case still stalled."""
        return self._fired

    def _handler(self, _signum: int, _frame: object) -> None:
        if self._armed.is_set() and self._fired:
            self._armed.clear()
            raise Stalled(f"no progress within {self.allowance:g}s")

    def _run(self) -> None:
        main = threading.main_thread().ident
        assert main is not None
        while True:
            self._armed.wait()
            if self.marks.compiling:  # a compile is progress of its own kind
                time.sleep(0.05)
                continue
            left = self.allowance - (time.monotonic() - self.marks.last)
            if left > 0:
                time.sleep(min(left, 0.05))
                continue
            if self._armed.is_set() and not self._fired:
                self._fired = True
                signal.pthread_kill(main, self.SIGNAL)
            time.sleep(0.05)
