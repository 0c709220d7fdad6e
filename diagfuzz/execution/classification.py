"""Deterministic or flaky, and after what: every finding's Case re-run in fresh processes.

A failure is measured on a *sequence*: the calls a fresh executor makes, the failing Case
last. Deterministic means the same sequence fails the same way every time; flaky means its
outcome varies for one and the same sequence. The rule, cheapest first:

1. One fresh executor runs the Case R times (``--repeats``). R failures of the same kind:
   ``deterministic R/R``, it fails alone.
2. Some of the R fail: the sequence is the Case repeated up to its first failure (a *cold
   first call* that fails and then passes, or a *repeated call*: the same Case passes, then
   fails on its n-th call in one process). 2R fresh executors replay it side by side.
3. None of the R fails as the run saw it, but every one fails another way (an error
   raised after a launch that never ends: a hang where the synchronisation comes first):
   it fails alone, measured as it fails alone over R re-runs; no history is searched.
4. None of the R fail, the Case passes alone: its executor's history
   (``diagfuzz.execution.history``: every call it made before the Case) is replayed before
   it in a fresh executor, shorter parts first (``related_parts``: the call just before
   it, the op's calls with its sizes, the op's calls). The first part after which it
   fails is shrunk by delta debugging (``ddmin``, each test a replay in a fresh executor,
   within ``SHRINK_REPLAYS`` and ``SHRINK_SECONDS``; usually one earlier call, a
   *polluter*, is left) and the shortest sequence replayed 2R times: *after earlier calls*.
   If no part does, a second fresh executor runs the Case R more times: flaky.

A sequence that fails in all 2R replays is ``deterministic`` (the gate's exit 1) and its
reproducer replays it; anything less is ``flaky k/2R`` (exit 2). A crash or hang kills or
stalls its executor, so in step 1 its R runs take R fresh executors side by side.

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
import dataclasses
import itertools
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from diagfuzz.execution import history
from diagfuzz.execution.history import Call
from diagfuzz.execution.parent import DEFAULT_TIMEOUT, ExecutorError, ProcessRunner
from diagfuzz.execution.timeouts import Calibration, KnownFaults

if TYPE_CHECKING:  # torch-heavy: the gate's options read DEFAULT_REPEATS before torch
    from diagfuzz.core.case import Case
    from diagfuzz.core.verdict import Verdict

#: Kinds whose re-runs each take a fresh executor (it dies or is killed with the Case).
RESTARTING_KINDS = ("crash", "hang")
#: The check of a crash whose executor was left unusable, not dead: the health check after
#: the Case gave no answer (stuck) or an error (``diagfuzz.execution.parent``).
STUCK_CHECK = "executor:health"
#: Fresh-executor replays delta debugging may spend shrinking one history (it keeps the
#: shortest failing sequence found when they run out).
SHRINK_REPLAYS = 48
#: Seconds delta debugging may spend shrinking one history (each replay a fresh executor:
#: seconds where the impl's import is slow); then the shortest failing sequence so far is
#: kept, which its reproducer replays all the same.
SHRINK_SECONDS = 30.0
#: Calls of the same Case a fresh executor makes looking for the n-th call that fails,
#: beyond the R re-runs, when the Case passes alone and its history has as many calls.
REPEAT_SEARCH = 256

#: How a deterministic failure depends on what ran before (``Classification.history``).
COLD_FIRST_CALL = "cold first call"
REPEATED_CALL = "repeated call"
AFTER_CALLS = "after earlier calls"
NOT_REPRODUCED = "not reproduced after its history"

#: Re-runs of a Case in one fresh executor (the gate's ``--repeats``).
DEFAULT_REPEATS = 5


@dataclass(frozen=True)
class Classification:
    """How a failure of ``kind`` on ``case`` reproduced over ``runs`` re-runs.

    ``failures`` is k: re-runs that failed the same way (``failure_key``: a hang and a
    crash that left its executor stuck are one failure). ``kinds`` counts every re-run's
    kind (a Case can be flaky between two kinds, e.g. 3 mismatch + 2 pass);
    ``processes``: the fresh executors the re-runs took.
    """

    case: Case
    kind: str
    runs: int
    failures: int
    kinds: dict[str, int]
    example: Verdict | None = None  # one re-run verdict of ``kind`` (its details), if any
    processes: int = 1
    #: How it depends on what ran before: '' (it fails alone, every time),
    #: ``COLD_FIRST_CALL``, ``REPEATED_CALL``, ``AFTER_CALLS`` or ``NOT_REPRODUCED``.
    history: str = ""
    #: The calls a fresh executor makes before the Case, shrunk: the sequence ``runs`` and
    #: ``failures`` were measured on (the Case itself repeated, for a repeated call).
    sequence: tuple[Call, ...] = ()
    #: Calls its executor had made before it (what was replayed and shrunk).
    searched: int = 0
    #: Fresh executors the search for the sequence took (replays while shrinking).
    replays: int = 0
    #: Wall seconds its classification took.
    seconds: float = 0.0

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

    def reproducer_arguments(self) -> dict[str, Any]:
        """What its reproducer replays and says: the sequence measured, the story where it
        tells the script's reader something (a sequence, or a cold first call: the fresh
        process is the point), and a flaky finding's R as the default repetitions."""
        told = bool(self.sequence) or self.history == COLD_FIRST_CALL
        return {"sequence": self.sequence, "story": self.story() if told else "",
                "repeat": 1 if self.deterministic else self.runs}

    def story(self) -> str:
        """In words, what the failure needs ('' where it fails alone): 'passes alone;
        fails after 1 earlier call', 'passes on its first call; fails on its 2nd call in
        one process' ...; for a flaky one, the sequence its ratio was measured on."""
        n = len(self.sequence)
        if not self.deterministic and self.history != NOT_REPRODUCED:
            if not n:
                return ""
            return (f"varies for one sequence: {n} earlier call{'' if n == 1 else 's'}, "
                    "then the Case, in a fresh process")
        if self.history == COLD_FIRST_CALL:
            return ("fails on its first call in a fresh process, passes when called again "
                    "(a cold first call)")
        if self.history == REPEATED_CALL:
            return (f"passes on its first call; fails on its {_nth(n + 1)} call in one "
                    "process")
        if self.history == AFTER_CALLS:
            return (f"passes alone; fails after {n} earlier call{'' if n == 1 else 's'} "
                    f"(shrunk from the {self.searched} its executor made before it)")
        if self.history == NOT_REPRODUCED:
            return (f"passes alone, and after the {self.searched} calls its executor made "
                    "before it")
        return ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (for reports)."""
        return {"kind": self.kind, "label": self.label, "ratio": self.ratio,
                "failures": self.failures, "runs": self.runs, "kinds": dict(self.kinds),
                "processes": self.processes, "history": self.history,
                "story": self.story(), "sequence": history.sequence_dicts(self.sequence),
                "searched": self.searched, "replays": self.replays,
                "seconds": round(self.seconds, 2)}

    @staticmethod
    def from_dict(data: dict[str, Any], case: Case) -> Classification:
        """The inverse of ``to_dict`` for the failure of ``case`` (its example aside)."""
        return Classification(case, str(data["kind"]), int(data["runs"]),
                              int(data["failures"]), dict(data.get("kinds") or {}),
                              processes=int(data.get("processes", 1)),
                              history=str(data.get("history", "")),
                              sequence=tuple(Call.from_dict(call)
                                             for call in data.get("sequence") or ()),
                              searched=int(data.get("searched", 0)),
                              replays=int(data.get("replays", 0)),
                              seconds=float(data.get("seconds", 0.0)))


#: Earlier calls a finding's block lists (the rest are counted).
SEQUENCE_SHOWN = 5


def history_lines(c: Classification | None) -> list[str]:
    """Under a failing Case, what it needs to fail where that is more than the Case alone:
    the story in words, then the calls before it (shrunk), oldest first."""
    if c is None or not c.story():
        return []
    lines = [f"{'history':<8} {c.story()}"]
    if not c.deterministic:
        return lines
    calls = c.sequence
    if calls and all(call == calls[0] for call in calls) and calls[0].case == c.case:
        n = len(calls)
        return [*lines, f"{'after':<8} the same Case, {n} time{'' if n == 1 else 's'}"]
    for i, call in enumerate(calls[:SEQUENCE_SHOWN]):
        same = " (the same Case)" if call.case == c.case else ""
        lines.append(f"{'after' if i == 0 else '':<8} {i + 1}. {call.describe()}{same}")
    if len(calls) > SEQUENCE_SHOWN:
        lines.append(f"{'':<8} ... {len(calls) - SEQUENCE_SHOWN} more (the reproducer "
                     "replays them all)")
    return lines


def _nth(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


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


def _case_id(case: Case) -> str:
    """The corpus' id of a Case (imported when first needed: the corpus needs torch)."""
    from diagfuzz.core.corpus import case_id

    return case_id(case)


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
        self._born = time.monotonic()

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

    def _fresh(self, case: Case, log: Path | None, oracle: str, timeout: float,
               known: KnownFaults | None) -> ProcessRunner | None:
        """A spare if one is left, else a new executor (None once stopped), with ``known``
        as its confirmed faults where given (``_own_faults``), else the run's. A spare's
        log then says which Case it re-runs (its directory cannot name it)."""
        with self._lock:
            if self.stopped:
                return None
            if self._spares:
                runner = self._spares.pop(0)
                runner.oracle, runner.timeout = oracle, timeout
                if known is not None:
                    runner.known = known
                if runner.log is not None:
                    with contextlib.suppress(OSError), runner.log.open("a") as out:
                        out.write(f"[diagfuzz classification: re-runs of Case "
                                  f"{_case_id(case)}: {case.describe()}]\n")
                return runner
            learnt = self.rerun.learnt
            if known is not None:
                learnt = (Calibration() if learnt is None else learnt[0], known)
            runner = ProcessRunner(self.rerun.impl_spec, self.rerun.device, timeout=timeout,
                                   oracle=oracle, workdir=log, strict=self.rerun.strict,
                                   learnt=learnt)
            self._live.add(runner)
            return runner

    def _runs(self, case: Case, count: int, log: Path | None, oracle: str,
              timeout: float, known: KnownFaults | None, *, more: int = 0,
              key: str = "") -> list[Verdict]:
        """``count`` verdicts of ``case`` from one fresh executor (fewer if stopped); then,
        if none fails as ``key`` (``failure_key``), up to ``more`` further calls until one
        does."""
        runner = self._fresh(case, log, oracle, timeout, known)
        if runner is None:
            return []
        verdicts: list[Verdict] = []
        try:
            while len(verdicts) < count or (
                    len(verdicts) < count + more
                    and not any(_key(v) == key for v in verdicts)):
                verdict = runner.run(case)
                if self.stopped:  # killed under it: not the Case's verdict
                    break
                verdicts.append(verdict)
                if verdict.kind in RESTARTING_KINDS and _key(verdict) != key:
                    break  # its executor was replaced: each further call may cost a restart
        except (ExecutorError, OSError, ValueError):
            if not self.stopped:
                raise
        finally:
            self._release(runner)
        return verdicts

    def _each_fresh(self, case: Case, logs: list[Path | None], oracle: str,
                    timeout: float, known: KnownFaults | None) -> list[Verdict]:
        """One verdict of ``case`` from each of ``len(logs)`` fresh executors, side by side
        (a hang or crash ends its executor: each further call would pay a restart)."""
        with ThreadPoolExecutor(max_workers=len(logs)) as pool:
            parts = list(pool.map(lambda path: self._runs(case, 1, path, oracle, timeout, known),
                                  logs))
        return [v for part in parts for v in part]

    def _release(self, runner: ProcessRunner) -> None:
        with self._lock:
            self._live.discard(runner)
        runner.close()

    def _replay(self, calls: Sequence[Call], target: Call, log: Path | None,
                timeout: float, known: KnownFaults | None) -> Verdict | None:
        """The target's verdict after ``calls`` in one fresh executor (None if stopped)."""
        runner = self._fresh(target.case, log, target.oracle, timeout, known)
        if runner is None:
            return None
        try:
            verdict, _ = history.replay(runner, calls, target, lambda: self.stopped)
        except history.Stopped:
            return None
        except (ExecutorError, OSError, ValueError) as exc:
            # The oracle raised on a replayed call (or no executor could start): this
            # sequence says nothing of the failure; the others are still tried.
            if not self.stopped and runner.log is not None:
                with contextlib.suppress(OSError), runner.log.open("a") as out:
                    out.write(f"[diagfuzz classification: replay abandoned: {exc}]\n")
            return None
        finally:
            self._release(runner)
        return None if self.stopped else verdict

    def _replays(self, sequences: Sequence[Sequence[Call]], target: Call,
                 log: Callable[[], Path | None], timeout: float,
                 known: KnownFaults | None) -> list[Verdict | None]:
        """``_replay`` of each sequence, side by side (one fresh executor each)."""
        if not sequences:
            return []
        width = min(len(sequences), spare_limit())
        with ThreadPoolExecutor(max_workers=width) as pool:
            return list(pool.map(lambda calls: self._replay(calls, target, log(), timeout,
                                                             known),
                                 sequences))

    def classify(self, failure: Verdict, *, oracle: str | None = None,
                 timeout: float | None = None) -> Classification | None:
        """Classify one failure by the rule of the module docstring (None: stopped before
        any re-run finished), with the seconds it took."""
        started = time.monotonic()
        if failure.case is not None:
            self._note(failure.case, f"{failure.kind}: classifying")
        found = self._classify(failure, oracle, timeout)
        if found is None:
            return None
        found = dataclasses.replace(found, seconds=time.monotonic() - started)
        self._note(found.case, f"{found.label} {found.ratio} {found.history or 'alone'}, "
                               f"{found.processes} executors, {found.seconds:.1f} s")
        return found

    @staticmethod
    def _own_faults(kind: str) -> KnownFaults | None:
        """The confirmed faults the re-runs of a failure of ``kind`` go by: the run's for a
        hang or crash (each re-run that stalls again is that fault, after the calibrated
        allowance); for any other failure, whose Case answered in the run, the re-runs' own,
        starting empty. Why: a fresh executor's first call loads what the run's warm
        executors had loaded (CUDA's modules, an impl's lazy imports), and past the short
        stall of its op's confirmed hang it would read as that hang, five fresh executors
        then measuring a hang the Case does not have; a stall of theirs is confirmed in a
        fresh executor instead, once for all of the Case's re-runs."""
        return None if kind in RESTARTING_KINDS else KnownFaults()

    def _note(self, case: Case, event: str) -> None:
        """One line of ``<workdir>/classification.log``: what each classification did when,
        so a slow one can be told from the others."""
        if self.rerun.workdir is None:
            return
        line = f"[{time.monotonic() - self._born:8.1f} s] {_case_id(case)} {event}\n"
        with self._lock, contextlib.suppress(OSError):
            self.rerun.workdir.mkdir(parents=True, exist_ok=True)
            with (self.rerun.workdir / "classification.log").open("a") as out:
                out.write(line)

    def _classify(self, failure: Verdict, oracle: str | None,
                  timeout: float | None) -> Classification | None:
        repeats = self.repeats
        case = _validated(failure, repeats)
        oracle = oracle or self.rerun.oracle
        timeout = timeout or self.rerun.timeout
        base = None if self.rerun.workdir is None else self.rerun.workdir / _case_id(case)
        kind, key = failure.kind, _key(failure)
        known = self._own_faults(kind)
        past = history.read(failure.details.get("history"))
        numbers = itertools.count(2)

        def log(i: int | None = None) -> Path | None:
            return None if base is None else base / str(next(numbers) if i is None else i)

        target = Call(oracle, case)
        if kind in RESTARTING_KINDS:
            alone = self._each_fresh(case, [log(i) for i in range(repeats)], oracle, timeout,
                                     known)
            processes = repeats
        else:
            more = min(len(past), REPEAT_SEARCH) if past else 0
            alone = self._runs(case, repeats, log(0), oracle, timeout, known, more=more,
                               key=key)
            processes = 1
        if not alone:
            return None
        first = next((i for i, v in enumerate(alone) if _key(v) == key), None)
        if first is None and not any(v.ok for v in alone):
            return self._fails_otherwise(case, alone, processes, log, oracle, timeout, known)
        if first is None:  # it passes alone: after what did it fail?
            self._note(case, "alone: " + ", ".join(
                f"{k} {n}" for k, n in sorted(Counter(v.kind for v in alone).items())))
            found = (self._after_history(past, target, log, timeout, failure, known)
                     if past else None)
            if found is not None or self.stopped:
                return found  # (stopped in the search: not classified)
            how: dict[str, Any] = ({"history": NOT_REPRODUCED, "searched": len(past)}
                                   if past else {})
            if kind in RESTARTING_KINDS:
                return _measured(case, failure, alone, processes, **how)
            second = self._runs(case, repeats, log(1), oracle, timeout, known)
            return _measured(case, failure, alone[:repeats] + second, processes + 1, **how)
        if len(alone) >= repeats and _all_same(alone[:repeats], key):
            return _measured(case, failure, alone[:repeats], processes)  # fails alone
        if kind in RESTARTING_KINDS:  # some of R fresh executors, each one call: it varies
            return _measured(case, failure, alone, processes)
        # Some of its own re-runs fail: the Case repeated up to its first failure.
        sequence = [target] * first
        verdicts = self._replays([sequence] * (2 * repeats), target, log, timeout, known)
        if first == 0 and not any(v.ok for v in alone):
            # It failed first, then hung or crashed when called again (its executor was
            # replaced, ``_runs``): no call of it passed, so it fails alone.
            return _measured(case, failure, [v for v in verdicts if v is not None],
                             len(verdicts) + processes, searched=len(past))
        return _measured(case, failure, [v for v in verdicts if v is not None],
                         len(verdicts) + processes,
                         history=COLD_FIRST_CALL if first == 0 else REPEATED_CALL,
                         sequence=tuple(sequence), searched=len(past))

    def _fails_otherwise(self, case: Case, alone: list[Verdict], processes: int,
                         log: Callable[[], Path | None], oracle: str, timeout: float,
                         known: KnownFaults | None) -> Classification:
        """A Case that fails on every call alone, but not as the run saw it: measured as it
        fails alone, over R re-runs (a hang's or crash's each in its own fresh executor).
        Why: on a GPU, an error raised after a launch that never ends is the verdict where
        the synchronisation comes later, a hang where it comes first; either way the Case
        fails alone, so nothing before it is needed, and replaying its history (each replay
        stalling on that hang) would only spend the gate's time."""
        other = Counter(_key(v) for v in alone).most_common(1)[0][0]
        seen = next(v for v in alone if _key(v) == other)
        verdicts = list(alone[:self.repeats])
        self._note(case, f"fails alone as {seen.kind}, not as the run saw it")
        missing = self.repeats - len(verdicts)
        if missing > 0:  # its executor was replaced: one fresh executor per re-run
            verdicts += self._each_fresh(case, [log() for _ in range(missing)], oracle,
                                         timeout, known)
            processes += missing
        return _measured(case, seen, verdicts, processes)

    def _after_history(self, past: list[Call], target: Call,
                       log: Callable[[], Path | None], timeout: float,
                       failure: Verdict, known: KnownFaults | None
                       ) -> Classification | None:
        """The failure after its executor's history, shrunk and measured; None where the
        whole history replayed before it does not make it fail (or the gate stopped)."""
        def fails(verdict: Verdict | None) -> bool:
            return (verdict is not None and _key(verdict) == _key(failure)
                    and not verdict.details.get("replay_restarted"))

        replays, start = 0, None
        for part in (*related_parts(past, target), past):
            replays += 1
            failed = fails(self._replay(part, target, log(), timeout, known))
            self._note(target.case, f"after {len(part)} of its {len(past)} earlier calls: "
                                    f"{'fails' if failed else 'passes'}")
            if failed:
                start = part
                break
            if self.stopped:
                return None
        if start is None:
            return None

        shrink_until = time.monotonic() + SHRINK_SECONDS

        def test(candidates: list[list[Call]]) -> list[bool]:
            nonlocal replays
            if self.stopped or time.monotonic() > shrink_until:
                return []  # as a spent budget: the shortest failing sequence so far
            room = max(0, SHRINK_REPLAYS - replays)
            candidates = candidates[:room]
            replays += len(candidates)
            return [fails(v) for v in self._replays(candidates, target, log, timeout, known)]

        shrunk = ddmin(start, test)
        if self.stopped:
            return None
        self._note(target.case, f"shrunk to {len(shrunk)} calls in {replays} replays")
        verdicts = self._replays([shrunk] * (2 * self.repeats), target, log, timeout,
                                 known)
        return _measured(target.case, failure, [v for v in verdicts if v is not None],
                         len(verdicts) + replays, history=AFTER_CALLS,
                         sequence=tuple(shrunk), searched=len(past), replays=replays)

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
            except ExecutorError:
                # The oracle raised re-running it: unclassified (a failure all the same),
                # the other findings classified.
                return None
            finally:
                if done is not None:
                    done(i)

        try:
            with ThreadPoolExecutor(max_workers=parallel,
                                    thread_name_prefix="diagfuzz-classify") as pool:
                return list(pool.map(one, range(len(failures))))
        finally:
            self.close_spares()


def related_parts(past: list[Call], target: Call) -> list[list[Call]]:
    """The parts of a history replayed before the whole of it, shortest first: the call
    just before the target, the earlier calls of the target's op with its sizes, then every
    earlier call of its op (each only where not empty, shorter than the whole and not the
    part before it). Why: a replay costs its length (a suite executor's history is
    thousands of calls) and, for a hang, an executor and an allowance; work a call leaves
    running (a kernel that never ends, found at the next synchronisation) fails the very
    next call, and a polluter is most often a call of the same op (a cache keyed without
    strides is met again at the same sizes). A flag one op leaves for another is still
    found, in the whole history, after them."""
    case = target.case
    same_op = [call for call in past if call.case.op == case.op]
    same_sizes = [call for call in same_op if call.case.sizes == case.sizes]
    parts: list[list[Call]] = []
    for part in (past[-1:], same_sizes, same_op):
        if part and len(part) < len(past) and (not parts or part != parts[-1]):
            parts.append(part)
    return parts


def ddmin(calls: list[Call], test: Callable[[list[list[Call]]], list[bool]]) -> list[Call]:
    """Delta debugging (Zeller's ddmin): a 1-minimal part of ``calls`` that still makes
    the target fail, ``calls`` itself failing. ``test`` judges several candidates at once
    (side by side) and may judge fewer than asked (its budget is spent): the shortest
    failing sequence found so far is kept. Polluters are usually one earlier call, which
    this finds in about twice log2(len(calls)) replays."""
    n = 2
    while len(calls) >= 2:
        chunks = _split(calls, n)
        outcomes = test(chunks)
        hit = next((i for i, failed in enumerate(outcomes) if failed), None)
        if hit is not None:
            calls, n = chunks[hit], 2
            continue
        if len(outcomes) < len(chunks):
            return calls  # budget spent
        if n > 2:  # for two chunks the complements are the chunks
            complements = [[c for j, chunk in enumerate(chunks) if j != i for c in chunk]
                           for i in range(len(chunks))]
            outcomes = test(complements)
            hit = next((i for i, failed in enumerate(outcomes) if failed), None)
            if hit is not None:
                calls, n = complements[hit], max(n - 1, 2)
                continue
            if len(outcomes) < len(complements):
                return calls
        if n >= len(calls):
            return calls
        n = min(2 * n, len(calls))
    return calls


def _split(calls: list[Call], n: int) -> list[list[Call]]:
    size, extra = divmod(len(calls), n)
    chunks, start = [], 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        chunks.append(calls[start:end])
        start = end
    return [c for c in chunks if c]


def failure_key(kind: str, check: str = "") -> str:
    """What classification compares of two verdicts: the kind, except that a hang and a
    crash of ``STUCK_CHECK`` are one failure, "stuck": the Case leaves its executor
    unusable. A Case that leaves a kernel running for good is a hang where the next
    synchronisation falls inside its call, and that crash where it falls in the health
    check after it; which comes first varies from one re-run of the same Case to the next
    (FlagGems with a planted device hang, H200: crash 2, hang 3), and it fails every
    time."""
    if kind == "hang" or (kind == "crash" and check == STUCK_CHECK):
        return "stuck"
    return kind


def _key(verdict: Verdict) -> str:
    return failure_key(verdict.kind, verdict.check)


def _all_same(verdicts: Sequence[Verdict], key: str) -> bool:
    return bool(verdicts) and all(_key(v) == key for v in verdicts)


def _measured(case: Case, failure: Verdict, verdicts: Sequence[Verdict], processes: int,
              **how: Any) -> Classification:
    """A Classification of ``verdicts``, the re-runs of one sequence, against ``failure``
    (its kind, and what counts as the same, ``failure_key``). Only a deterministic
    failure gets a history's name: a flaky one keeps the sequence it was measured on."""
    kind, key = failure.kind, _key(failure)
    kinds = Counter(v.kind for v in verdicts)
    same = [v for v in verdicts if _key(v) == key]
    if (len(same) < len(verdicts) or not verdicts) and how.get("history") != NOT_REPRODUCED:
        how["history"] = ""
    example = next((v for v in same if v.kind == kind), same[0] if same else None)
    return Classification(case, kind, len(verdicts), len(same), dict(sorted(kinds.items())),
                          example, processes, **how)


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
