"""Deterministic or flaky: every failing Case is re-run R times, each in a fresh process.

A fresh executor per re-run means no state in memory (a poisoned CUDA context, a counter in
the impl) carries from one attempt to the next, so k/R measures the bug, not the history of
the process. What is on disk is shared on purpose: Triton's and inductor's compile caches.
The first re-run runs alone and fills them; the others then run side by side and load the
compiled kernels instead of compiling again, so an implementation that compiles for seconds
costs about two compiles to classify, not R racing ones.
"""

from __future__ import annotations

import os
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from diagfuzz.core.case import Case
from diagfuzz.core.corpus import case_id
from diagfuzz.core.verdict import Verdict
from diagfuzz.execution.parent import DEFAULT_TIMEOUT, ProcessRunner

#: Re-runs per failing Case unless the caller says otherwise.
DEFAULT_REPEATS = 5


@dataclass(frozen=True)
class Classification:
    """How a failure of ``kind`` on ``case`` reproduced over ``runs`` fresh re-runs.

    ``failures`` is k: re-runs that failed with the same kind. ``kinds`` counts every
    re-run's kind (a Case can be flaky between two kinds, e.g. 3 mismatch + 2 pass).
    """

    case: Case
    kind: str
    runs: int
    failures: int
    kinds: dict[str, int]
    example: Verdict | None = None  # one re-run verdict of ``kind`` (its details), if any

    @property
    def deterministic(self) -> bool:
        """Every re-run failed the same way (R/R)."""
        return self.runs > 0 and self.failures == self.runs

    @property
    def label(self) -> str:
        """'deterministic' or 'flaky'."""
        return "deterministic" if self.deterministic else "flaky"

    @property
    def ratio(self) -> str:
        """'k/R'."""
        return f"{self.failures}/{self.runs}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (for reports)."""
        return {"kind": self.kind, "label": self.label, "ratio": self.ratio,
                "failures": self.failures, "runs": self.runs, "kinds": dict(self.kinds)}


def _rerun(case: Case, impl_spec: str, device: str | None, timeout: float, oracle: str,
           workdir: Path | None, strict: bool) -> Verdict:
    with ProcessRunner(impl_spec, device, timeout=timeout, oracle=oracle,
                       workdir=workdir, strict=strict) as runner:
        return runner.run(case)


def classify(failure: Verdict, impl_spec: str, device: str | None = None, *,
             repeats: int = DEFAULT_REPEATS, timeout: float = DEFAULT_TIMEOUT,
             oracle: str = "check", parallel: int | None = None,
             workdir: str | os.PathLike[str] | None = None,
             strict: bool = False) -> Classification:
    """Re-run the Case of ``failure`` ``repeats`` times, each in a fresh executor.

    The first re-run runs alone (it fills the compile caches), then ``parallel`` at once
    (default: all the others; a hang then costs one more timeout, not R). With
    ``workdir``, re-run i logs its executor's stderr under ``workdir/<case id>/<i>/`` (and
    a crash verdict carries the tail) instead of printing it.
    """
    if failure.case is None:
        raise ValueError(f"classify: the verdict has no Case to re-run: {failure}")
    if failure.ok:
        raise ValueError(f"classify: the verdict is a pass, nothing to classify: {failure}")
    if repeats < 1:
        raise ValueError(f"classify: repeats must be >= 1, got {repeats}")
    case = failure.case
    logs = [None if workdir is None else Path(workdir) / case_id(case) / str(i)
            for i in range(repeats)]
    def rerun(log: Path | None) -> Verdict:
        return _rerun(case, impl_spec, device, timeout, oracle, log, strict)

    verdicts = [rerun(logs[0])]
    if repeats > 1:
        with ThreadPoolExecutor(max_workers=parallel or repeats - 1) as pool:
            verdicts += list(pool.map(rerun, logs[1:]))
    kinds = Counter(v.kind for v in verdicts)
    same = [v for v in verdicts if v.kind == failure.kind]
    return Classification(case, failure.kind, repeats, len(same),
                          dict(sorted(kinds.items())), same[0] if same else None)
