"""Call sequences drawn to reach bugs that depend on what ran before (the gate's sequence
search, the fuzz suite's ``test_sequences``).

Which earlier calls a Case meets in its executor is otherwise an accident of scheduling. A
bug behind state a library keeps (a cache keyed without strides, a memoised buffer, a
workspace, a flag one op leaves for another, an autotuner that switches after N calls, a
cache keyed on addresses) needs particular earlier calls, so this draws the sequences
themselves, with Hypothesis' stateful testing: a ``RuleBasedStateMachine`` whose rules are
the patterns such bugs hide behind, each example a fresh executor of its own (on a GPU, 8
examples in a row share one: ``GPU_REUSE``), so a failure's past is its sequence.

- ``call``: a new Case of any op judged (kept for the rules below);
- ``again``: a Case judged a second time (a non-idempotent outcome);
- ``restrided``: a Case's sizes with another layout: other strides or another storage
  offset, never the same addressing (a cache keyed on sizes alone);
- ``new_values``: a Case's sizes and layout with other values, three times in a row: its
  tensors are freed and the new ones take their addresses (a cache keyed on addresses,
  through the GPU's caching allocator too);
- ``invalid_call``: an invalid call (it must raise as aten does), then the valid call it
  broke, then whatever comes next (state an error path leaves half-updated: the refused
  call's arguments are the next call's but one);
- ``many``: one key called up to 64 times (a switch at the n-th call).

A failing call stops its example, and Hypothesis shrinks the sequence (each attempt in a
fresh executor); the smallest failing sequence per cause is kept, with its history, for
classification (the gate) or the reproducer (the suite). Within a number of sequences and a
time budget, derandomized.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from diagfuzz.core.case import Case, Layout, contiguous_strides
from diagfuzz.core.signature import signature_of
from diagfuzz.core.verdict import Verdict
from diagfuzz.execution.parent import ExecutorError, ProcessRunner

if TYPE_CHECKING:
    from diagfuzz.harness.shard import Shard

#: Sequences drawn at most, and calls a sequence makes at most (its rules' steps; ``many``
#: makes several calls in one step).
EXAMPLES = 200
STEPS = 16
#: Seconds the gate's stage draws and shrinks sequences, at most (past it, calls are
#: skipped), on a machine of ``FULL_CPUS`` CPUs or more (``gate_seconds``). It runs beside
#: the other stages, on executors of its own.
SECONDS = 15.0
#: CPUs from which the gate's search gets all of SECONDS; on fewer, a share: beside the
#: suite's workers it takes CPU time from them (a 2-CPU gate of diagfuzz's kernels took
#: 60 s without it, 67 to 74 s with 15 s of it, 2026-12-06).
FULL_CPUS = 8


def gate_seconds(cpus: int | None = None) -> float:
    """The gate's search budget on this machine: SECONDS x cpus / FULL_CPUS, 3 s at least."""
    cpus = cpus or os.cpu_count() or 1
    return max(3.0, SECONDS * min(1.0, cpus / FULL_CPUS))
#: The same for the fuzz suite's ``test_sequences`` (one item beside the shards).
SUITE_SECONDS = 30.0
#: Elements of a drawn Case's tensors, at most: small Cases, many calls.
MAX_ELEMENTS = 4096
#: Calls of one key the ``many`` rule makes at most.
MANY = 64
#: Calls, each with new values, the ``new_values`` rule makes in a row.
REALLOCATIONS = 3


#: Fresh executors kept starting ahead of the sequences that will take them, where each
#: serves one sequence (a CPU): an executor's start takes longer than a sequence's calls.
AHEAD = 4
#: The same on a GPU, where each serves ``GPU_REUSE``: one starts while eight sequences run,
#: and more would import the impl beside the suite's executors for nothing (FlagGems' gate
#: took 13 % longer with a search starting five at once, H100, 2026-12-07).
GPU_AHEAD = 1
#: Sequences one executor serves on a GPU, where a start costs seconds (FlagGems' import
#: about ten): 15 s of fresh executors reached 58 calls there. A failure's history then
#: spans the sequences before it in its executor, and classification shrinks it.
GPU_REUSE = 8


class Fresh:
    """Fresh executors, ``ahead`` of them launched (starting) at any time, each taken by
    ``reuse`` sequences in a row; none warms up (its start is all it pays)."""

    def __init__(self, make: Callable[[dict[str, str]], ProcessRunner],
                 ahead: int = AHEAD, reuse: int = 1) -> None:
        self._make = make
        self._ahead = max(1, ahead)
        self._reuse = max(1, reuse)
        self._waiting: list[ProcessRunner] = []
        self._current: tuple[ProcessRunner, int] | None = None
        self.made = 0

    def _launch(self) -> None:
        from diagfuzz.execution.messages import WARM_UP_ENV

        runner = self._make({WARM_UP_ENV: "0"})
        self.made += 1
        with contextlib.suppress(Exception):  # one that cannot start says so when taken
            runner.launch()
        self._waiting.append(runner)

    def take(self) -> ProcessRunner:
        """The executor for the next sequence: the current one while it has served fewer
        than ``reuse``, else the oldest launched (launching the next ones first)."""
        if self._current is not None:
            runner, served = self._current
            if served < self._reuse and runner.pid is not None:
                self._current = (runner, served + 1)
                return runner
            runner.close()
        while len(self._waiting) < self._ahead + 1:
            self._launch()
        runner = self._waiting.pop(0)
        self._current = (runner, 1)
        return runner

    def done(self, runner: ProcessRunner) -> None:
        """A sequence ended: close its executor unless the next sequence takes it."""
        if self._current is None or self._current[0] is not runner or self._reuse == 1:
            runner.close()

    def close(self) -> None:
        """Close the executors no sequence took, and the current one."""
        waiting, self._waiting = self._waiting, []
        if self._current is not None:
            waiting.append(self._current[0])
            self._current = None
        for runner in waiting:
            runner.close()


class OutOfTime(BaseException):
    """The search's time is spent: end the run now (a BaseException, so Hypothesis neither
    catches nor shrinks it, and draws no more sequences that would call nothing)."""


class Failed(AssertionError):
    """A call in the sequence failed (Hypothesis shrinks the sequence that raised it)."""


class Search:
    """What the machine's examples share: how to make a fresh executor, the deadline, and
    every verdict's record (the calls judged, the failures per cause)."""

    def __init__(self, fresh: Fresh, seconds: float = SECONDS,
                 stop: Callable[[], bool] = lambda: False) -> None:
        self.fresh = fresh
        self.deadline = time.monotonic() + seconds
        self.stop = stop  #: the gate stopped, or out of its own time
        self.judged: list[Verdict] = []
        #: Per cause, the failing verdict with the fewest calls before it.
        self.failures: dict[Any, Verdict] = {}
        self.examples = 0
        #: An executor that could not start or judge: the stage's error, not a finding.
        self.error: ExecutorError | None = None

    def out_of_time(self) -> bool:
        return time.monotonic() >= self.deadline or self.stop()

    def record(self, verdict: Verdict) -> None:
        self.judged.append(verdict)
        if verdict.ok:
            return
        key = signature_of(verdict)
        held = self.failures.get(key)
        if held is None or _before(verdict) < _before(held):
            self.failures[key] = verdict


def _before(verdict: Verdict) -> int:
    history = verdict.details.get("history")
    return int(history.get("calls", 0)) if isinstance(history, dict) else 0


def machine(search: Search, ops: Sequence[str],
            dtypes: dict[str, tuple[str, ...] | None]) -> type[Any]:
    """The state machine drawing sequences of the Cases of ``ops`` (``dtypes``: each op's
    declared dtypes, None for all)."""
    from hypothesis import strategies as st
    from hypothesis.stateful import Bundle, RuleBasedStateMachine, multiple, rule

    from diagfuzz import strategies

    valid = st.one_of([strategies.cases(op, dtypes=dtypes.get(op), max_elements=MAX_ELEMENTS)
                       for op in ops])
    refused = strategies.broken_pairs(list(ops), max_elements=MAX_ELEMENTS)

    class Sequences(RuleBasedStateMachine):
        calls = Bundle("calls")

        def __init__(self) -> None:
            super().__init__()
            self.runner: ProcessRunner | None = None

        def judge(self, case: Case) -> None:
            if search.out_of_time():
                raise OutOfTime
            try:
                if self.runner is None:
                    self.runner = search.fresh.take()
                    search.examples += 1  # a sequence that made a call
                # Alone, not as a batch of one: the oracle's own allocations, as a user's
                # calls make them (a freed input's address is what the next one gets).
                ticket = self.runner.submit(case, single=True)
                verdict = dict(self.runner.wait(0))[ticket]
            except ExecutorError as exc:
                search.error = exc
                raise
            search.record(verdict)
            if not verdict.ok:
                raise Failed(f"{verdict.kind} [{verdict.check}] in {case.describe()}")

        @rule(target=calls, case=valid)
        def call(self, case: Case) -> Case:
            self.judge(case)
            return case

        @rule(case=calls)
        def again(self, case: Case) -> None:
            self.judge(case)

        @rule(case=calls, data=st.data())
        def restrided(self, case: Case, data: st.DataObject) -> None:
            self.judge(replace(case, layout=other_layout(case.layout, data)))

        @rule(case=calls, seed=st.integers(0, 2**31 - 1))
        def new_values(self, case: Case, seed: int) -> None:
            # Three in a row: whether a freed block is handed to the next request of its
            # size is the allocator's choice (glibc's often is not the very next one).
            for i in range(REALLOCATIONS):
                self.judge(replace(case, values=replace(case.values, seed=seed + i)))

        @rule(target=calls, pair=refused)
        def invalid_call(self, pair: tuple[Case, Case | None]) -> Any:
            broken, case = pair
            self.judge(broken)
            if case is None:
                return multiple()
            self.judge(case)  # the refused call's arguments, the broken one mended
            return case

        @rule(case=calls, n=st.integers(2, MANY))
        def many(self, case: Case, n: int) -> None:
            for i in range(n):
                self.judge(replace(case, values=replace(case.values,
                                                        seed=case.values.seed + i + 1)))

        def teardown(self) -> None:
            if self.runner is not None:
                search.fresh.done(self.runner)

    return Sequences


def other_layout(layout: Layout, data: Any) -> Layout:
    """A layout of ``layout``'s shape that addresses its elements differently (other
    strides or another storage offset), drawn with ``data``: the contiguous one for a
    strided layout half the time, else a drawn one, else ``layout`` one element on."""
    from hypothesis import strategies as st

    from diagfuzz import strategies

    shape = layout.shape
    plain = Layout.contiguous(shape)
    if _addressing(layout) != _addressing(plain) and data.draw(st.booleans(),
                                                                label="contiguous"):
        return plain
    room = max(MAX_ELEMENTS, 4 * max(1, layout.storage_size))
    kinds = [k for k in strategies.LAYOUT_KINDS if k != "contiguous"]
    drawn = data.draw(strategies.layouts(shape, kinds=kinds, max_elements=room),
                      label="layout")
    if _addressing(drawn) != _addressing(layout):
        return drawn
    return replace(layout, storage_offset=layout.storage_offset + 1,
                   kinds=tuple(dict.fromkeys((*layout.kinds, "offset"))))


def _addressing(layout: Layout) -> tuple[tuple[int, ...], int]:
    """Where a layout's elements live (its strides, its storage offset)."""
    return layout.strides, layout.storage_offset


#: Seeds of the sweep's new values (far from the warm-up Cases' 1 and 2).
_SWEEP_SEEDS = 1000


def sweep_calls(ops: Sequence[str], dtypes: dict[str, tuple[str, ...] | None]
                ) -> Iterator[tuple[str, Case, bool]]:
    """The pattern sweep's calls, (op, Case, essential), breadth first: every op's first
    warm-up Case (a 3 x 4 matrix or a diagonal of 3, offset 1; float32 or the first dtype
    the impl declares) cold, then
    the same call again, then a call refused at another offset and that offset's valid
    call, then with new values three times (the freed inputs' addresses), then the same
    sizes strided (every other element, one element on) and plain again, then new values
    ``MANY`` times (a switch at the n-th call). All but the last round are essential: about
    9 calls an op. One executor makes them all, so each op also meets every other op's
    state."""
    from diagfuzz.core.geometry import diagonal_of
    from diagfuzz.specs import spec_of

    chosen: dict[str, tuple[Case, Case]] = {}
    for op in ops:
        allowed = dtypes.get(op)
        warm = spec_of(op).warm_up_cases()
        names = [c.dtype for c in warm]
        dtype = next((d for d in ("float32", *(allowed or names))
                      if d in names and (allowed is None or d in allowed)), None)
        plain = next((c for c in warm if c.dtype == dtype), None)
        if plain is not None:
            shape = plain.layout.shape
            every_other = Layout(shape, tuple(2 * s for s in contiguous_strides(shape)), 1,
                                 ("sliced", "offset"))
            chosen[op] = (plain, replace(plain, layout=every_other))

    def seeded(case: Case, seed: int) -> Case:
        return replace(case, values=replace(case.values, seed=seed))

    def refused_then_valid(plain: Case, strided: Case) -> list[Case]:
        """At another offset whose diagonal is as long (so every operand keeps its shape),
        a call refused for its equal dims, then the valid one: what the refused call left
        is met at once."""
        if "same_dims" not in spec_of(plain.op).invalid:
            return []
        for offset in (0, -plain.offset):
            try:
                same = (diagonal_of(plain.sizes, offset, plain.dim1, plain.dim2).length
                        == diagonal_of(plain.sizes, plain.offset, plain.dim1,
                                       plain.dim2).length)
            except (IndexError, RuntimeError):
                return []
            if same and offset != plain.offset:
                other = replace(plain, offset=offset)
                return [replace(other, invalid="same_dims", dim1=0, dim2=0), other]
        return []

    rounds: list[Callable[[Case, Case], list[Case]]] = [
        lambda plain, strided: [plain],
        lambda plain, strided: [plain],
        refused_then_valid,
        lambda plain, strided: [seeded(plain, _SWEEP_SEEDS + i) for i in range(REALLOCATIONS)],
        lambda plain, strided: [strided, plain],
        lambda plain, strided: [seeded(plain, 2 * _SWEEP_SEEDS + i) for i in range(MANY)],
    ]
    for n, make in enumerate(rounds):
        for op, (plain, strided) in chosen.items():
            for case in make(plain, strided):
                yield op, case, n < len(rounds) - 1


def sweep(search: Search, ops: Sequence[str],
          dtypes: dict[str, tuple[str, ...] | None]) -> None:
    """The pattern sweep (``sweep_calls``) in one fresh executor: each pattern once on each
    op, before any drawn sequence. Its essential calls are made unless the gate stops (a
    few seconds even under Triton's interpreter, where a 2-CPU machine's share of the
    search's time would end them); the n-th-call round within the search's time. Its
    failures are recorded as the drawn sequences' are (their past is the executor's, shrunk
    by classification); an op that failed makes no more calls, and a crash or a hang takes
    a fresh executor."""
    failed: set[str] = set()
    runner: ProcessRunner | None = None
    try:
        for op, case, essential in sweep_calls(ops, dtypes):
            if op in failed:
                continue
            if search.stop() if essential else search.out_of_time():
                return
            if runner is None:
                runner = search.fresh.take()
                search.examples += 1
            try:
                ticket = runner.submit(case, single=True)
                verdict = dict(runner.wait(0))[ticket]
            except ExecutorError as exc:
                search.error = exc
                raise
            search.record(verdict)
            if not verdict.ok:
                failed.add(op)
                if verdict.kind in ("crash", "hang"):
                    search.fresh.done(runner)
                    runner = None
    finally:
        if runner is not None:
            search.fresh.done(runner)


def search_sequences(search: Search, ops: Sequence[str],
                     dtypes: dict[str, tuple[str, ...] | None],
                     examples: int = EXAMPLES, steps: int = STEPS) -> None:
    """The pattern sweep, then up to ``examples`` sequences of up to ``steps`` steps each
    drawn (and shrunk), derandomized: a run draws the sequences the last one drew."""
    sweep(search, ops, dtypes)
    if search.error is not None:
        raise search.error
    from hypothesis import HealthCheck, Verbosity, settings
    from hypothesis.stateful import run_state_machine_as_test

    chosen = settings(max_examples=examples, stateful_step_count=steps, deadline=None,
                      derandomize=True, database=None, print_blob=False,
                      verbosity=Verbosity.quiet,
                      suppress_health_check=list(HealthCheck))
    # A failure ends the search (its sequence shrunk, recorded); Hypothesis' own report
    # of it, or of a shrink cut by the deadline, is not the stage's.
    with contextlib.suppress(Exception, OutOfTime):
        run_state_machine_as_test(machine(search, ops, dtypes), settings=chosen)
    if search.error is not None:
        raise search.error




def fresh_for(make: Callable[[dict[str, str]], ProcessRunner], device: str) -> Fresh:
    """Fresh executors for sequences on ``device``: on a GPU ``GPU_REUSE`` sequences each,
    ``GPU_AHEAD`` starting ahead; elsewhere one each, ``AHEAD`` ahead."""
    if str(device).startswith("cuda"):
        return Fresh(make, ahead=GPU_AHEAD, reuse=GPU_REUSE)
    return Fresh(make, ahead=AHEAD, reuse=1)


def run_in_suite(shard: Shard) -> None:
    """The fuzz suite's ``test_sequences``: the run's sequences (``RunPlan.sequences``) over
    its ops and dtypes, each on fresh executors; every call is counted in the report as a
    shard's Cases are, and the shard fails with one finding per cause (its Case's history,
    the sequence, goes into its reproducer)."""
    from diagfuzz.harness import planning
    from diagfuzz.harness.worker import learnt

    plan = shard.session.plan
    device = plan.device or planning.device()
    made = itertools.count()

    def make(environ: dict[str, str]) -> ProcessRunner:
        return ProcessRunner(plan.impl, device, plan.timeout, strict=plan.strict,
                             learnt=learnt(plan), environ=environ,
                             workdir=Path(plan.run_dir) / "sequences" / str(next(made) % 8))

    fresh = fresh_for(make, device)
    left = None if plan.deadline is None else plan.deadline - time.time()

    def stopped() -> bool:
        """The run's cap reached, or the controller asked the workers to stop: the sweep's
        essential calls end too."""
        return (plan.deadline is not None and time.time() >= plan.deadline) \
            or plan.stop_requested()

    search = Search(fresh, seconds=SUITE_SECONDS if left is None else min(SUITE_SECONDS, left),
                    stop=stopped)
    dtypes = plan.dtypes or {}
    try:
        search_sequences(search, list(plan.ops),
                         {op: _tuple(dtypes.get(op)) for op in plan.ops},
                         examples=plan.sequences)
    finally:
        fresh.close()
    shard.judged([(v.case, v) for v in search.judged if v.case is not None],
                  keep=list(search.failures.values()))


def _tuple(dtypes: Any) -> tuple[str, ...] | None:
    return None if dtypes is None else tuple(dtypes)
