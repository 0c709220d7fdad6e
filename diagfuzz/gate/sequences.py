"""The gate's sequence search stage: call sequences drawn for bugs that depend on what ran
before (``diagfuzz.harness.sequences``), on fresh executors of its own beside the other
stages; its findings are classified like any other (their history is their sequence).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable

from diagfuzz.execution.fanout import FanoutRunner
from diagfuzz.execution.parent import ExecutorError, ProcessRunner
from diagfuzz.gate.stages import Context, Finding, Stage, count_case
from diagfuzz.harness.sequences import (
    EXAMPLES,
    Search,
    fresh_for,
    gate_seconds,
    search_sequences,
)

SEQUENCE_STAGE = "sequence search"
#: Seconds the search runs at least, when the other stages end sooner (its most:
#: ``gate_seconds``).
LEAST_SECONDS = 3.0


def _stopped_soon(stopping: Callable[[], bool], wait: float = 2.0) -> bool:
    """Whether the gate is stopping, or is within ``wait`` seconds."""
    end = time.monotonic() + wait
    while not stopping():
        if time.monotonic() >= end:
            return False
        time.sleep(0.05)
    return True


def sequence_stage(ctx: Context, runner: FanoutRunner) -> Stage:
    """The sequence search over the ops the gate judges, each sequence in a fresh
    executor (the stage pool's executors judge nothing here: their pasts are the pool's)."""
    stage = ctx.stage(SEQUENCE_STAGE)
    opts = ctx.opts
    if not opts.sequences:
        stage.skipped = "--no-sequences"
        return stage
    wanted = {op.strip() for op in opts.ops.split(",")} if opts.ops else None
    ops = [op for op in (ctx.provided or ()) if wanted is None or op in wanted]
    if not ops:
        stage.skipped = "no op to judge"
        return stage
    dtypes = {op: (ctx.capabilities or {}).get(op, (None, True))[0] for op in ops}
    made = itertools.count()

    def make(environ: dict[str, str]) -> ProcessRunner:
        return ProcessRunner(opts.impl, runner.device, timeout=opts.timeout,
                             strict=opts.strict, learnt=opts.learnt(), environ=environ,
                             workdir=opts.run_dir / "sequences" / str(next(made) % 8))

    fresh = fresh_for(make, runner.device)
    started = time.monotonic()

    def enough() -> bool:
        """Stopped, cut, or past its least time once the other stages have ended: it
        searches while they run, and never keeps the gate waiting long."""
        return (ctx.stopping() or ctx.out_of_time()
                or (ctx.others_done.is_set() and time.monotonic() - started >= LEAST_SECONDS))

    budget = gate_seconds()
    search = Search(fresh, seconds=budget, stop=enough)
    ctx.progress.begin(stage.name, EXAMPLES, "sequences")
    try:
        search_sequences(search, ops, dtypes)
    except ExecutorError as exc:
        # A stop sent to the whole process group reaches the executors before the gate
        # has set its flag: an executor killed then is the stop's, not the stage's error.
        if not _stopped_soon(ctx.stopping):
            stage.error = f"{exc}"
    finally:
        fresh.close()
    stage.stopped = ctx.stopping()
    if stage.stopped:  # a crash or hang then may be the stop's doing
        search.failures = {k: v for k, v in search.failures.items()
                           if v.kind not in ("crash", "hang")}
    for verdict in search.judged:
        stage.ran += 1
        stage.unsupported += verdict.unsupported
        if verdict.ok and verdict.case is not None and not verdict.unsupported:
            count_case(stage, verdict.case)
    stage.planned = stage.ran
    stage.failures = [Finding(stage.name, v, "check") for v in search.failures.values()]
    ended = ("" if not search.out_of_time() else ", ended with the other stages"
             if ctx.others_done.is_set() and time.monotonic() - started < budget
             else ", its time budget spent")
    stage.note = (f"{search.examples} sequence(s) drawn in fresh executors, {stage.ran} "
                  f"calls{ended}")
    ctx.progress.end(stage.name, stage.note)
    return stage
