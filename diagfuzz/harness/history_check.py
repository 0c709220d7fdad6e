"""Suite findings that pass alone: the earlier calls that make them fail, found before the
reproducers are written.

A suite executor judges thousands of Cases, so a bug behind a library's state (a cache keyed
without strides, a switch at the n-th call, a flag one op leaves for another) fails after
earlier calls and passes when its Case runs alone in a fresh process: a reproducer of the
Case alone would say "fixed?" while the bug is there. So before the reproducers are written
the controller re-runs each finding's Case in a fresh executor, by the gate's rule with one
repeat (``diagfuzz.execution.classification``): where it passes alone, its executor's history
is replayed before it and shrunk, the reproducer replays the shortest failing sequence, and
the finding's block says "passes alone; fails after ...". The gate classifies every finding
itself, so its suite stage turns this off (``--diagfuzz-history-check off``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path

from diagfuzz.execution import history
from diagfuzz.execution.classification import Classification, Classifier, Rerun
from diagfuzz.execution.timeouts import learnt_of_run
from diagfuzz.harness.findings import Finding

#: Seconds the check may take in all (it stops its executors then, and the findings it has
#: not finished keep their Case alone), when no --diagfuzz-max-seconds leaves less.
CHECK_SECONDS = 120.0
#: Kinds it leaves to the reproducer as they are: a harness error is no verdict of the
#: impl's.
LEFT_ALONE = ("harness-error",)
#: The fuzz suite's sequence search item (``diagfuzz.suite.test_sequences``).
SEQUENCE_TEST = "test_sequences"


def _of_sequence_search(finding: Finding) -> bool:
    return any(SEQUENCE_TEST in test for test in finding.test_ids)


def needs_check(finding: Finding) -> bool:
    """Whether a finding's Case had calls before it in its executor, which its reproducer
    would leave out (a sequence search finding replays its own sequence)."""
    verdict = finding.as_verdict()
    if verdict is None or verdict.case is None or verdict.ok or verdict.kind in LEFT_ALONE:
        return False
    if _of_sequence_search(finding):
        return False
    recorded = verdict.details.get("history")
    return isinstance(recorded, dict) and int(recorded.get("calls", 0)) > 0


def checker(rerun: Rerun) -> Classifier:
    """The check's classifier: one repeat (the reproducer's own default); ``stop`` ends it."""
    return Classifier(rerun, repeats=1)


def check_history(findings: Sequence[Finding], classifier: Classifier,
                  seconds: float = CHECK_SECONDS) -> None:
    """Classify every finding that ``needs_check``, side by side, within ``seconds`` (then
    ``classifier.stop``); each gets its ``classification`` where one finished and says
    more than "fails alone"."""
    chosen = [f for f in findings if needs_check(f)]
    if not chosen or seconds <= 0 or classifier.stopped:
        return
    rerun = classifier.rerun
    timer = threading.Timer(seconds, classifier.stop)
    timer.daemon = True
    timer.start()
    try:
        failures = []
        for finding in chosen:
            verdict = finding.as_verdict()
            assert verdict is not None
            failures.append((verdict, rerun.oracle, rerun.timeout))
        for finding, found in zip(chosen, classifier.classify_all(failures), strict=True):
            if found is not None and found.story():
                finding.classification = found
    finally:
        timer.cancel()


def check_seconds(stop_at: float | None, now: float | None = None) -> float:
    """The check's time: ``CHECK_SECONDS``, or half of what is left before the run's
    --diagfuzz-max-seconds ends (``stop_at``, wall-clock), whichever is less."""
    if stop_at is None:
        return CHECK_SECONDS
    left = stop_at - (time.time() if now is None else now)
    return max(0.0, min(CHECK_SECONDS, left / 2))


def rerun_of(impl: str, device: str, timeout: float, strict: bool, run_dir: str) -> Rerun:
    """How the check re-runs a Case: the run's impl, device, timeout and strictness, and
    the hangs and crashes its workers confirmed (a known hang's re-run waits a known
    hang's allowance, and is not confirmed again); each executor logs under
    ``<run dir>/history-check``."""
    return Rerun(impl, device, timeout, "check", strict, Path(run_dir) / "history-check",
                 learnt_of_run(Path(run_dir) / "known-faults"))


def sequence_arguments(finding: Finding) -> dict[str, object]:
    """The reproducer's ``sequence`` and ``story``: a sequence search finding's own calls
    (its executor's history: the search gives each sequence fresh executors), else the
    shortest failing sequence the check found; {} where the Case fails alone (or the check
    did not finish it, or the history file is on another machine)."""
    verdict = finding.as_verdict()
    if verdict is not None and _of_sequence_search(finding):
        calls = history.read(verdict.details.get("history"))
        if not calls:
            return {}
        n = len(calls)
        return {"sequence": calls,
                "story": f"found after {n} earlier call{'' if n == 1 else 's'} in one "
                         "executor by the suite's sequence search"}
    found: Classification | None = finding.classification
    if found is None or not found.deterministic or not found.sequence:
        return {}
    return {"sequence": list(found.sequence), "story": found.story()}


__all__ = ["CHECK_SECONDS", "LEFT_ALONE", "SEQUENCE_TEST", "check_history", "check_seconds",
           "checker", "needs_check", "rerun_of", "sequence_arguments"]
