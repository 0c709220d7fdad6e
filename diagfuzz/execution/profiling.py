"""Opt-in cProfile of a fuzz run's workers and executors (``DIAGFUZZ_PROFILE=DIR``).

Why: on an H200 host a suite worker checked ~380 Cases/s inside its shards while the same
worker's runner benchmark checked ~720/s pipelined; the gap does not show on a CPU machine,
so the profile has to come from the run itself, on the host that matters. With the variable
set, each xdist worker profiles its shard items (drawing, bookkeeping, waiting for verdicts)
and each executor profiles its Case checks; each process writes ``DIR/<role>-<pid>.pstats``
when it ends. ``benchmarks/bench_throughput.py suite --profile`` sets it and prints both.
"""

from __future__ import annotations

import cProfile
import os
from pathlib import Path

PROFILE_ENV = "DIAGFUZZ_PROFILE"


class Profiler:
    """A cProfile switched on around units of work; a no-op unless DIAGFUZZ_PROFILE is set."""

    def __init__(self, role: str) -> None:
        directory = os.environ.get(PROFILE_ENV, "")
        self.path = Path(directory) / f"{role}-{os.getpid()}.pstats" if directory else None
        self._profile = cProfile.Profile() if self.path else None

    @property
    def active(self) -> bool:
        return self._profile is not None

    def enable(self) -> None:
        if self._profile is not None:
            self._profile.enable()

    def disable(self) -> None:
        if self._profile is not None:
            self._profile.disable()

    def dump(self) -> Path | None:
        """Write the stats (the directory is made if needed); the path, or None if off."""
        if self._profile is None or self.path is None:
            return None
        self._profile.disable()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._profile.dump_stats(self.path)
        return self.path
