"""Deterministic or flaky: every finding's Case re-run in a fresh process of its own.

The rule: one fresh executor runs the Case R times. R failures of the same kind are
``deterministic R/R``. Anything else (a pass among them, another kind) and a second fresh
executor runs it R more times: ``flaky k/2R``. A crash or hang kills or stalls its executor,
so those Cases run their R re-runs in R fresh executors side by side instead (a hang then
costs one timeout, not R).

Every finding is classified at once, spread over ``parallel`` threads, each driving its own
executors: a gate with eight findings spends about one executor start-up and the Cases'
own time, not eight start-ups in a row. The gate goes further: ``prepare`` launches spare
executors as its stages find causes, so re-runs take executors that started while the
stages ran. A fresh executor means no state in memory (a poisoned CUDA context, a counter
in the impl) carries over from the run that found the failure; a spare has judged nothing,
so it is as fresh as one started for its re-runs. What is on disk is shared on purpose:
Triton's and inductor's compile caches.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from diagfuzz.core.case import Case
from diagfuzz.core.corpus import case_id
from diagfuzz.core.verdict import Verdict
from diagfuzz.execution.parent import DEFAULT_TIMEOUT, ExecutorError, ProcessRunner
from diagfuzz.execution.timeouts import Calibration, KnownFaults
from diagfuzz.gate.options import DEFAULT_REPEATS

#: Kinds whose re-runs each take a fresh executor (it dies or is killed with the Case).
RESTARTING_KINDS = ("crash", "hang")


@dataclass(frozen=True)
class Classification:
    """How a failure of ``kind`` on ``case`` reproduced over ``runs`` re-runs.

    ``failures`` is k: re-runs that failed with the same kind. ``kinds`` counts every
    re-run's kind (a Case can be flaky between two kinds, e.g. 3 mismatch + 2 pass);
    ``processes``: the fresh executors the re-runs took.
    """

    case: Case
    kind: str
    runs: int
    failures: int
    kinds: dict[str, int]
    example: Verdict | None = None  # one re-run verdict of ``kind`` (its details), if any
    processes: int = 1

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
                "failures": self.failures, "runs": self.runs, "kinds": dict(self.kinds),
                "processes": self.processes}


@dataclass(frozen=True)
class Rerun:
    """How to re-run: the impl, device, oracle and limits every executor gets."""

    impl_spec: str
    device: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    oracle: str = "check"
    strict: bool = False
    workdir: Path | None = None
    #: The run's calibrated timeouts and confirmed faults (``diagfuzz.execution.timeouts``):
    #: a hang's re-runs wait its calibrated allowance, not the whole timeout.
    learnt: tuple[Calibration, KnownFaults] | None = None


def spare_limit() -> int:
    """Executors classification runs side by side at most (and spares it keeps): one per
    CPU, at least two."""
    return max(2, os.cpu_count() or 2)


def _validated(failure: Verdict, repeats: int) -> Case:
    if failure.case is None:
        raise ValueError(f"classify: the verdict has no Case to re-run: {failure}")
    if failure.ok:
        raise ValueError(f"classify: the verdict is a pass, nothing to classify: {failure}")
    if repeats < 1:
        raise ValueError(f"classify: repeats must be >= 1, got {repeats}")
    return failure.case


class Classifier:
    """Re-runs findings' Cases in fresh executors; ``stop`` ends every executor at once
    (the gate's SIGTERM and time cap), after which re-runs report what they have."""

    def __init__(self, rerun: Rerun, repeats: int = DEFAULT_REPEATS) -> None:
        self.rerun = rerun
        self.repeats = repeats
        self._lock = threading.Lock()
        self._live: set[ProcessRunner] = set()
        #: Launched by ``prepare``, not yet taken by a re-run.
        self._spares: list[ProcessRunner] = []
        self._made_spares = 0
        self.stopped = False

    def stop(self) -> None:
        """Kill every executor now; re-runs not yet started never start."""
        with self._lock:
            self.stopped = True
            live = list(self._live)
        for runner in live:
            runner.close()

    def prepare(self, count: int) -> None:
        """Have ``count`` spare executors in all launched (none more once as many were):
        each starts now (interpreter, torch, the device, the impl) and waits, never used,
        for the re-runs of one Case. Each logs under ``workdir/spare-<n>``."""
        with self._lock:
            while not self.stopped and self._made_spares < count:
                log = (None if self.rerun.workdir is None
                       else self.rerun.workdir / f"spare-{self._made_spares}")
                runner = ProcessRunner(self.rerun.impl_spec, self.rerun.device,
                                       timeout=self.rerun.timeout, oracle=self.rerun.oracle,
                                       workdir=log, strict=self.rerun.strict,
                                       learnt=self.rerun.learnt)
                runner.launch()
                self._spares.append(runner)
                self._live.add(runner)
                self._made_spares += 1

    def close_spares(self) -> None:
        """Close the spares no re-run took."""
        with self._lock:
            spares, self._spares = self._spares, []
            self._live.difference_update(spares)
        for runner in spares:
            runner.close()

    def _fresh(self, case: Case, log: Path | None, oracle: str,
               timeout: float) -> ProcessRunner | None:
        """A spare if one is left, else a new executor (None once stopped). A spare's log
        then says which Case it re-runs (its directory cannot name it)."""
        with self._lock:
            if self.stopped:
                return None
            if self._spares:
                runner = self._spares.pop(0)
                runner.oracle, runner.timeout = oracle, timeout
                if runner.log is not None:
                    with contextlib.suppress(OSError), runner.log.open("a") as out:
                        out.write(f"[diagfuzz classification: re-runs of Case "
                                  f"{case_id(case)}: {case.describe()}]\n")
                return runner
            runner = ProcessRunner(self.rerun.impl_spec, self.rerun.device, timeout=timeout,
                                   oracle=oracle, workdir=log, strict=self.rerun.strict,
                                   learnt=self.rerun.learnt)
            self._live.add(runner)
            return runner

    def _runs(self, case: Case, count: int, log: Path | None, oracle: str,
              timeout: float) -> list[Verdict]:
        """``count`` verdicts of ``case`` from one fresh executor (fewer if stopped)."""
        runner = self._fresh(case, log, oracle, timeout)
        if runner is None:
            return []
        verdicts: list[Verdict] = []
        try:
            for _ in range(count):
                verdict = runner.run(case)
                if self.stopped:  # killed under it: not the Case's verdict
                    break
                verdicts.append(verdict)
        except (ExecutorError, OSError, ValueError):
            if not self.stopped:
                raise
        finally:
            with self._lock:
                self._live.discard(runner)
            runner.close()
        return verdicts

    def classify(self, failure: Verdict, *, oracle: str | None = None,
                 timeout: float | None = None) -> Classification | None:
        """Classify one failure by the rule of the module docstring (None: stopped before
        any re-run finished)."""
        repeats = self.repeats
        case = _validated(failure, repeats)
        oracle = oracle or self.rerun.oracle
        timeout = timeout or self.rerun.timeout
        base = None if self.rerun.workdir is None else self.rerun.workdir / case_id(case)

        def log(i: int) -> Path | None:
            return None if base is None else base / str(i)

        if failure.kind in RESTARTING_KINDS:
            with ThreadPoolExecutor(max_workers=repeats) as pool:
                parts = list(pool.map(lambda i: self._runs(case, 1, log(i), oracle, timeout),
                                      range(repeats)))
            verdicts = [v for part in parts for v in part]
            processes = repeats
        else:
            verdicts = self._runs(case, repeats, log(0), oracle, timeout)
            processes = 1
            if len(verdicts) == repeats and any(v.kind != failure.kind for v in verdicts):
                verdicts += self._runs(case, repeats, log(1), oracle, timeout)
                processes = 2
        if not verdicts:
            return None
        kinds = Counter(v.kind for v in verdicts)
        same = [v for v in verdicts if v.kind == failure.kind]
        return Classification(case, failure.kind, len(verdicts), len(same),
                              dict(sorted(kinds.items())), same[0] if same else None,
                              processes)

    def classify_all(self, failures: Sequence[tuple[Verdict, str, float]],
                     parallel: int | None = None,
                     done: Callable[[int], None] | None = None
                     ) -> list[Classification | None]:
        """Classify every (failure, oracle, timeout) at once over ``parallel`` threads
        (default: one per failure, at most the CPUs); ``done(i)`` after each."""
        if not failures:
            self.close_spares()
            return []
        parallel = parallel or min(len(failures), spare_limit())

        def one(i: int) -> Classification | None:
            verdict, oracle, timeout = failures[i]
            try:
                return self.classify(verdict, oracle=oracle, timeout=timeout)
            finally:
                if done is not None:
                    done(i)

        try:
            with ThreadPoolExecutor(max_workers=parallel,
                                    thread_name_prefix="diagfuzz-classify") as pool:
                return list(pool.map(one, range(len(failures))))
        finally:
            self.close_spares()


def classify(failure: Verdict, impl_spec: str, device: str | None = None, *,
             repeats: int = DEFAULT_REPEATS, timeout: float = DEFAULT_TIMEOUT,
             oracle: str = "check", workdir: str | os.PathLike[str] | None = None,
             strict: bool = False) -> Classification:
    """Classify one failure (``Classifier.classify``); with ``workdir``, each executor logs
    its stderr under ``workdir/<case id>/<i>/`` (and a crash verdict carries the tail)."""
    _validated(failure, repeats)
    rerun = Rerun(impl_spec, device, timeout, oracle, strict,
                  None if workdir is None else Path(workdir))
    found = Classifier(rerun, repeats).classify(failure)
    assert found is not None  # never stopped
    return found
