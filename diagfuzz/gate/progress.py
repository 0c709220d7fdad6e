"""The gate is never silent: a line when each stage starts and ends, and a line at least
every 10 s with the Cases done of those planned, the findings so far and the time.

The fuzz suite runs in a pytest subprocess; its workers write their counts to
``progress.json`` files (``diagfuzz.harness.progress``), which the ticker reads. The gate's
own stages count here as they go. Lines go to stderr, so stdout keeps the summary alone;
``--quiet`` turns them off.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from diagfuzz.harness import progress as suite_progress

#: Seconds between the ticker's lines (``DIAGFUZZ_PROGRESS_EVERY`` sets it).
EVERY = 10.0


@dataclass
class _Count:
    planned: int
    done: int = 0
    running: bool = True


class GateProgress:
    """Counts of every stage, printed by a daemon thread (``start``/``stop``)."""

    def __init__(self, quiet: bool = False, stream: TextIO | None = None,
                 suite_root: Path | None = None) -> None:
        self.quiet = quiet
        self.stream = stream or sys.stderr
        self.suite_root = suite_root
        self.started = time.monotonic()
        self.every = float(os.environ.get(suite_progress.EVERY_ENV) or EVERY)
        self._counts: dict[str, _Count] = {}
        self._signatures: set[str] = set()
        self._lock = threading.Lock()
        self._ticker = suite_progress.Ticker("diagfuzz-gate-progress", self.every,
                                             lambda: self.say(self.line()))

    # --- what the stages report ------------------------------------------------------
    def say(self, text: str) -> None:
        """One line now (unless quiet)."""
        if self.quiet:
            return
        try:
            self.stream.write(f"diagfuzz gate [{self.elapsed():5.1f} s] {text}\n")
            self.stream.flush()
        except (OSError, ValueError):
            pass

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def begin(self, stage: str, planned: int, what: str = "Cases") -> None:
        with self._lock:
            self._counts[stage] = _Count(planned)
        noun = what.removesuffix("s") if planned == 1 else what
        self.say(f"{stage}: started ({planned:,} {noun} planned)" if planned
                 else f"{stage}: started")

    def advance(self, stage: str, n: int = 1, failed_signature: str = "") -> None:
        with self._lock:
            count = self._counts.get(stage)
            if count is not None:
                count.done += n
            if failed_signature:
                self._signatures.add(failed_signature)

    def end(self, stage: str, summary: str) -> None:
        with self._lock:
            count = self._counts.get(stage)
            if count is not None:
                count.running = False
        self.say(f"{stage}: {summary}")

    # --- the ticker ---------------------------------------------------------------------
    def _suite(self) -> tuple[int, set[str]]:
        if self.suite_root is None or not self.suite_root.exists():
            return 0, set()
        cases, signatures = 0, set()
        for run_dir in self.suite_root.glob("run-*"):
            counts = suite_progress.read_all(run_dir)
            cases += counts["cases"]
            signatures |= counts["signatures"]
        return cases, signatures

    def line(self) -> str:
        """``1,234 of ~2,880 Cases · 3 findings so far · running: fuzz suite 1,100/2,800``."""
        suite_cases, suite_signatures = self._suite()
        with self._lock:
            counts = dict(self._counts)
            if "fuzz suite" in counts:
                counts["fuzz suite"].done = max(counts["fuzz suite"].done, suite_cases)
            signatures = self._signatures | suite_signatures
            done = sum(c.done for c in counts.values())
            planned = sum(max(c.planned, c.done) for c in counts.values())
            running = [f"{name} {c.done:,}/{c.planned:,}" if c.planned else name
                       for name, c in counts.items() if c.running]
        n = len(signatures)
        text = (f"{done:,} of ~{planned:,} Cases · {n} finding{'' if n == 1 else 's'} "
                "so far")
        return text + (f" · running: {', '.join(running)}" if running else "")

    def start(self) -> None:
        if not self.quiet:
            self._ticker.start()

    def stop(self) -> None:
        self._ticker.stop()
