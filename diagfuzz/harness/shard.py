"""One fuzz shard: explore its whole budget, then shrink one representative per signature.

A shard is one Hypothesis run with a fixed seed over one stream's family strategy. It runs
in two phases, so that one bug never hides another:

1. **Explore.** Every family of the budget is drawn and every member checked. A failing
   Case does not stop the shard: it is counted under its signature (``diagfuzz.core.signature``)
   and the first family of each signature is remembered by its choice sequence. With
   process isolation and pipelining, families are submitted to the executor and the next
   one is drawn while it checks (same seed, same Cases); otherwise each family is checked
   as it is drawn. The run's time cap (``RunPlan.deadline``) ends this phase early.
2. **Shrink.** Each signature's first family is replayed through Hypothesis' example
   database (``diagfuzz.adapters.hypothesis``) by a test that fails only on that signature, so
   Hypothesis shrinks it to the simplest Case of that bug. A family that does not fail
   again is kept unshrunk, marked flaky.

The shard then fails with one finding per signature (``diagfuzz.harness.findings.Finding``).
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from diagfuzz.core.signature import Signature, cause_axes, shrink_key, signature_of
from diagfuzz.harness.claims import claim
from diagfuzz.harness.findings import Finding, merge_findings
from diagfuzz.harness.sharding import SHRINK_SHARE, families_per_shard

if TYPE_CHECKING:
    import pytest

    from diagfuzz.harness.session import ShardSession

#: Signatures a shard shrinks at most; the others are reported with their first Case.
MAX_SHRUNK = 8
#: Shrink candidates (replayed families) one signature's shrinking may try; Hypothesis
#: stops earlier when it converges. The best Case so far is kept.
MAX_SHRINK_STEPS = 120
#: A crash or a hang costs a fresh executor per failing check, so its shrinking also stops
#: after this many seconds; its steps are a mismatch's, so that dtype, layout and specials
#: shrink alike (15 steps left a crash at bool [5, 1], strides [2, 0], storage offset 1012
#: with a special; 60 reach float32 [1, 1] contiguous: tests.faulty.abort, CPU,
#: 2026-12-05, tests/test_crash_shrink.py).
SHRINK_SECONDS_RESTARTING = 60.0
#: Seconds of shrinking a run with a deadline but no cap's end allows after its deadline.
SHRINK_GRACE = 10.0


class TimeUp(BaseException):
    """The run's time cap passed: stop drawing (a BaseException, so Hypothesis neither
    catches nor shrinks it)."""


class Stopped(TimeUp):
    """The run was stopped (``RunPlan.stop_file``): stop drawing and shrinking; the
    controller reports the first failing Case of each signature from the progress files."""


class ShrinkBudget(BaseException):
    """A signature's shrinking tried MAX_SHRINK_STEPS candidates: keep the best so far."""


class HarnessStop(BaseException):
    """The runner raised: this shard cannot go on (the finding is already recorded)."""


@dataclass
class Seen:
    """Phase 1's record of one signature: its first failure, how to replay it, counts."""

    verdict: Any
    choices: bytes | None
    count: int = 0
    dtypes: Counter[str] = field(default_factory=Counter)
    classes: dict[str, Counter[str]] = field(default_factory=dict)


class Explorer:
    """Phase 1's bookkeeping: tally every verdict, remember each signature's first family
    (per symptom for a wrong result: ``shrink_key``, so each symptom gets its own shrunk
    Case in the finding)."""

    def __init__(self, shard: Shard) -> None:
        self.shard = shard
        self.seen: dict[Signature, Seen] = {}

    def record(self, case: Any, verdict: Any, choices: bytes | None) -> None:
        """Count one checked Case; a failure goes under its signature."""
        self.shard.tally.add(case, failed=not verdict.ok, unsupported=verdict.unsupported,
                             no_out=verdict.details.get("skipped") == "out")
        if verdict.ok:
            self.shard.session.progress.add(verdict)
            return
        signature = signature_of(verdict)
        axes = cause_axes(case.to_dict(), verdict.details)
        self.shard.session.progress.add(verdict, self.shard.item.nodeid, signature, axes)
        key = shrink_key(verdict)
        seen = self.seen.get(key)
        if seen is None:
            seen = self.seen[key] = Seen(verdict, choices)
        elif seen.choices is None and choices is not None:  # a covering Case's: shrinkable
            seen.verdict, seen.choices = verdict, choices
        seen.count += 1
        seen.dtypes[case.dtype] += 1
        for axis, value in axes.items():
            seen.classes.setdefault(axis, Counter())[value] += 1


class Shard:
    """One collected shard item: explore, shrink, report (see the module docstring)."""

    def __init__(self, session: ShardSession, item: pytest.Item, stream: str,
                 index: int) -> None:
        self.session = session
        self.item = item
        self.stream = stream
        self.index = index
        self.seed = session.plan.shard_seed(stream, index)
        self.findings: list[Finding] = []
        self.cut = False
        self.shrink_checks = 0
        from diagfuzz.harness.report import Tally

        self.tally = Tally()
        self._last: dict[Signature, Any] = {}
        self._shrink_deadline: float | None = None

    # --- the test's entry point --------------------------------------------------------
    def fuzz(self, family_factory: Callable[..., Any]) -> None:
        """Draw Case families from ``family_factory(**plan.strategy_args(stream))``, check
        every member, then shrink one representative per failure signature; fail with
        every finding (see the module docstring)."""
        import pytest
        from hypothesis import given, seed, settings

        from diagfuzz.adapters import hypothesis as pipeline
        from diagfuzz.harness import profiles
        from diagfuzz.strategies import mean_members

        plan = self.session.plan
        if self.stream in plan.skipped:
            pytest.skip(plan.skipped[self.stream])
        if plan.stop_requested():
            pytest.skip("the run was stopped before this shard began")
        strategy = family_factory(**plan.strategy_args(self.stream))
        shard_settings = profiles.shard_settings(
            plan.profile,
            max_examples=families_per_shard(plan.cases_per_shard, mean_members(plan.max_members)),
            database=self.session.campaign.database)  # local, or shared behind it

        def run(test: Callable[..., None], how: settings) -> None:
            how(seed(self.seed)(given(strategy)(test)))()

        explorer = Explorer(self)
        replayable = not pipeline.unavailable()
        refusal = self.session.pipeline_refusal(shard_settings)
        try:
            self._judge_covering(explorer)
            # With a shared database: failures found elsewhere first (diagfuzz.campaign).
            self.session.campaign.replay_known(self, run, shard_settings, explorer)
            if refusal:
                self._explore_synchronously(run, shard_settings, explorer, replayable)
            else:
                self._explore_pipelined(run, shard_settings, explorer)
        except Stopped:
            replayable = False  # a stopped run ends now: nothing is shrunk
        except TimeUp:
            self.cut = True
        except HarnessStop:
            pass  # its finding is recorded; what was seen before still gets shrunk
        self._shrink_all(run, shard_settings, explorer, replayable)
        if self.findings:
            raise AssertionError(self.summary())

    def covering_share(self) -> list[Any]:
        """This shard's share of its op's covering Cases (every shard-th one, from its
        index), within the run's dtype narrowing; none without --diagfuzz-covering or for
        the invalid stream."""
        from diagfuzz.core.streams import STREAM_OPS

        plan = self.session.plan
        op = STREAM_OPS.get(self.stream)
        if not plan.covering or op is None:
            return []
        from diagfuzz.strategies.covering import covering_set

        dtypes = None if plan.dtypes is None else plan.dtypes.get(op, ())
        cases = [c for c in covering_set(op).cases if dtypes is None or c.dtype in dtypes]
        return cases[self.index::plan.shards]

    def _judge_covering(self, explorer: Explorer) -> None:
        """Judge this shard's covering Cases before any draw (a failure among them is
        shrunk where a drawn Case meets the same cause; else reported as it is)."""
        for case in self.covering_share():
            self._time_check()
            explorer.record(case, self.session.run_one(self, case), None)

    def judge(self, cases: list[Any], run: Callable[[Any], Any]) -> None:
        """Judge a fixed list of Cases with ``run`` (Case -> Verdict): nothing drawn,
        nothing shrunk (the huge tier's Cases are made, not drawn). Fails with one finding
        per signature, as ``fuzz`` does."""
        explorer = Explorer(self)
        for case in cases:
            self._time_check()
            explorer.record(case, run(case), None)
        self._shrink_all(lambda *a: None, None, explorer, replayable=False)
        if self.findings:
            raise AssertionError(self.summary())

    def judged(self, pairs: list[tuple[Any, Any]], keep: list[Any] | None = None) -> None:
        """Verdicts judged elsewhere (the sequence search's, ``diagfuzz.harness.
        sequences``), counted as this shard's Cases; a cause is represented by its verdict
        in ``keep`` where there is one (the shortest failing sequence's). Fails with one
        finding per signature, as ``fuzz`` does."""
        explorer = Explorer(self)
        for case, verdict in pairs:
            explorer.record(case, verdict, None)
        for verdict in keep or []:
            seen = explorer.seen.get(shrink_key(verdict))
            if seen is not None:
                seen.verdict = verdict
        self._shrink_all(lambda *a: None, None, explorer, replayable=False)
        if self.findings:
            raise AssertionError(self.summary())

    def summary(self) -> str:
        """The shard's failure message: one line per finding."""
        lines = [f"{len(self.findings)} finding(s) in {self.tally.total} Cases:"]
        lines += [f"  {f.signature.describe()} ({f.count} failing)" for f in self.findings]
        return "\n".join(lines)

    # --- phase 1 ------------------------------------------------------------------------
    def _time_check(self) -> None:
        plan = self.session.plan
        if plan.deadline is not None and time.time() >= plan.deadline:
            raise TimeUp
        if plan.stop_requested():
            raise Stopped

    def _explore_synchronously(self, run: Callable[..., None], shard_settings: Any,
                               explorer: Explorer, replayable: bool) -> None:
        from hypothesis import settings

        from diagfuzz.adapters import hypothesis as pipeline

        def explore(family: tuple[Any, ...]) -> None:
            self._time_check()
            choices = pipeline.current_choices() if replayable else None
            for case in family:
                explorer.record(case, self.session.run_one(self, case), choices)

        run(explore, settings(shard_settings, database=None))

    def _explore_pipelined(self, run: Callable[..., None], shard_settings: Any,
                           explorer: Explorer) -> None:
        from hypothesis import settings

        phase = PipelinedPhase(self, explorer)
        try:
            run(phase.submit_family, settings(shard_settings, database=None))
        finally:
            phase.finish()

    # --- phase 2 ------------------------------------------------------------------------
    def _shrink_all(self, run: Callable[..., None], shard_settings: Any, explorer: Explorer,
                    replayable: bool) -> None:
        plan = self.session.plan
        if plan.stop_at is not None:
            # Shrinking ends at SHRINK_SHARE of the cap, before the controller's hard stop.
            started = plan.stop_at - (plan.max_seconds or 0.0)
            self._shrink_deadline = started + SHRINK_SHARE * (plan.max_seconds or 0.0)
        elif plan.deadline is not None:
            self._shrink_deadline = max(plan.deadline, time.time()) + SHRINK_GRACE
        findings = []
        for n, (signature, seen) in enumerate(explorer.seen.items()):
            finding = None
            if (replayable and seen.choices is not None and n < MAX_SHRUNK
                    and not self.session.plan.stop_requested()
                    and not self._known_hang(signature, seen)
                    and claim(self.session.plan, signature)):
                finding = self._shrink(run, shard_settings, signature, seen)
            if finding is None:
                finding = Finding.of(seen.verdict, self.item.nodeid)
            finding.count, finding.dtypes = seen.count, dict(seen.dtypes)
            finding.classes = {axis: dict(c) for axis, c in seen.classes.items()}
            findings.append(finding)
        self.findings += merge_findings(findings)  # a finding's symptoms: one finding

    def _known_hang(self, signature: Signature, seen: Seen) -> bool:
        """Whether ``signature`` is a hang of an op whose hang the run has confirmed: its
        shrinking would find only that hang's later stalls (each a killed executor and a
        fresh one on a GPU), which never represent it (``Finding.preference``), so the
        Case phase 1 saw is kept, the confirmed one where it is that."""
        case = seen.verdict.case
        if signature.kind != "hang" or case is None:
            return False
        from diagfuzz.execution.timeouts import learnt_of_run

        # worker.learnt's file (that module imports this one: it cannot be asked here)
        known = learnt_of_run(Path(self.session.plan.run_dir) / "known-faults")[1]
        return bool(known.has(case.op, "hang"))

    def _shrink(self, run: Callable[..., None], shard_settings: Any, signature: Signature,
                seen: Seen) -> Finding | None:
        """Replay ``seen``'s family and let Hypothesis shrink it on ``signature`` alone."""
        from hypothesis import Verbosity, settings
        from hypothesis.database import InMemoryExampleDatabase

        from diagfuzz.adapters import hypothesis as pipeline

        steps = [0]
        chosen: list[bytes] = []  # the representative's family (a shared database's entry)
        budget = MAX_SHRINK_STEPS
        restarting = signature.kind in ("crash", "hang")
        until = time.monotonic() + SHRINK_SECONDS_RESTARTING
        # Shrink candidates keep many members as they were: each Case is checked once.
        known: dict[str, Any] = {}

        def replay(family: tuple[Any, ...]) -> None:
            if self._shrink_deadline is not None and time.time() >= self._shrink_deadline:
                raise TimeUp
            if self.session.plan.stop_requested():
                raise Stopped
            spent = steps[0] >= budget or (restarting and time.monotonic() >= until)
            if spent and signature in self._last:
                raise ShrinkBudget
            steps[0] += 1
            for case in family:
                verdict = known.get(case.to_json())
                if verdict is None:
                    verdict = known[case.to_json()] = self.session.run_one(self, case)
                    self.shrink_checks += 1
                if not verdict.ok and shrink_key(verdict) == signature:
                    self._last[signature] = verdict
                    chosen[:] = [pipeline.current_choices()]
                    raise AssertionError(signature.describe())

        # Each signature replays and saves under a key of its own.
        replay._hypothesis_internal_add_digest = (  # type: ignore[attr-defined]
            f"{self.stream}:{self.index}:{signature.describe()}".encode())
        database = shard_settings.database or InMemoryExampleDatabase()
        assert seen.choices is not None
        pipeline.save_for_replay(database, replay, seen.choices)
        self._last.pop(signature, None)
        how = settings(shard_settings, database=database, verbosity=Verbosity.quiet,
                       print_blob=False, phases=pipeline.replay_phases(shard_settings.phases))
        # The failure Hypothesis ends with (its shrunk example) is recorded in self._last.
        with contextlib.suppress(Exception, TimeUp, ShrinkBudget):
            run(replay, how)
        last = self._last.pop(signature, None)
        if last is None and self.session.plan.stop_requested():
            return None  # stopped before it failed again: unshrunk, not flaky
        if last is None:  # the replay passed: flaky; keep the Case phase 1 saw fail
            finding = Finding.of(seen.verdict, self.item.nodeid)
            finding.flaky = True
            return finding
        finding = Finding.of(last, self.item.nodeid)
        finding.shrunk = True
        self.session.campaign.remember(self.stream, shard_settings.database, chosen)
        return finding


class PipelinedPhase:
    """Phase 1 with pipelining: each example submits its family and returns.

    Verdicts are collected at the start of each example and at the end, and recorded
    against the family they came from (its choice sequence replays it in phase 2).
    """

    def __init__(self, shard: Shard, explorer: Explorer) -> None:
        self.shard = shard
        self.explorer = explorer
        self.runner = shard.session.runner
        self._choices: list[bytes] = []  # per submitted family
        self._in_flight: dict[int, tuple[Any, int]] = {}  # ticket -> (Case, family)

    def submit_family(self, family: tuple[Any, ...]) -> None:
        """The phase's ``@given`` test function."""
        from diagfuzz.adapters import hypothesis as pipeline

        self._collect(self.runner.poll)
        self.shard._time_check()
        index = len(self._choices)
        self._choices.append(pipeline.current_choices())
        for case in family:
            try:
                ticket = self.runner.submit(case)  # journaled first
            except Exception as exc:
                # Submitting may raise for an earlier Case (its oracle raised; the error's
                # tickets name it): that Case is the failure, not the one being submitted.
                lost = self._lost(exc)
                self._harness_error(exc, lost[0][0] if lost else case)
            else:
                self._in_flight[ticket] = (case, index)

    def finish(self) -> None:
        """Wait for every Case still in flight and record it."""
        while self._in_flight:
            before = len(self._in_flight)
            try:
                self._collect(self.runner.drain)
            except HarnessStop:
                return
            if len(self._in_flight) == before:  # the runner holds none of them any more
                self._in_flight.clear()

    def _collect(self, collect: Callable[[], list[tuple[int, Any]]]) -> None:
        try:
            done = collect()
        except Exception as exc:
            # Verdicts settled before the runner gave up come first: a crash whose
            # replacement executor could not start is that Case's failure, not the next's.
            self._record(self._settled_before_error())
            lost = self._lost(exc)
            self._harness_error(exc, lost[0][0] if lost else None)
        else:
            self._record(done)

    def _lost(self, exc: BaseException) -> list[tuple[Any, int]]:
        """This shard's Cases the runner gave up on (the error's ``tickets``), out of flight."""
        return [self._in_flight.pop(t) for t in getattr(exc, "tickets", ())
                if t in self._in_flight]

    def _settled_before_error(self) -> list[tuple[int, Any]]:
        """What the runner holds settled after raising (nothing left in flight to run)."""
        try:
            return self.runner.poll()
        except Exception:
            return []

    def _record(self, done: list[tuple[int, Any]]) -> None:
        for ticket, verdict in done:
            case, index = self._in_flight.pop(ticket)
            self.explorer.record(case, verdict, self._choices[index])

    def _harness_error(self, exc: Exception, case: Any) -> None:
        """The runner raised (on ``case``, the first Case it gave up on): stop the shard,
        once its other Cases in flight are settled."""
        self.shard.session.harness_error(self.shard, case, exc)
        self._settle_rest()
        raise HarnessStop from exc

    def _settle_rest(self) -> None:
        """Wait for this shard's Cases still in flight and record them (a further error
        is a harness finding of its Case too): the session's runner serves the worker's
        next shard, which must meet none of this shard's verdicts."""
        for _ in range(len(self._in_flight) + 1):  # each round settles or loses one at least
            before = len(self._in_flight)
            if not before:
                return
            try:
                done = self.runner.drain()
            except Exception as exc:
                done = self._settled_before_error()
                lost = self._lost(exc)
                for case, _ in lost:
                    self.shard.session.harness_error(self.shard, case, exc)
            self._record(done)
            if len(self._in_flight) == before:  # the runner holds none of them any more
                break
        self._in_flight.clear()
