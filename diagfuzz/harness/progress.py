"""Progress of a long run: Cases done of the budget, findings so far, the pace.

xdist tells the controller about an item only when it ends, and a shard item can run for
minutes. So each worker writes its counts to ``<run dir>/<worker>/progress.json`` (about
once a second, atomically), and the controller reads them every few seconds and prints one
line: on a terminal one line that updates in place, elsewhere (a CI log) a plain line now
and then. The file also holds each signature's first failing verdict and counts, so a run
stopped mid-shard (SIGTERM, the time cap) still reports what its unfinished shards found.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

#: Seconds between a worker's writes of its counts.
WRITE_EVERY = 1.0
#: Seconds between the controller's lines: on a terminal, and in a log
#: (``DIAGFUZZ_PROGRESS_EVERY`` sets both).
SHOW_EVERY_TTY = 2.0
SHOW_EVERY_LOG = 15.0
EVERY_ENV = "DIAGFUZZ_PROGRESS_EVERY"
FILE_NAME = "progress.json"


class WorkerProgress:
    """One worker's counts over all its shards, written for the controller to read."""

    def __init__(self, worker_dir: Path) -> None:
        self.path = worker_dir / FILE_NAME
        self.cases = 0
        self.failing = 0
        self.unsupported = 0
        self.signatures: set[str] = set()
        #: Per signature: its first failing verdict (JSON) and its counts, as a finding.
        self.findings: dict[str, dict[str, Any]] = {}
        self._written = 0.0

    def add(self, verdict: Any, test_id: str = "", signature: Any = None,
            axes: dict[str, str] | None = None) -> None:
        """Count one explored Case's verdict; write now and then. A failing one's
        ``signature`` and ``axes`` (``cause_axes``) are computed here unless the caller has
        them already."""
        from diagfuzz.core.signature import signature_of

        self.cases += 1
        if verdict.unsupported:
            self.unsupported += 1
        elif not verdict.ok:
            self.failing += 1
            described = (signature or signature_of(verdict)).describe()
            self.signatures.add(described)
            self._note(described, verdict, test_id, axes)
        if time.monotonic() - self._written >= WRITE_EVERY:
            self.write()

    def _note(self, described: str, verdict: Any, test_id: str,
              axes: dict[str, str] | None) -> None:
        """The first failing verdict of a signature as a finding; later ones count in it."""
        from diagfuzz.core.signature import cause_axes
        from diagfuzz.harness.findings import Finding

        seen = self.findings.get(described)
        if seen is None:
            self.findings[described] = Finding.of(verdict, test_id).to_dict()
            return
        seen["count"] += 1
        case = verdict.case
        if case is not None:
            seen["dtypes"][case.dtype] = seen["dtypes"].get(case.dtype, 0) + 1
            if axes is None:
                axes = cause_axes(case.to_dict(), verdict.details)
            for axis, value in axes.items():
                counts = seen["classes"].setdefault(axis, {})
                counts[value] = counts.get(value, 0) + 1

    def write(self) -> None:
        """Write the counts (atomically: the reader never sees half a file)."""
        self._written = time.monotonic()
        data = {"cases": self.cases, "failing": self.failing,
                "unsupported": self.unsupported, "signatures": sorted(self.signatures),
                "findings": list(self.findings.values())}
        tmp = self.path.with_suffix(".tmp")
        try:
            tmp.write_text(json.dumps(data), encoding="utf-8")
            os.replace(tmp, self.path)
        except OSError:
            pass  # progress is a courtesy: never fail a Case over it


def read_all(run_dir: Path) -> dict[str, Any]:
    """The workers' counts summed (``signatures`` as a set)."""
    total: dict[str, Any] = {"cases": 0, "failing": 0, "unsupported": 0, "signatures": set(),
                             "findings": []}
    for path in run_dir.glob(f"*/{FILE_NAME}"):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        for key in ("cases", "failing", "unsupported"):
            total[key] += int(data.get(key, 0))
        total["signatures"].update(data.get("signatures", ()))
        total["findings"] += list(data.get("findings", ()))
    return total


def line(counts: dict[str, Any], budget: int, seconds: float) -> str:
    """``diagfuzz: 1,150 of ~6,000 Cases · 2 findings (14 failing Cases) · 460 Cases/s``."""
    rate = counts["cases"] / seconds if seconds > 0 else 0.0
    findings = len(counts["signatures"])
    text = (f"diagfuzz: {counts['cases']:,} of ~{budget:,} Cases · {findings} finding"
            f"{'' if findings == 1 else 's'} ({counts['failing']:,} failing Cases)")
    if counts["unsupported"]:
        text += f" · {counts['unsupported']:,} unsupported"
    return text + f" · {rate:,.0f} Cases/s · {seconds:.0f} s"


class Ticker:
    """Calls ``tick`` every ``every`` seconds from a daemon thread, between ``start`` and
    ``stop`` (the fuzz run's and the gate's progress lines)."""

    def __init__(self, name: str, every: float, tick: Callable[[], bool | None]) -> None:
        self.name = name
        self.every = every
        self.tick = tick  # returns False to end the thread
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            if self.tick() is False:
                return


class Printer:
    """The controller's progress line, from a daemon thread (``start``/``stop``)."""

    def __init__(self, run_dir: Path, budget: int, stream: TextIO | None = None) -> None:
        self.run_dir = run_dir
        self.budget = budget
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._started = time.monotonic()
        self._shown = False
        every = float(os.environ.get(EVERY_ENV) or
                      (SHOW_EVERY_TTY if self.tty else SHOW_EVERY_LOG))
        self._ticker = Ticker("diagfuzz-progress", every, self._show)

    def start(self) -> None:
        self._ticker.start()

    def stop(self) -> None:
        self._ticker.stop()
        if self.tty and self._shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()

    def _show(self) -> bool | None:
        counts = read_all(self.run_dir)
        if not counts["cases"]:
            return None
        text = line(counts, self.budget, time.monotonic() - self._started)
        try:
            self.stream.write(f"\r\x1b[K{text}" if self.tty else text + "\n")
            self.stream.flush()
            self._shown = True
        except (OSError, ValueError):
            return False
        return None
