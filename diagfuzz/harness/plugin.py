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

import _thread
import contextlib
import json
import os
import signal
import threading
import time
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from diagfuzz.campaign import options as campaign_options
from diagfuzz.core.exits import ExitCode
from diagfuzz.core.opnames import op_names
from diagfuzz.execution.profiling import Profiler
from diagfuzz.execution.timeline import mark
from diagfuzz.harness import planning, workers
from diagfuzz.harness.sharding import HARD_SHARE, RunPlan

if TYPE_CHECKING:  # torch-heavy: imported only once the plugin is active
    from diagfuzz.execution.journal import JournaledRunner
    from diagfuzz.harness.findings import Finding
    from diagfuzz.harness.shard import Shard

#: The fixture the suite's shard tests take; the plugin parametrizes it with shard indices.
SHARD_FIXTURE = "diagfuzz_shard"
_PLUGIN_NAMES = ("diagfuzz", "diagfuzz.harness.plugin")
_PLAN_KEY = "diagfuzz"
_SHARD = pytest.StashKey["Shard"]()


# ============================================================================================
# Both sides
# ============================================================================================

def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("diagfuzz", "diagfuzz fuzzing (active with -p diagfuzz)")
    group.addoption("--impl", dest="diagfuzz_impl", metavar="MODULE:ATTR", default=None,
                    help="implementation under test: MODULE:ATTR or path/to/file.py:ATTR, "
                         "imported from the current directory and pytest's root too "
                         "(default diagfuzz.impl:triton_aten)")
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
    group.addoption("--diagfuzz-ops", default=None, metavar="OP[,OP]",
                    help=f"fuzz only these ops ({', '.join(op_names())}; default every "
                         "op the impl provides)")
    group.addoption("--diagfuzz-streams", default=None, metavar="KIND[,KIND]",
                    help="valid, invalid: which streams run (default both)")
    group.addoption("--diagfuzz-dtypes", default=None, metavar="DTYPE[,DTYPE]",
                    help="draw only these dtypes (within what the impl declares)")
    group.addoption("--diagfuzz-ranks", default=None, metavar="N|LO-HI",
                    help="draw only these ranks (default 2-8)")
    group.addoption("--diagfuzz-layouts", default=None, metavar="KIND[,KIND]",
                    help="draw only these layout kinds (contiguous, permuted, "
                         "channels_last, sliced, offset, expanded)")
    group.addoption("--diagfuzz-strict", action="store_true", default=False,
                    help="ignore the impl's capability declarations (unsupported Cases "
                         "are judged) and demand TypeError, ValueError or RuntimeError for "
                         "binding-level invalid Cases")
    group.addoption("--diagfuzz-max-seconds", type=float, default=None, metavar="S",
                    help="a wall-clock cap: shards draw for 60%% of S and shrink until "
                         "85%%, what still runs is stopped at 95%% and the report holds "
                         "what finished; the run is reported as cut (exit 6 when nothing "
                         "failed)")
    group.addoption("--diagfuzz-tracebacks", action="store_true", default=False,
                    help="show the harness's tracebacks and captured output of failing "
                         "shards (default: one compact block per finding)")
    group.addoption("--diagfuzz-isolation", choices=("auto", "process", "inprocess"),
                    default="auto",
                    help="run Cases in a spawned executor process (crash/hang isolation, "
                         "the default) or in the worker itself")
    group.addoption("--diagfuzz-pipeline", choices=("on", "off"), default="on",
                    help="with process isolation, draw the next Cases while the executor "
                         "checks earlier ones (default on; off: draw, then check, one by one)")
    group.addoption("--diagfuzz-executors", type=int, default=None, metavar="N",
                    help="executor processes each pipelined worker feeds (process "
                         "isolation, --diagfuzz-pipeline on; default: as many as leave a "
                         "CPU to every worker and executor, up to "
                         f"{workers.FANOUT_EXECUTORS}, at least 1): Cases go "
                         "to the one with the fewest in flight, crashes stay per executor")
    group.addoption("--diagfuzz-timeout", type=float, default=None, metavar="SECONDS",
                    help="per-Case timeout before a Case is a hang (process isolation; "
                         "default the executor's)")
    group.addoption("--diagfuzz-root", default=None, metavar="DIR",
                    help="root of per-run, per-worker directories (default <rootdir>/"
                         ".diagfuzz); a run uses DIR/run-<seed>/<worker>")
    group.addoption("--diagfuzz-report", default=None, metavar="PATH",
                    help="write the JSON report (seed, impl, counts, findings) to PATH; "
                         "reproducers go beside it, in PATH's name + -repro/")
    group.addoption("--diagfuzz-workers-per-gpu", type=int, default=None, metavar="N",
                    help="workers per GPU for -n auto on a GPU machine "
                         f"(default min({workers.MAX_WORKERS_PER_GPU}, CPUs per GPU))")
    campaign_options.add_options(group)  # --diagfuzz-partition, --diagfuzz-database


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
    from diagfuzz.harness import profiles

    mark("plugin_configure")
    config.addinivalue_line("markers", "fuzz: Hypothesis fuzz shards of the diagfuzz suite")
    if _is_worker(config):
        plan = RunPlan.from_dict(json.loads(config.workerinput[_PLAN_KEY]))  # type: ignore[attr-defined]
        from diagfuzz.core.roots import use_roots

        use_roots(plan.impl_path)  # before the executors start: they inherit sys.path
        # Next: the session launches the executors, which then start beside this worker.
        session = ShardSession(config, plan)
        profiles.register()
        config.pluginmanager.register(session, "diagfuzz-shards")
        return
    profiles.register()
    n_workers = (len(workers.pin_specs(config.getoption("tx"), []))
                 if _distributed(config) else 1)
    plan = planning.resolve_plan(config, n_workers)
    report = planning.check_output_path("--diagfuzz-report",
                                        config.getoption("diagfuzz_report"))
    planning.check_output_path("--junitxml", getattr(config.option, "xmlpath", None))
    config.pluginmanager.register(Reporter(config, plan, report), "diagfuzz-reporter")
    if _distributed(config):
        config.option.tx = workers.pin_specs(config.getoption("tx"), _gpus())
        config.pluginmanager.register(RunController(plan), "diagfuzz-controller")
        mark("planned")
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

class RunController:
    """xdist controller: ships the plan to every worker, and names a dead worker's Case."""

    def __init__(self, plan: RunPlan) -> None:
        self.plan = plan

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        # As JSON: execnet's serialiser refuses integers beyond 32 bits in some places.
        node.workerinput[_PLAN_KEY] = json.dumps(self.plan.to_dict())

    @pytest.hookimpl(optionalhook=True)
    def pytest_handlecrashitem(self, crashitem: str, report: pytest.TestReport,
                               sched: Any) -> None:
        """Replace xdist's bare "worker crashed" with the Case the worker's journal names."""
        from diagfuzz.core.verdict import Verdict
        from diagfuzz.execution.crash import attribute_crash
        from diagfuzz.execution.journal import journal_path, last_unfinished
        from diagfuzz.harness.findings import Finding

        worker = report.node.gateway.id  # type: ignore[attr-defined]
        journal_dir = self.plan.journal_dir
        report.longrepr = attribute_crash(journal_dir, worker, crashitem)
        found = last_unfinished(journal_path(journal_dir, worker))
        verdict = Verdict("crash", "worker", f"worker {worker} died running this Case",
                          found[0] if found else None)
        report.diagfuzz = json.dumps({  # type: ignore[attr-defined]
            "tally": {}, "findings": [Finding.of(verdict, crashitem).to_dict()]})


class Reporter:
    """Aggregates every shard item's counts and findings; prints and writes the report."""

    def __init__(self, config: pytest.Config, plan: RunPlan, report: Path | None) -> None:
        from diagfuzz.harness.report import Pace, Tally

        self.config = config
        self.plan = plan
        self.tally = Tally()
        self.findings: list[Finding] = []
        self.shard_findings = 0  # findings as the shards reported them, before merging
        self.started = time.monotonic()
        self.report_path = report
        self.written: Path | None = None
        self.write_error = ""
        self.pace = Pace()
        self.cut_shards = 0
        self.shrink_checks = 0
        self.exitstatus = 0
        self._printer: Any = None
        #: Why the run was stopped before it finished ('' when it was not): SIGTERM,
        #: SIGINT, or --diagfuzz-max-seconds (the controller's hard stop).
        self.stopped = ""
        self.cases_seen = 0  # Cases the workers explored, finished shards or not
        self._watchdog: threading.Timer | None = None
        from diagfuzz.campaign.report import CampaignTally

        self.campaign = CampaignTally(plan)  # partition, shared database (diagfuzz.campaign)

    def pytest_report_header(self) -> list[str]:
        return [line for line in (self.plan.describe(), planning.root_warning(self.config))
                if line]

    def pytest_sessionstart(self) -> None:
        mark("session_start")
        self._stop_on_signals()
        if _distributed(self.config):  # a worker reports items only when they end
            from diagfuzz.harness.progress import Printer

            self._printer = Printer(Path(self.plan.run_dir), self.plan.total)
            self._printer.start()

    def _stop_on_signals(self) -> None:
        """SIGTERM stops the run as Ctrl-C does (pytest then finishes the session, and this
        reporter writes what finished); the time cap's hard stop does the same just before
        the cap. Only in the main thread, and only where SIGTERM has its default action."""
        if threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            def on_sigterm(_signum: int, _frame: Any) -> None:
                if not self.stopped:
                    self.stopped = "SIGTERM"
                    raise KeyboardInterrupt("diagfuzz: stopped by SIGTERM")
            signal.signal(signal.SIGTERM, on_sigterm)
        if self.plan.stop_at is not None and self.plan.max_seconds:
            started = self.plan.stop_at - self.plan.max_seconds
            left = started + HARD_SHARE * self.plan.max_seconds - time.time()

            def hard_stop() -> None:
                if not self.stopped:
                    self.stopped = "--diagfuzz-max-seconds"
                    _thread.interrupt_main()
            self._watchdog = threading.Timer(max(0.0, left), hard_stop)
            self._watchdog.daemon = True
            self._watchdog.start()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        from diagfuzz.harness.findings import Finding
        from diagfuzz.harness.report import Tally

        raw = getattr(report, "diagfuzz", None)
        payload = json.loads(raw) if isinstance(raw, str) else raw
        if payload is not None:
            shard = Tally.from_dict(payload["tally"])
            if payload.get("gpu"):
                shard.on_gpu(payload["gpu"])
            self.tally.merge(shard)
            if "shard_s" in payload:
                self.pace.add(payload["worker"], shard.total, payload["shard_s"],
                              payload.get("gpu"))
            self.cut_shards += bool(payload.get("cut"))
            self.shrink_checks += int(payload.get("shrink_checks", 0))
            self.campaign.add(payload)
            self.findings += [Finding.from_dict(f) for f in payload["findings"]]
            if payload["findings"]:
                return
        if report.failed and _is_shard_id(report.nodeid) and (
                payload is None or report.when == "call"):
            # A worker that died mid-item (xdist reports when="???"), or the harness raised
            # outside any Case: keep it, with what pytest knows.
            self.findings.append(_unattributed(report))

    def header(self) -> dict[str, Any]:
        """The run description at the top of the JSON report."""
        duration = time.monotonic() - self.started
        return {
            **self.plan.to_dict(),
            "exit_status": self.exitstatus,
            "duration_s": round(duration, 3),
            "cut": self.cut_shards > 0 or self.stopped.endswith("max-seconds"),
            "stopped": self.stopped,
            "cases_seen": max(self.cases_seen, self.tally.total),
            "shrink_checks": self.shrink_checks,
            "pace": self.pace.to_dict(duration),
            **self.campaign.header(),
        }

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        from diagfuzz.harness.findings import merge_findings
        from diagfuzz.harness.report import report_data

        mark("session_finish")
        if self._watchdog is not None:
            self._watchdog.cancel()
        if self._printer is not None:
            self._printer.stop()
        if int(exitstatus) == pytest.ExitCode.INTERRUPTED:
            self.stopped = self.stopped or "SIGINT"
            self._add_unfinished()
        self.campaign.keep_shard_findings(self.findings)  # a partition's, for diagfuzz merge
        self.shard_findings = len(self.findings)  # pytest's per-shard lines count these
        self.findings = merge_findings(self.findings)
        if self.stopped:
            session.exitstatus = (ExitCode.FAILURE if self.findings else
                                  ExitCode.CUT if self.stopped.endswith("max-seconds")
                                  else ExitCode.STOPPED)
        elif self.cut_shards and int(exitstatus) == 0:
            session.exitstatus = planning.EXIT_CUT
        self.exitstatus = int(session.exitstatus)
        self._write_reproducers()
        data = report_data(self.header(), self.tally, self.findings)
        self.written = self._write_report(data)
        self._keep_runs()
        mark("report_written")

    def _keep_runs(self) -> None:
        """``latest`` names this run's directory; the oldest runs beyond the newest
        ``rundirs.keep()`` are removed, only now that this one has written its report."""
        from diagfuzz.core import rundirs

        run_dir = Path(self.plan.run_dir)
        if not run_dir.is_dir():
            return
        with contextlib.suppress(OSError):
            rundirs.point_latest(run_dir)
            rundirs.prune(run_dir.parent, protect=run_dir)

    def _add_unfinished(self) -> None:
        """A stopped run: the findings of shards that did not finish, from the workers'
        progress files (their first failing Case each, not shrunk)."""
        from diagfuzz.harness.findings import Finding
        from diagfuzz.harness.progress import read_all

        counts = read_all(Path(self.plan.run_dir))
        self.cases_seen = int(counts["cases"])
        known = {f.signature for f in self.findings}
        for data in counts["findings"]:
            finding = Finding.from_dict(data)
            if finding.signature not in known:
                known.add(finding.signature)
                self.findings.append(finding)

    def _repro_dir(self) -> Path:
        """``<report>-repro/`` beside the report, else ``<run dir>/repro/``."""
        if self.report_path is not None:
            return self.report_path.with_name(self.report_path.stem + "-repro")
        return Path(self.plan.run_dir) / "repro"

    def _write_reproducers(self) -> None:
        """A reproducer per finding with a Case, in a directory of this run's alone."""
        from diagfuzz.harness import reproducers as repro

        if not self.findings:
            return
        directory = self._repro_dir()
        try:
            directory.mkdir(parents=True, exist_ok=True)
            for old in directory.glob("repro_*.py"):
                old.unlink()
            for finding in self.findings:
                verdict = finding.as_verdict()
                if verdict is None or verdict.case is None:
                    continue
                finding.reproducer = str(repro.write_reproducer(
                    verdict.case, directory, impl=self.plan.impl,
                    device=self.plan.device or planning.device(),
                    timeout=self.plan.timeout or _default_timeout(), verdict=verdict,
                    impl_path=self.plan.impl_path, strict=self.plan.strict))
        except OSError as exc:
            self.write_error = f"could not write reproducers in {directory}: {exc}"

    def _write_report(self, data: dict[str, Any]) -> Path | None:
        """Write the JSON report; if its path fails now, a fallback that the summary names."""
        from diagfuzz.harness.report import write_json

        target = self.report_path
        if target is None:
            return None
        try:
            write_json(target, data)
            return target
        except OSError as exc:
            fallback = Path(self.plan.run_dir) / "report.json"
            self.write_error = f"could not write the report to {target} ({exc})"
            try:
                write_json(fallback, data)
            except OSError as again:
                self.write_error += f"; nor to {fallback} ({again})"
                return None
            self.write_error += f"; written to {fallback} instead"
            return fallback

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        from diagfuzz.harness.findings import block
        from diagfuzz.harness.report import format_table

        write = terminalreporter.write_line
        n = len(self.findings)
        merged = (f"{self.shard_findings} shard findings merged by signature; "
                  if self.shard_findings > n else "")
        title = (f"diagfuzz: {n} finding{'' if n == 1 else 's'} "
                 f"({self.tally.failing} failing Cases of {self.tally.total}; {merged}"
                 f"seed {self.plan.seed}, impl {self.plan.impl})")
        terminalreporter.write_sep("=", title)
        for i, finding in enumerate(self.findings, 1):
            command = f"python {finding.reproducer}" if finding.reproducer else None
            for line in block(finding, i, n, command):
                write(line)
            write("")
        for line in format_table(self.tally):
            write(line)
        write(self.pace.summary(time.monotonic() - self.started))
        if self.stopped.endswith("max-seconds"):
            write(f"cut: --diagfuzz-max-seconds {self.plan.max_seconds:g} ended the run at "
                  f"{HARD_SHARE:.0%} of its time, {self.cases_seen:,} Cases explored; the "
                  "findings of shards that did not finish are their first failing Case")
        elif self.stopped:
            write(f"stopped: {self.stopped} after {time.monotonic() - self.started:.1f} s, "
                  f"{self.cases_seen:,} Cases explored; the findings of shards that did not "
                  "finish are their first failing Case, not shrunk")
        if self.cut_shards:
            write(f"cut: --diagfuzz-max-seconds {self.plan.max_seconds:g} ended "
                  f"{self.cut_shards} shard(s) before their budget (exit "
                  f"{planning.EXIT_CUT} when nothing failed)")
        for line in self.campaign.lines():
            write(line)
        write(f"rerun: --diagfuzz-seed {self.plan.seed}")
        if self.written is not None:
            write(f"report: {self.written}")
        if self.write_error:
            write(f"diagfuzz: {self.write_error}")
        mark("summary_written")


def _default_timeout() -> float:
    from diagfuzz.execution.parent import default_timeout

    return default_timeout()


def _unattributed(report: pytest.TestReport) -> Finding:
    """A failed shard item with no finding of its own: a dead worker or a harness fault."""
    from diagfuzz.core.signature import Signature
    from diagfuzz.harness.findings import Finding

    kind = "crash" if report.when == "???" else "harness-error"
    check = "worker" if kind == "crash" else "harness"
    data: dict[str, Any] = {"kind": kind, "check": check,
                            "message": _tail(report.longreprtext), "case": None, "details": {}}
    return Finding(Signature("", kind, check), data, test_ids=[report.nodeid])


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
        if (plan.isolation == "process" and plan.device is not None
                and not config.getoption("collectonly", False)):
            self.launch_executors()

    def launch_executors(self) -> None:
        """Spawn this worker's executors now, before it imports torch and collects: their
        start-up (torch, CUDA, warm-up) overlaps the worker's own. A launch that fails is
        found again, and reported, when the first shard starts them."""
        with contextlib.suppress(Exception):
            self._inner = make_executors(self.plan, self.worker_id,
                                         self.plan.device or planning.device())
            self._inner.launch()
            mark("executors_launched")

    # --- collection -------------------------------------------------------------------
    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        if SHARD_FIXTURE in metafunc.fixturenames:
            metafunc.parametrize(SHARD_FIXTURE, range(self.plan.shards), indirect=True,
                                 ids=[f"shard{i}" for i in range(self.plan.shards)])

    def pytest_collection_modifyitems(self, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        """--diagfuzz-partition: this partition's shard items only (diagfuzz.campaign)."""
        from diagfuzz.campaign.partition import deselect

        deselect(self.plan, config, items, SHARD_FIXTURE)

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
        item.stash[_SHARD] = shard
        if request.function.__name__ not in self.plan.skipped:
            self.runner.test_id = item.nodeid  # what the journal names for its Cases
            # Executor start-up in the set-up, not in the shard's time (the report's pace).
            # If it fails, the first Case starts it again and reports why.
            with contextlib.suppress(Exception):
                self.runner.start()
            mark("executors_ready")
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
        shard = _SHARD in item.stash
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
        shard = item.stash.get(_SHARD, None)
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
    return ProcessRunner(plan.impl, device, plan.timeout, workdir=plan.worker_dir(worker_id),
                         strict=plan.strict)


def _fanout(plan: RunPlan, worker_id: str, process_runner: Any, device: str) -> Any:
    """``plan.executors`` executors for one worker, each logging to its own
    ``executor-<i>.log`` in the worker dir, so a crash's stderr tail is its executor's."""
    from diagfuzz.execution.fanout import FanoutRunner

    workdir = plan.worker_dir(worker_id)
    runners = []
    for index in range(plan.executors):
        runner = process_runner(plan.impl, device, plan.timeout, workdir=workdir,
                                strict=plan.strict)
        runner.log = workdir / f"executor-{index}.log"
        runners.append(runner)
    return FanoutRunner(runners)
