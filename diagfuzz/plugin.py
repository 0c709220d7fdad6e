"""The diagfuzz pytest plugin: sharded fuzzing over xdist workers, isolation, coverage report.

Enabled with ``pytest -p diagfuzz`` (the ``pytest11`` entry point installs it in every
pytest run, but it stays inert unless named with ``-p``, so a project that only installs
diagfuzz keeps its GPUs, caches and Hypothesis profiles as they were).

Laid out like pytest-xdist: the hooks are gathered here, in three parts.

* Both sides: options, hook specs, activation, ``-n auto`` sizing.
* Controller side (``RunController``, ``Reporter``): resolves the ``RunPlan`` once (run
  seed, impl, shards, budget), validates ``--impl`` (a usage error, not a failure), pins one
  GPU per xdist worker, ships the plan to workers, names the Case that killed a dead worker
  (from its journal), aggregates the workers' counts and failures, prints the coverage
  table and writes ``--diagfuzz-report``.
* Worker side (``ShardSession``): isolates the worker (Triton cache, example database),
  parametrizes the suite's shards, runs each Case through the runner (an executor process
  by default, behind the write-ahead journal; pipelined there: draws overlap checks, and a
  failure is replayed synchronously to shrink it), and attaches the item's counts and
  failure to its test report.

Without xdist one process plays both sides.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from diagfuzz import workers
from diagfuzz.profiling import Profiler
from diagfuzz.sharding import (
    RunPlan,
    examples_per_shard,
    families_per_shard,
    new_run_seed,
    shard_count,
)

if TYPE_CHECKING:  # torch-heavy: imported only once the plugin is active
    from diagfuzz.journal import JournaledRunner
    from diagfuzz.report import Failure

#: The fixture the suite's shard tests take; the plugin parametrizes it with shard indices.
SHARD_FIXTURE = "diagfuzz_shard"
_PLUGIN_NAMES = ("diagfuzz", "diagfuzz.plugin")
_PLAN_KEY = "diagfuzz"
_TALLY = pytest.StashKey[Any]()  # a diagfuzz.report.Tally
_FAILURE = pytest.StashKey["Failure | None"]()


# ============================================================================================
# Both sides
# ============================================================================================

def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("diagfuzz", "diagfuzz fuzzing (active with -p diagfuzz)")
    group.addoption("--impl", dest="diagfuzz_impl", metavar="MODULE:ATTR", default=None,
                    help="implementation under test (default diagfuzz.impl:triton_aten)")
    group.addoption("--diagfuzz-seed", type=int, default=None, metavar="N",
                    help="run seed; every shard's seed derives from it (default: random, "
                         "0 under a derandomized profile such as gate)")
    group.addoption("--diagfuzz-shards", type=int, default=None, metavar="N",
                    help="shards per stream (default: the profile's, at least "
                         "workers/3); the budget is split over them")
    group.addoption("--diagfuzz-budget", type=int, default=None, metavar="N",
                    help="total Cases over all shards, about (the suite draws Case "
                         "families; default: the profile's)")
    group.addoption("--diagfuzz-max-members", type=int, default=None, metavar="N",
                    help="Cases per family at most (default: the profile's, 12; gate 1); "
                         "1 draws one Case per Hypothesis example")
    group.addoption("--diagfuzz-max-elements", type=int, default=None, metavar="N",
                    help="largest tensor the strategies draw (default: the profile's)")
    group.addoption("--diagfuzz-isolation", choices=("auto", "process", "inprocess"),
                    default="auto",
                    help="run Cases in a spawned executor process (crash/hang isolation) "
                         "or in the worker itself (auto: process when diagfuzz.executor "
                         "is available)")
    group.addoption("--diagfuzz-pipeline", choices=("on", "off"), default="on",
                    help="with process isolation, draw the next Cases while the executor "
                         "checks earlier ones; a failure is then replayed and shrunk "
                         "synchronously (default on; off: draw, then check, one by one)")
    group.addoption("--diagfuzz-executors", type=int, default=None, metavar="N",
                    help="executor processes each pipelined worker feeds (process "
                         "isolation, --diagfuzz-pipeline on; default "
                         f"{workers.FANOUT_EXECUTORS} where the machine has "
                         f"{workers.FANOUT_EXECUTORS + 1} CPUs per worker, else 1): Cases go "
                         "to the one with the fewest in flight, crashes stay per executor")
    group.addoption("--diagfuzz-timeout", type=float, default=None, metavar="SECONDS",
                    help="per-Case timeout before a Case is a hang (process isolation; "
                         "default the executor's)")
    group.addoption("--diagfuzz-root", default=None, metavar="DIR",
                    help="root of per-run, per-worker directories (default <rootdir>/"
                         ".diagfuzz); a run uses DIR/run-<seed>/<worker>")
    group.addoption("--diagfuzz-report", default=None, metavar="PATH",
                    help="write the JSON report (seed, impl, counts, failures) to PATH")
    group.addoption("--diagfuzz-workers-per-gpu", type=int, default=None, metavar="N",
                    help="workers per GPU for -n auto on a GPU machine "
                         f"(default min({workers.MAX_WORKERS_PER_GPU}, CPUs per GPU))")


def active(config: pytest.Config) -> bool:
    """Whether the plugin was asked for with ``-p diagfuzz``."""
    return any(name in _PLUGIN_NAMES for name in (config.getoption("plugins", None) or ()))


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def _distributed(config: pytest.Config) -> bool:
    """This process is an xdist controller that will start workers."""
    return (not _is_worker(config) and config.getoption("dist", "no") != "no"
            and bool(config.getoption("tx", None)))


def _cuda_device_count() -> int:
    """GPUs torch sees; only ever called on the controller, which runs no kernel."""
    import torch

    return torch.cuda.device_count()


def _gpus() -> list[str]:
    return workers.visible_gpus(os.environ, 0 if "CUDA_VISIBLE_DEVICES" in os.environ
                                else _cuda_device_count())


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` on a GPU machine: a few workers per GPU; elsewhere xdist decides."""
    if not active(config) or os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    gpus = _gpus()
    if not gpus:
        return None
    return workers.auto_workers(len(gpus), workers.cpu_count(),
                                config.getoption("diagfuzz_workers_per_gpu"))


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    if not active(config):
        return
    from diagfuzz import profiles

    profiles.register()
    config.addinivalue_line("markers", "fuzz: Hypothesis fuzz shards of the diagfuzz suite")
    if _is_worker(config):
        plan = RunPlan.from_dict(config.workerinput[_PLAN_KEY])  # type: ignore[attr-defined]
    else:
        plan = resolve_plan(config)
        config.pluginmanager.register(Reporter(config, plan), "diagfuzz-reporter")
        if _distributed(config):
            config.option.tx = workers.pin_specs(config.getoption("tx"), _gpus())
            config.pluginmanager.register(RunController(plan), "diagfuzz-controller")
            return
    config.pluginmanager.register(ShardSession(config, plan), "diagfuzz-shards")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Without the plugin's worker side, a shard test says how to run it."""
    if SHARD_FIXTURE in metafunc.fixturenames and not active(metafunc.config):
        raise pytest.UsageError(
            f"{metafunc.definition.nodeid} is a diagfuzz fuzz shard: run it with the plugin, "
            "`pytest -p diagfuzz --pyargs diagfuzz.suite`")


# ============================================================================================
# Controller side
# ============================================================================================

def resolve_plan(config: pytest.Config) -> RunPlan:
    """Decide the run once: seed, impl (validated), profile budget, shards, directories."""
    from hypothesis import settings
    from hypothesis.errors import InvalidArgument

    from diagfuzz import profiles
    from diagfuzz.impl import DEFAULT_IMPL, ImplError, load_impl

    impl = config.getoption("diagfuzz_impl") or DEFAULT_IMPL
    try:
        load_impl(impl)
    except ImplError as exc:
        raise pytest.UsageError(str(exc)) from exc
    profile = config.getoption("hypothesis_profile", None) or profiles.DEFAULT_PROFILE
    try:
        budget = profiles.budget_for(profile)
        derandomize = settings.get_profile(profile).derandomize
    except InvalidArgument as exc:
        raise pytest.UsageError(f"--hypothesis-profile {profile!r}: {exc}") from exc
    n_workers = len(workers.pin_specs(config.getoption("tx"), [])) if _distributed(config) else 1
    shards = _positive(config, "diagfuzz_shards") or shard_count(budget.shards, n_workers)
    total = _positive(config, "diagfuzz_budget") or budget.total
    seed = config.getoption("diagfuzz_seed")
    if seed is None:
        seed = 0 if derandomize else new_run_seed()
    root = Path(config.getoption("diagfuzz_root") or config.rootpath / ".diagfuzz")
    return RunPlan(
        seed=seed,
        impl=impl,
        profile=profile,
        shards=shards,
        cases_per_shard=examples_per_shard(total, shards),
        max_elements=_positive(config, "diagfuzz_max_elements") or budget.max_elements,
        isolation=_isolation(config.getoption("diagfuzz_isolation")),
        timeout=_timeout(config.getoption("diagfuzz_timeout")),
        run_dir=str(root.resolve() / f"run-{seed}"),
        workers=n_workers,
        max_members=_positive(config, "diagfuzz_max_members") or budget.max_members,
        pipeline=config.getoption("diagfuzz_pipeline") == "on",
        executors=(_positive(config, "diagfuzz_executors")
                   or workers.auto_executors(n_workers, workers.cpu_count())),
    )


def _positive(config: pytest.Config, dest: str) -> int | None:
    value = config.getoption(dest)
    if value is not None and value < 1:
        raise pytest.UsageError(f"--{dest.replace('_', '-')} must be at least 1, got {value}")
    return value


def _timeout(value: float | None) -> float | None:
    if value is not None and value <= 0:
        raise pytest.UsageError(f"--diagfuzz-timeout must be > 0 seconds, got {value}")
    return value


def _isolation(choice: str) -> str:
    """auto means process isolation as soon as the executor module exists."""
    has_executor = importlib.util.find_spec("diagfuzz.executor") is not None
    if choice == "process" and not has_executor:
        raise pytest.UsageError("--diagfuzz-isolation process: diagfuzz.executor is not "
                                "available in this diagfuzz")
    if choice == "auto":
        return "process" if has_executor else "inprocess"
    return choice


class RunController:
    """xdist controller: ships the plan to every worker, and names a dead worker's Case."""

    def __init__(self, plan: RunPlan) -> None:
        self.plan = plan

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[_PLAN_KEY] = self.plan.to_dict()

    @pytest.hookimpl(optionalhook=True)
    def pytest_handlecrashitem(self, crashitem: str, report: pytest.TestReport,
                               sched: Any) -> None:
        """Replace xdist's bare "worker crashed" with the Case the worker's journal names."""
        from diagfuzz.crash import attribute_crash
        from diagfuzz.journal import journal_path, last_unfinished
        from diagfuzz.report import Failure
        from diagfuzz.verdict import Verdict

        worker = report.node.gateway.id  # type: ignore[attr-defined]
        journal_dir = self.plan.journal_dir
        report.longrepr = attribute_crash(journal_dir, worker, crashitem)
        found = last_unfinished(journal_path(journal_dir, worker))
        verdict = Verdict("crash", "worker", f"worker {worker} died running this Case",
                          found[0] if found else None)
        report.diagfuzz = {  # type: ignore[attr-defined]
            "tally": {}, "failure": asdict(Failure.from_verdict(crashitem, verdict))}


class Reporter:
    """Aggregates every shard item's counts and failure; prints and writes the report."""

    def __init__(self, config: pytest.Config, plan: RunPlan) -> None:
        from diagfuzz.report import Pace, Tally

        self.config = config
        self.plan = plan
        self.tally = Tally()
        self.failures: list[Failure] = []
        self.started = time.monotonic()
        self.report_path: Path | None = None
        self.pace = Pace()

    def pytest_report_header(self) -> str:
        return self.plan.describe()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        from diagfuzz.report import Failure, Tally

        payload = getattr(report, "diagfuzz", None)
        if payload is not None:
            shard = Tally.from_dict(payload["tally"])
            self.tally.merge(shard)
            if "shard_s" in payload:
                self.pace.add(payload["worker"], shard.total, payload["shard_s"])
            if payload["failure"] is not None:
                self.failures.append(Failure(**{**payload["failure"],
                                                "test_id": report.nodeid}))
                return
        if report.failed and _is_shard_id(report.nodeid) and (
                payload is None or report.when == "call"):
            # A worker that died mid-item (xdist reports when="???"), or the harness raised
            # before any verdict: keep it, with what pytest knows.
            kind = "crash" if report.when == "???" else "harness-error"
            self.failures.append(Failure(report.nodeid, kind,
                                         message=_tail(report.longreprtext)))

    def header(self, exitstatus: int) -> dict[str, Any]:
        """The run description at the top of the JSON report."""
        duration = time.monotonic() - self.started
        return {
            "diagfuzz_report": 1,
            **self.plan.to_dict(),
            "exit_status": int(exitstatus),
            "duration_s": round(duration, 3),
            "pace": self.pace.to_dict(duration),
        }

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, exitstatus: int) -> None:
        from diagfuzz.report import write_json

        path = self.config.getoption("diagfuzz_report")
        if path:
            self.report_path = Path(path)
            write_json(self.report_path, self.header(exitstatus), self.tally, self.failures)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        from diagfuzz.report import format_table

        title = (f"diagfuzz: {self.tally.total} cases, {len(self.failures)} failures "
                 f"(seed {self.plan.seed}, impl {self.plan.impl})")
        terminalreporter.write_sep("=", title)
        for line in format_table(self.tally, self.failures):
            terminalreporter.write_line(line)
        terminalreporter.write_line(self.pace.summary(time.monotonic() - self.started))
        terminalreporter.write_line(f"rerun: --diagfuzz-seed {self.plan.seed}")
        if self.report_path is not None:
            terminalreporter.write_line(f"report: {self.report_path}")


def _is_shard_id(nodeid: str) -> bool:
    return nodeid.endswith("]") and "[shard" in nodeid


def _tail(text: str, lines: int = 20) -> str:
    return "\n".join(text.splitlines()[-lines:])


# ============================================================================================
# Worker side
# ============================================================================================

class ShardSession:
    """One worker's part of the run: isolation, shard parametrization, the per-case loop."""

    def __init__(self, config: pytest.Config, plan: RunPlan) -> None:
        self.config = config
        self.plan = plan
        self.worker_id = workers.worker_id(os.environ)
        self.worker_dir = plan.worker_dir(self.worker_id)
        self.database_dir = workers.isolate(self.worker_dir, os.environ)
        self._runner: Any = None
        self._warned = False
        self._profiler = Profiler("worker")  # DIAGFUZZ_PROFILE only

    # --- collection -------------------------------------------------------------------
    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        if SHARD_FIXTURE in metafunc.fixturenames:
            metafunc.parametrize(SHARD_FIXTURE, range(self.plan.shards), indirect=True,
                                 ids=[f"shard{i}" for i in range(self.plan.shards)])

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """Spawn the executor once this worker knows it has shards to run: its start-up
        (torch, CUDA, warm-up) overlaps with the wait for the first item. A launch that
        fails is found again, and reported, when the first shard starts it."""
        if self.plan.isolation == "process" and any(
                SHARD_FIXTURE in getattr(item, "fixturenames", ()) for item in session.items):
            with contextlib.suppress(Exception):
                self.runner.launch()

    @pytest.fixture
    def diagfuzz_shard(self, request: pytest.FixtureRequest) -> Shard:
        """The shard this item fuzzes (its stream is the test function's name)."""
        from diagfuzz.report import Tally

        item = request.node
        item.stash[_TALLY] = Tally()
        item.stash[_FAILURE] = None
        self.runner.test_id = item.nodeid  # what the journal names for this item's Cases
        # Executor start-up in the set-up, not in the shard's time (the report's pace). If it
        # fails, the first Case starts it again and reports why, as it always has.
        with contextlib.suppress(Exception):
            self.runner.start()
        return Shard(self, item, request.function.__name__, request.param)

    # --- the per-case loop --------------------------------------------------------------
    @property
    def runner(self) -> JournaledRunner:
        """The worker's journaled runner, made on first use, closed at session end."""
        if self._runner is None:
            self._runner = make_runner(self.plan, self.worker_id)
        return self._runner

    def check(self, item: pytest.Item, case: Any) -> None:
        """Run one Case; a non-pass verdict raises AssertionError so Hypothesis shrinks."""
        try:
            verdict = self.runner.run(case)  # journaled, flushed, before it runs
        except Exception as exc:
            item.stash[_FAILURE] = harness_failure(item, case, exc)
            raise
        item.stash[_TALLY].add(case, failed=not verdict.ok)
        if not verdict.ok:
            # The last failure of an item is Hypothesis' final, shrunk example.
            item.stash[_FAILURE] = _failure_of(item, verdict)
            raise AssertionError(str(verdict))

    def pipeline_refusal(self, shard_settings: Any) -> str:
        """'' if this worker's shards may pipeline (see Shard.fuzz), else why not."""
        from diagfuzz import pipeline

        plan = self.plan
        if not plan.pipeline:
            return "--diagfuzz-pipeline off"
        if plan.isolation != "process":
            return "in-process isolation checks in the drawing process"
        if shard_settings.derandomize:
            return "a derandomized profile runs as it always did"
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
        profiled = self._profiler.active and _TALLY in item.stash
        if profiled:
            self._profiler.enable()
        try:
            return (yield)
        finally:
            if profiled:
                self._profiler.disable()

    # --- reporting ----------------------------------------------------------------------
    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item,
                                  call: pytest.CallInfo[None]) -> Iterator[None]:
        report = yield
        if call.when == "call" and _TALLY in item.stash:
            failure = item.stash.get(_FAILURE, None) if report.failed else None
            report.diagfuzz = {  # type: ignore[attr-defined]  (xdist ships it)
                "tally": item.stash[_TALLY].to_dict(),
                "failure": None if failure is None else asdict(failure),
                "worker": workers.worker_id(os.environ),
                "shard_s": report.duration,
            }
        return report

    def pytest_sessionfinish(self) -> None:
        if self._runner is not None:
            self._runner.close()  # an executor writes its profile as it exits
            self._runner = None
        self._profiler.dump()


class Shard:
    """One collected shard: a Hypothesis run with a fixed seed over one stream's strategy."""

    def __init__(self, session: ShardSession, item: pytest.Item, stream: str,
                 index: int) -> None:
        self.session = session
        self.item = item
        self.stream = stream
        self.index = index
        self.seed = session.plan.shard_seed(stream, index)

    def fuzz(self, family_factory: Callable[..., Any]) -> None:
        """Draw Case families from ``family_factory(max_elements=..., max_members=...)`` and
        check every member.

        Members are checked in order, each journaled, run and tallied; the first failing
        one raises, so Hypothesis shrinks the family and the item's last Failure (the final
        shrunk example's) names that member alone. ``max_examples`` counts families: the
        shard's Case budget divided by the mean family size (``strategies.mean_members``).

        Pipelined (process isolation, ``--diagfuzz-pipeline on``, not a derandomized
        profile, no remembered failures in the database): phase 1 submits each family to
        the executor and draws the next while it is checked (same seed, same Cases);
        verdicts are tallied as they arrive and the first failure stops submission. Phase
        2 replays that family through the database (``diagfuzz.pipeline``) in the
        synchronous test, which fails, shrinks and reports as above; if the replay passes
        (flaky), the unshrunk Case phase 1 saw fail is reported. Every Case checked is
        counted once per check: the failing family's members count in both phases.
        """
        from hypothesis import given, seed, settings
        from hypothesis.database import DirectoryBasedExampleDatabase

        from diagfuzz import pipeline, profiles
        from diagfuzz.strategies import mean_members

        plan = self.session.plan
        strategy = family_factory(max_elements=plan.max_elements,
                                  max_members=plan.max_members)
        check, item = self.session.check, self.item

        def fuzz_shard(family: tuple[Any, ...]) -> None:
            for case in family:
                check(item, case)

        # Each shard saves and replays its failures under its own database key.
        fuzz_shard._hypothesis_internal_add_digest = (  # type: ignore[attr-defined]
            f"{self.stream}:{self.index}".encode())
        shard_settings = profiles.shard_settings(
            plan.profile,
            max_examples=families_per_shard(plan.cases_per_shard,
                                            mean_members(plan.max_members)),
            database=DirectoryBasedExampleDatabase(self.session.database_dir))

        def run(test: Callable[..., None], how: settings) -> None:
            how(seed(self.seed)(given(strategy)(test)))()

        if (self.session.pipeline_refusal(shard_settings)
                or pipeline.remembers(shard_settings.database, fuzz_shard)):
            run(fuzz_shard, shard_settings)  # synchronous: draw, check, draw ...
            return
        # Phase 1: draw and submit; verdicts are collected as they arrive.
        phase = PipelinedPhase(self.session, item)
        try:
            run(phase.submit_family, settings(shard_settings, database=None))
        finally:
            phase.finish()
        if phase.failed is None:
            return
        # Phase 2: the first failing family, replayed synchronously, fails, shrinks, reports.
        failed = phase.failed
        database = shard_settings.database or _in_memory_database()
        pipeline.save_for_replay(database, fuzz_shard, failed.choices)
        item.stash[_FAILURE] = None
        try:
            run(fuzz_shard, settings(shard_settings, database=database,
                                     phases=pipeline.replay_phases(shard_settings.phases)))
        except BaseException:
            if item.stash[_FAILURE] is None:  # Hypothesis' own error before any check
                item.stash[_FAILURE] = failed.failure
            raise
        # The replay passed: a flaky failure. Never lose it: report the unshrunk Case.
        item.stash[_FAILURE] = failed.failure
        raise AssertionError(f"flaky: failed when first checked (pipelined), passed when "
                             f"replayed, so not shrunk: {failed.message}")


class _FailedFamily:
    """Phase 1's first failing family: its choice sequence and the failure to report."""

    def __init__(self, choices: bytes, failure: Failure, message: str) -> None:
        self.choices = choices
        self.failure = failure
        self.message = message


class PipelinedPhase:
    """Phase 1 of a pipelined shard: each example submits its family and returns.

    Verdicts are collected (tallied, like ``ShardSession.check``) at the start of each
    example and at the end; the first failing one stops submission (later examples return
    at once) and names its family, whose choice sequence phase 2 replays.
    """

    def __init__(self, session: ShardSession, item: pytest.Item) -> None:
        self.session = session
        self.item = item
        self.runner = session.runner
        self.failed: _FailedFamily | None = None
        self._choices: list[bytes] = []  # per submitted family
        self._in_flight: dict[int, tuple[Any, int]] = {}  # ticket -> (Case, family)

    def submit_family(self, family: tuple[Any, ...]) -> None:
        """The phase's ``@given`` test function."""
        from diagfuzz import pipeline

        if self.failed is None:
            self._collect(self.runner.poll)
        if self.failed is not None:
            return
        index = len(self._choices)
        self._choices.append(pipeline.current_choices())
        for case in family:
            try:
                ticket = self.runner.submit(case)  # journaled first
            except Exception as exc:
                self._harness_error(exc, case, index)
                return
            self._in_flight[ticket] = (case, index)

    def finish(self) -> None:
        """Wait for every Case still in flight and tally it."""
        while self._in_flight:
            before = len(self._in_flight)
            self._collect(self.runner.drain)
            if len(self._in_flight) == before:  # the runner holds none of them any more
                self._in_flight.clear()

    def _collect(self, collect: Callable[[], list[tuple[int, Any]]]) -> None:
        try:
            done = collect()
        except Exception as exc:
            # Verdicts settled before the runner gave up come first: a crash whose
            # replacement executor could not start is that Case's failure, not the next's.
            self._tally(self._settled_before_error())
            self._harness_error(exc, None, None)
            return
        self._tally(done)

    def _settled_before_error(self) -> list[tuple[int, Any]]:
        """What the runner holds settled after raising (nothing left in flight to run)."""
        try:
            return self.runner.poll()
        except Exception:
            return []

    def _tally(self, done: list[tuple[int, Any]]) -> None:
        for ticket, verdict in done:
            case, index = self._in_flight.pop(ticket)
            self.item.stash[_TALLY].add(case, failed=not verdict.ok)
            if not verdict.ok and self.failed is None:
                self.failed = _FailedFamily(self._choices[index],
                                            _failure_of(self.item, verdict), str(verdict))

    def _harness_error(self, exc: Exception, case: Any, index: int | None) -> None:
        """The runner raised: the first Case it gave up on (``exc.tickets``: the one whose
        oracle raised, or the queue no executor could start for) or ``case`` failed."""
        lost = [self._in_flight.pop(t) for t in getattr(exc, "tickets", ())
                if t in self._in_flight]
        if lost:
            case, index = lost[0]
        if case is None or index is None:
            raise exc
        failure = harness_failure(self.item, case, exc)
        if self.failed is None:
            self.failed = _FailedFamily(self._choices[index], failure, failure.message)


def harness_failure(item: pytest.Item, case: Any, exc: BaseException) -> Failure:
    """Count ``case`` as failed by the harness (the runner raised on it), and say so."""
    from diagfuzz.report import Failure

    item.stash[_TALLY].add(case, failed=True)
    return Failure(item.nodeid, "harness-error", "", f"{type(exc).__name__}: {exc}",
                   json.loads(case.to_json()))


def _failure_of(item: pytest.Item, verdict: Any) -> Failure:
    from diagfuzz.report import Failure

    return Failure.from_verdict(item.nodeid, verdict)


def _in_memory_database() -> Any:
    """Phase 2's database when the profile keeps none: the replay needs one."""
    from hypothesis.database import InMemoryExampleDatabase

    return InMemoryExampleDatabase()


def make_runner(plan: RunPlan, worker_id: str) -> JournaledRunner:
    """The runner of ``plan.isolation`` (executor process or in-process), journaled.

    Pipelined with ``--diagfuzz-executors N`` > 1: a ``FanoutRunner`` over N executors.

    Every Case is in the worker's journal (``<run dir>/journal/<worker>.jsonl``) before it
    runs, so even a death of the whole worker is attributed to its Case.
    """
    import diagfuzz.ops as ops
    from diagfuzz.journal import Journal, JournaledRunner, journal_path

    inner: Any
    if plan.isolation == "process":
        executor = importlib.import_module("diagfuzz.executor")
        # The executor's stderr (faulthandler's stack of a dying Case) goes to the worker dir.
        if plan.fans_out:
            inner = _fanout(plan, worker_id, executor.ProcessRunner, ops.DEVICE)
        else:
            inner = executor.ProcessRunner(plan.impl, ops.DEVICE, plan.timeout,
                                           workdir=plan.worker_dir(worker_id))
        from diagfuzz.runner import settle_heap

        settle_heap()  # this process still draws the Cases: keep its collections short
    else:
        from diagfuzz.runner import InProcessRunner

        inner = InProcessRunner(plan.impl, ops.DEVICE)
    journal = Journal(journal_path(plan.journal_dir, worker_id), run_seed=plan.seed,
                      worker_id=worker_id, impl=plan.impl)
    return JournaledRunner(inner, journal)


def _fanout(plan: RunPlan, worker_id: str, process_runner: Any, device: str) -> Any:
    """``plan.executors`` executors for one worker, each logging to its own
    ``executor-<i>.log`` in the worker dir, so a crash's stderr tail is its executor's."""
    from diagfuzz.fanout import FanoutRunner

    workdir = plan.worker_dir(worker_id)
    runners = []
    for index in range(plan.executors):
        runner = process_runner(plan.impl, device, plan.timeout, workdir=workdir)
        runner.log = workdir / f"executor-{index}.log"
        runners.append(runner)
    return FanoutRunner(runners)
