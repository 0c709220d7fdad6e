"""The worker side of the fuzz plugin: ``ShardSession`` isolates the worker (Triton cache,
example database), parametrizes the suite's shards, runs each Case through the runner (an
executor process by default, behind the write-ahead journal; pipelined there: draws overlap
checks, and a failure is replayed synchronously to shrink it), and attaches the item's
counts and findings to its test report.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from diagfuzz.execution.profiling import Profiler
from diagfuzz.execution.timeline import mark
from diagfuzz.harness import planning, workers
from diagfuzz.harness.sharding import RunPlan

if TYPE_CHECKING:  # torch-heavy: imported only once the plugin is active
    from diagfuzz.execution.journal import JournaledRunner
    from diagfuzz.harness.shard import Shard

#: The fixture the suite's shard tests take; the plugin parametrizes it with shard indices.
SHARD_FIXTURE = "diagfuzz_shard"
SHARD_KEY = pytest.StashKey["Shard"]()
#: The huge tier's test (``diagfuzz.suite.test_huge``) asks for this fixture.
HUGE_FIXTURE = "diagfuzz_huge"
#: The sequence search's test (``diagfuzz.suite.test_sequences``) asks for this fixture.
SEQUENCES_FIXTURE = "diagfuzz_sequences"


class ShardSession:
    """One worker's part of the run: isolation, shard parametrization, the per-case loop."""

    def __init__(self, config: pytest.Config, plan: RunPlan) -> None:
        from diagfuzz.harness.progress import WorkerProgress

        self.config = config
        self.plan = plan
        self.worker_id = workers.worker_id(os.environ)
        self.worker_dir = plan.worker_dir(self.worker_id)
        self.database_dir = workers.isolate(self.worker_dir, os.environ)
        from diagfuzz.campaign.worker import WorkerCampaign

        self.campaign = WorkerCampaign(plan, self.worker_id, self.database_dir)
        self.progress = WorkerProgress(self.worker_dir)
        self._runner: Any = None
        self._inner: Any = None  # the executors' runner, before the journal wraps it
        self._warned = False
        self._profiler = Profiler("worker")  # DIAGFUZZ_PROFILE only
        #: Why the impl cannot be used ('' while it can): this worker then runs nothing,
        #: and the controller stops the run with it as a usage error.
        self.plan_error = ""
        self._launched_on: str | None = None  # the device the executors were launched on
        #: The session has finished and closed the executors (``pytest_sessionfinish``).
        self.finished = False
        from diagfuzz.core.preselect import likely_device

        device = plan.device or likely_device()
        if (plan.isolation == "process" and device is not None
                and not config.getoption("collectonly", False)):
            self.launch_executors(device)

    def launch_executors(self, device: str) -> None:
        """Spawn this worker's executors now, before it imports torch and collects: their
        start-up (torch, CUDA, warm-up) overlaps the worker's own. A launch that fails is
        found again, and reported, when the first shard starts them."""
        with contextlib.suppress(Exception):
            self._inner = make_executors(self.plan, self.worker_id, device)
            self._inner.launch()
            self._launched_on = device
            mark("executors_launched")

    # --- the impl's part of the plan --------------------------------------------------
    @pytest.hookimpl(tryfirst=True)
    def pytest_collection(self) -> None:
        """Decide what depends on the impl before collecting (the shards' items follow
        it): the controller's plan leaves it to each worker, which loads the impl while its
        executors start. What it decided, or why the impl cannot be used, goes to the
        worker's directory for the controller (``RESOLVED_FILE``)."""
        if self.plan.resolved:
            return
        try:
            self.plan = planning.complete(self.plan)
        except planning.PlanError as exc:
            self.plan_error = str(exc)
        self.campaign.plan = self.plan
        planning.write_resolved(self.worker_dir, self.plan, self.plan_error)
        mark("planned")
        if self._inner is not None and self._launched_on != self.plan.device:
            self._inner.close()  # launched on a device torch does not confirm
            self._inner = None
            if not self.plan_error and self.plan.isolation == "process":
                self.launch_executors(self.plan.device or planning.device())

    # --- collection -------------------------------------------------------------------
    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        if SHARD_FIXTURE in metafunc.fixturenames:
            metafunc.parametrize(SHARD_FIXTURE, range(self.plan.shards), indirect=True,
                                 ids=[f"shard{i}" for i in range(self.plan.shards)])

    def pytest_collection_modifyitems(self, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        """--diagfuzz-partition: this partition's shard items only (diagfuzz.campaign); the
        huge tier's item only where the profile or --diagfuzz-huge asks for it, the
        sequence search's where the run has sequences (each in the first partition of a
        campaign)."""
        from diagfuzz.campaign.partition import deselect

        if self.plan_error:  # the controller stops the run with it (a usage error)
            config.hook.pytest_deselected(items=list(items))
            items[:] = []
            return
        deselect(self.plan, config, items, SHARD_FIXTURE)
        first = (self.plan.partition or 1) == 1
        wanted = {HUGE_FIXTURE: self.plan.huge and first,
                  SEQUENCES_FIXTURE: self.plan.sequences > 0 and first}
        dropped = [i for i in items if any(not on and name in getattr(i, "fixturenames", ())
                                           for name, on in wanted.items())]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = [i for i in items if i not in dropped]

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """Spawn the executors here if configure did not (a plan without its device):
        once this worker knows it has shards to run, so their start-up overlaps with the
        wait for the first item. A launch that fails is found again, and reported, when
        the first shard starts them."""
        mark("collected")
        if self.plan.isolation == "process" and self._inner is None and any(
                SHARD_FIXTURE in getattr(item, "fixturenames", ()) for item in session.items):
            with contextlib.suppress(Exception):
                self.runner.launch()
            mark("executors_launched")

    @pytest.fixture
    def diagfuzz_shard(self, request: pytest.FixtureRequest) -> Shard:
        """The shard this item fuzzes (its stream is the test function's name)."""
        from diagfuzz.harness.shard import Shard

        item = request.node
        shard = Shard(self, item, request.function.__name__, request.param)
        item.stash[SHARD_KEY] = shard
        if request.function.__name__ not in self.plan.skipped:
            self.runner.test_id = item.nodeid  # what the journal names for its Cases
            # Executor start-up in the set-up, not in the shard's time (the report's pace).
            # If it fails, the first Case starts it again and reports why.
            with contextlib.suppress(Exception):
                self.runner.start()
            mark("executors_ready")
        return shard

    @pytest.fixture
    def diagfuzz_huge(self, request: pytest.FixtureRequest) -> Shard:
        """The huge tier's item as a shard of one: its verdicts and findings reach the
        report as a shard's do (``Shard.judge``)."""
        from diagfuzz.harness.shard import Shard

        shard = Shard(self, request.node, request.function.__name__, 0)
        request.node.stash[SHARD_KEY] = shard
        return shard

    @pytest.fixture
    def diagfuzz_sequences(self, request: pytest.FixtureRequest) -> Shard:
        """The sequence search's item as a shard of one (``Shard.judged``)."""
        from diagfuzz.harness.shard import Shard

        shard = Shard(self, request.node, request.function.__name__, 0)
        request.node.stash[SHARD_KEY] = shard
        return shard

    # --- the per-case loop --------------------------------------------------------------
    @property
    def runner(self) -> JournaledRunner:
        """The worker's journaled runner, made on first use, closed at session end."""
        if self._runner is None:
            self._runner = make_runner(self.plan, self.worker_id, self._inner)
        return self._runner

    def run_one(self, shard: Shard, case: Any) -> Any:
        """One Case's verdict (journaled first); a runner that raises stops the shard."""
        from diagfuzz.harness.shard import HarnessStop

        try:
            return self.runner.run(case)
        except Exception as exc:
            self.harness_error(shard, case, exc)
            raise HarnessStop from exc

    def harness_error(self, shard: Shard, case: Any, exc: BaseException) -> None:
        """The runner raised on ``case``: a finding of the harness, not of the impl."""
        from diagfuzz.harness.findings import Finding

        if case is not None:
            shard.tally.add(case, failed=True)
        shard.findings.append(Finding.harness(shard.item.nodeid, case, exc))

    def pipeline_refusal(self, shard_settings: Any) -> str:
        """'' if this worker's shards may pipeline (see diagfuzz.harness.shard), else why not."""
        from diagfuzz.adapters import hypothesis as pipeline

        plan = self.plan
        if not plan.pipeline:
            return "--diagfuzz-pipeline off"
        if plan.isolation != "process":
            return "in-process isolation checks in the drawing process"
        if shard_settings.derandomize:
            return "a derandomized profile checks each Case as it is drawn"
        if not self.runner.pipelines:
            return "the runner cannot keep Cases in flight"
        missing = pipeline.unavailable()
        if missing and not self._warned:
            self._warned = True
            import warnings

            warnings.warn(f"diagfuzz: pipelining off, shards run synchronously: {missing}",
                          pytest.PytestWarning, stacklevel=1)
        return missing

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Iterator[None]:
        """Shard items run under the worker's profiler when DIAGFUZZ_PROFILE asks for one."""
        shard = SHARD_KEY in item.stash
        profiled = self._profiler.active and shard
        if shard:
            mark("shard_start")
        if profiled:
            self._profiler.enable()
        try:
            return (yield)
        finally:
            if profiled:
                self._profiler.disable()
            if shard:
                mark("shard_end")

    # --- reporting ----------------------------------------------------------------------
    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]
                                  ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        shard = item.stash.get(SHARD_KEY, None)
        if call.when == "call" and shard is not None:
            # JSON text: a Case's integers (offsets to ±2**63, raw arguments beyond int64)
            # cross xdist's execnet channel, whose serialiser refuses some of them.
            report.diagfuzz = json.dumps({  # type: ignore[attr-defined]
                "tally": shard.tally.to_dict(),
                "findings": [f.to_dict() for f in shard.findings],
                "cut": shard.cut,
                "shrink_checks": shard.shrink_checks,
                "worker": workers.worker_id(os.environ),
                "gpu": workers.shard_gpu(os.environ, self.plan.device or planning.device()),
                "shard_s": report.duration,
                **self.campaign.payload(),
            })
            if report.failed and shard.findings and not self.plan_tracebacks:
                report.longrepr = shard.summary()
                report.sections = []
        return report

    @property
    def plan_tracebacks(self) -> bool:
        return bool(self.config.getoption("diagfuzz_tracebacks", False))

    def pytest_sessionfinish(self) -> None:
        mark("session_finish")
        self.progress.write()
        if self._runner is not None:
            self._runner.close()  # an executor writes its profile as it exits
            self._runner = None
        elif self._inner is not None:  # launched, never used (no shard ran here)
            self._inner.close()
        self._inner = None
        self._profiler.dump()
        mark("runner_closed")
        self.finished = True


def make_runner(plan: RunPlan, worker_id: str, inner: Any = None) -> JournaledRunner:
    """The runner of ``plan.isolation`` (executor processes, or in-process), journaled;
    ``inner``: executors launched already (``make_executors``).

    Every Case is in the worker's journal (``<run dir>/journal/<worker>.jsonl``) before it
    runs, so even a death of the whole worker is attributed to its Case.
    """
    from diagfuzz.execution.journal import Journal, JournaledRunner, journal_path
    from diagfuzz.execution.runner import settle_heap

    if inner is None:
        if plan.isolation == "process":
            inner = make_executors(plan, worker_id, plan.device or planning.device())
        else:
            from diagfuzz.execution.runner import InProcessRunner

            inner = InProcessRunner(plan.impl, plan.device or planning.device(), strict=plan.strict)
    if plan.isolation == "process":
        settle_heap()  # this process still draws the Cases: keep its collections short
    journal = Journal(journal_path(plan.journal_dir, worker_id), run_seed=plan.seed,
                      worker_id=worker_id, impl=plan.impl)
    return JournaledRunner(inner, journal)


def make_executors(plan: RunPlan, worker_id: str, device: str) -> Any:
    """The worker's executor runner, not started: one ``ProcessRunner``, or with
    ``--diagfuzz-executors N`` > 1 (pipelined) a ``FanoutRunner`` over N. Imports no torch.
    The executor's stderr (faulthandler's stack of a dying Case) goes to the worker dir."""
    from diagfuzz.execution.parent import ProcessRunner

    if plan.fans_out:
        return _fanout(plan, worker_id, ProcessRunner, device)
    runner = ProcessRunner(plan.impl, device, plan.timeout, workdir=plan.worker_dir(worker_id),
                           strict=plan.strict, learnt=learnt(plan))
    runner.block_fault_shapes = True  # a shard's Cases (``fault_shapes``)
    return runner


def learnt(plan: RunPlan) -> Any:
    """What every executor runner of the run learns together: calibrated timeouts and the
    ops with a confirmed hang or crash (``diagfuzz.execution.timeouts``), shared through
    the run directory's file with the other workers (a gate's, under a gate)."""
    from diagfuzz.execution.timeouts import learnt_of_run

    return learnt_of_run(Path(plan.run_dir) / "known-faults")


def _fanout(plan: RunPlan, worker_id: str, process_runner: Any, device: str) -> Any:
    """``plan.executors`` executors for one worker, each logging to its own
    ``executor-<i>.log`` in the worker dir, so a crash's stderr tail is its executor's."""
    from diagfuzz.execution.fanout import FanoutRunner

    workdir = plan.worker_dir(worker_id)
    runners = []
    for index in range(plan.executors):
        runner = process_runner(plan.impl, device, plan.timeout, workdir=workdir,
                                strict=plan.strict, learnt=learnt(plan))
        runner.log = workdir / f"executor-{index}.log"
        runner.block_fault_shapes = True  # a shard's Cases (``fault_shapes``)
        runners.append(runner)
    return FanoutRunner(runners)
