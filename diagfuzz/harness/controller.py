"""The controller side of the fuzz plugin: the plan shipped to every worker, a dead worker's
Case named from its journal, and the ``Reporter``, which aggregates the workers' counts and
findings, prints the blocks and the coverage table, writes the report and reproducers, and
on SIGTERM or the time cap's hard stop writes what finished.

Without xdist one process plays both sides (``diagfuzz.harness.worker``).
"""

from __future__ import annotations

import _thread
import contextlib
import json
import signal
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from diagfuzz.core.exits import ExitCode
from diagfuzz.execution.stopbound import StopBound
from diagfuzz.execution.timeline import mark
from diagfuzz.harness import planning
from diagfuzz.harness.sharding import HARD_SHARE, RunPlan

if TYPE_CHECKING:  # torch-heavy: imported only once the plugin is active
    from diagfuzz.harness.findings import Finding

#: The key of the plan in each xdist worker's ``workerinput``.
PLAN_KEY = "diagfuzz"


def distributed(config: pytest.Config) -> bool:
    """This process is an xdist controller that will start workers."""
    return (not hasattr(config, "workerinput") and config.getoption("dist", "no") != "no"
            and bool(config.getoption("tx", None)))


class RunController:
    """xdist controller: ships the plan to every worker, and names a dead worker's Case."""

    def __init__(self, plan: RunPlan) -> None:
        self.plan = plan

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        # As JSON: execnet's serialiser refuses integers beyond 32 bits in some places.
        node.workerinput[PLAN_KEY] = json.dumps(self.plan.to_dict())

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
        #: Whether the hard stop may interrupt the main thread now: only between the
        #: session's start hooks and its finish (an interrupt inside pytest's own
        #: sessionstart ends pytest with no report; one inside the finish breaks the
        #: report). A hard stop due before is held until collection starts.
        self._interruptible = False
        self._hard_stop_due = False
        self._hard_stop_lock = threading.Lock()
        #: A signal arms it: past its bound the run writes what it holds and exits.
        self.bound = StopBound(self._write_held)
        #: The history check's classifier while it runs (``diagfuzz.harness.history_check``):
        #: a signal then stops it, and the finish goes on.
        self._checker: Any = None
        self._write_lock = threading.Lock()
        #: A worker found the impl unusable: pytest reports it; this run writes nothing.
        self.usage_error = False
        #: The workers that have collected (``pytest_xdist_node_collection_finished``).
        self._collected: set[str] = set()
        from diagfuzz.campaign.report import CampaignTally

        self.campaign = CampaignTally(plan)  # partition, shared database (diagfuzz.campaign)

    def pytest_report_header(self) -> list[str]:
        return [line for line in (self.plan.describe(), planning.root_warning(self.config),
                                  *(f"diagfuzz: {r}" for r in self.plan.registrations))
                if line]

    @pytest.hookimpl(optionalhook=True, trylast=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: Any) -> None:
        """The plan as the first worker to collect completed it, and once every worker has
        collected, the findings' modules (torch) imported in a thread: off the start-up's
        path, and loaded before a stop has to write findings within its bound."""
        self._collected.add(str(node.gateway.id))
        self._take_plan(node)
        if len(self._collected) >= max(1, self.plan.workers):
            _import_findings_now()

    def _take_plan(self, node: Any) -> None:
        """The plan as ``node`` completed it (what the impl provides and declares): said
        now, before any shard runs, and what the report describes. A worker that found
        the impl unusable ends the run with pytest's usage error."""
        if self.plan.resolved:
            return
        try:
            resolved = planning.read_resolved(self.plan.worker_dir(node.gateway.id))
        except pytest.UsageError:
            self.usage_error = True
            raise
        if resolved is None:
            return
        self.plan = resolved
        self.campaign.plan = resolved
        if self._printer is not None:
            self._printer.budget = resolved.total
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        if terminal is not None:
            for line in (resolved.describe().splitlines()
                         + [f"diagfuzz: {r}" for r in resolved.registrations]):
                terminal.write_line(line)

    def pytest_sessionstart(self) -> None:
        mark("session_start")
        self._stop_on_signals()
        if distributed(self.config):  # a worker reports items only when they end
            from diagfuzz.harness.progress import Printer

            self._printer = Printer(Path(self.plan.run_dir), self.plan.total)
            self._printer.start()

    def _tell_workers(self) -> None:
        """Ask the workers to end their shard now and start no other
        (``RunPlan.stop_file``); best effort: the StopBound still ends what does not."""
        with contextlib.suppress(OSError):
            self.plan.stop_file.parent.mkdir(parents=True, exist_ok=True)
            self.plan.stop_file.touch()

    def _stop_on_signals(self) -> None:
        """SIGTERM stops the run as Ctrl-C does (pytest then finishes the session, and this
        reporter writes what finished); the time cap's hard stop does the same just before
        the cap. Only in the main thread, and only where SIGTERM has its default action."""
        if threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            def on_sigterm(_signum: int, _frame: Any) -> None:
                self.bound.arm()
                self._tell_workers()
                _import_findings_now()
                if self._checker is not None:  # in the finish: the check ends, the rest runs
                    self.stopped = self.stopped or "SIGTERM"
                    self._checker.stop()
                    return
                if not self.stopped:
                    self.stopped = "SIGTERM"
                    raise KeyboardInterrupt("diagfuzz: stopped by SIGTERM")
            signal.signal(signal.SIGTERM, on_sigterm)
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            def on_sigint(signum: int, frame: Any) -> None:
                if self._hard_stop_due and not self._interruptible:
                    return  # the hard stop's interrupt, arriving once the finish began
                if self._checker is not None:
                    self.bound.arm()
                    self.stopped = self.stopped or "SIGINT"
                    self._checker.stop()
                    return
                self.bound.arm()
                self._tell_workers()
                _import_findings_now()
                signal.default_int_handler(signum, frame)
            signal.signal(signal.SIGINT, on_sigint)
        if self.plan.stop_at is not None and self.plan.max_seconds:
            started = self.plan.stop_at - self.plan.max_seconds
            left = started + HARD_SHARE * self.plan.max_seconds - time.time()

            def hard_stop() -> None:
                if not self.stopped:
                    self.stopped = "--diagfuzz-max-seconds"
                    self._tell_workers()
                    _import_findings_now()
                    with self._hard_stop_lock:
                        self._hard_stop_due = True
                        if self._interruptible:
                            _thread.interrupt_main()
            self._watchdog = threading.Timer(max(0.0, left), hard_stop)
            self._watchdog.daemon = True
            self._watchdog.start()

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection(self) -> None:
        """From here to the finish the hard stop interrupts the main thread; one already
        due (a start-up that took the cap's time) interrupts now, so the run ends as cut."""
        with self._hard_stop_lock:
            self._interruptible = True
            if self._hard_stop_due:
                raise KeyboardInterrupt("diagfuzz: --diagfuzz-max-seconds")

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
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
            if payload["findings"]:  # (the Case model imports torch: only for findings)
                from diagfuzz.harness.findings import Finding

                self.findings += [Finding.from_dict(f) for f in payload["findings"]]
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
        from diagfuzz.harness.report import report_data

        mark("session_finish")
        with self._hard_stop_lock:
            self._interruptible = False
        if self._watchdog is not None:
            self._watchdog.cancel()
        if self._printer is not None:
            self._printer.stop()
        if self.usage_error:
            return
        if int(exitstatus) == pytest.ExitCode.INTERRUPTED:
            self.stopped = self.stopped or "SIGINT"
            self._tell_workers()
            self._add_unfinished()
        self.campaign.keep_shard_findings(self.findings)  # a partition's, for diagfuzz merge
        self.shard_findings = len(self.findings)  # pytest's per-shard lines count these
        self.findings = _merged(self.findings)
        if self.stopped:
            session.exitstatus = self._stop_code(self.findings)
        elif self.cut_shards and int(exitstatus) == 0:
            session.exitstatus = planning.EXIT_CUT
        self.exitstatus = int(session.exitstatus)
        if not self.stopped:
            self._check_history()
        with self._write_lock:
            self.bound.written(self.exitstatus)  # past the bound: exit with this code
            self._write_reproducers()
            data = report_data(self.header(), self.tally, self.findings)
            self.written = self._write_report(data)
            if self.stopped:  # printed by the bound's expiry if the summary is not reached
                self.bound.written(self.exitstatus,
                                   f"{self._stopped_line()}; report: {self.written}")
        self._keep_runs()
        mark("report_written")

    def _stop_code(self, findings: list[Any]) -> ExitCode:
        """A stopped run's code: 1 with findings, else 6 for the time cap, 7 for a signal."""
        if findings:
            return ExitCode.FAILURE
        return ExitCode.CUT if self.stopped.endswith("max-seconds") else ExitCode.STOPPED

    def _stopped_line(self) -> str:
        return (f"stopped: {self.stopped} after {time.monotonic() - self.started:.1f} s, "
                f"{self.cases_seen:,} Cases explored; the findings of shards that did not "
                f"finish are their first failing Case, not shrunk")

    def _write_held(self) -> int:
        """The StopBound's writer (the session never reached its finish): the report of
        what the workers' progress files and the finished shards hold; its exit code.

        It imports the findings' modules (torch) only where it has findings to convert,
        and then waits for them at most ``HELD_IMPORT_WAIT``: on a loaded machine their
        import, begun once the workers collected, can outlast the writer's bound, and the
        progress files' findings are written as they are rather than lost."""
        from diagfuzz.harness.progress import read_all
        from diagfuzz.harness.report import report_data

        with self._write_lock:
            self.stopped = self.stopped or "SIGINT"
            counts = read_all(Path(self.plan.run_dir))
            self.cases_seen = int(counts["cases"])
            findings: list[Any]
            if counts["findings"] and not _findings_imported(HELD_IMPORT_WAIT):
                findings = [*self.findings, *_unconverted(counts["findings"], self.findings)]
            else:  # (Finding objects held: their module is imported)
                self._add_unfinished(counts["findings"])
                if self.findings:
                    from diagfuzz.harness.findings import merge_findings

                    self.findings = merge_findings(self.findings)
                findings = self.findings
            self.exitstatus = self._stop_code(findings)
            self.written = self._write_report(report_data(self.header(), self.tally,
                                                          findings))
            why = (f"cut: --diagfuzz-max-seconds {self.plan.max_seconds:g} ended the run"
                   if self.stopped.endswith("max-seconds") else f"stopped: {self.stopped}")
            print(f"{why} after {time.monotonic() - self.started:.1f} s, "
                  f"{self.cases_seen:,} Cases explored; not ended {self.bound.bound:g} s "
                  f"after the signal: every process it started killed, "
                  f"{len(findings)} finding(s) kept (unfinished shards: their first "
                  f"failing Case, not shrunk); report: {self.written}", flush=True)
            return int(self.exitstatus)

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

    def _add_unfinished(self, unfinished: list[dict[str, Any]] | None = None) -> None:
        """A stopped run: the findings of shards that did not finish, from the workers'
        progress files (their first failing Case each, not shrunk); none: no import."""
        from diagfuzz.harness.progress import read_all

        if unfinished is None:
            counts = read_all(Path(self.plan.run_dir))
            self.cases_seen = int(counts["cases"])
            unfinished = list(counts["findings"])
        if not unfinished:
            return
        from diagfuzz.harness.findings import Finding

        known = {f.signature for f in self.findings}
        for data in unfinished:
            finding = Finding.from_dict(data)
            if finding.signature not in known:
                known.add(finding.signature)
                self.findings.append(finding)

    def _repro_dir(self) -> Path:
        """``<report>-repro/`` beside the report, else ``<run dir>/repro/``."""
        if self.report_path is not None:
            return self.report_path.with_name(self.report_path.stem + "-repro")
        return Path(self.plan.run_dir) / "repro"

    def _check_history(self) -> None:
        """Findings that pass alone get the earlier calls they need, for their reproducers
        (``diagfuzz.harness.history_check``), unless --diagfuzz-history-check is off."""
        if not self.findings or self.config.getoption("diagfuzz_history_check") == "off":
            return
        from diagfuzz.execution import forkserver
        from diagfuzz.harness import history_check

        forkserver.use(self.plan.fork_server)
        rerun = history_check.rerun_of(
            self.plan.impl, self.plan.device or planning.device(),
            self.plan.timeout or _default_timeout(), self.plan.strict, self.plan.run_dir)
        self._checker = history_check.checker(rerun)
        try:
            history_check.check_history(self.findings, self._checker,
                                        history_check.check_seconds(self.plan.stop_at))
        finally:
            self._checker = None

    def _write_reproducers(self) -> None:
        """A reproducer per finding with a Case, in a directory of this run's alone."""
        if not self.findings:
            return
        from diagfuzz.harness import history_check
        from diagfuzz.harness import reproducers as repro

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
                    timeout=repro.reproducer_timeout(
                        verdict, self.plan.timeout or _default_timeout()), verdict=verdict,
                    impl_path=self.plan.impl_path, strict=self.plan.strict,
                    **history_check.sequence_arguments(finding)).resolve())
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
        from diagfuzz.harness.report import format_table

        if self.usage_error:
            return
        write = terminalreporter.write_line
        n = len(self.findings)
        merged = (f"{self.shard_findings} shard findings merged by signature; "
                  if self.shard_findings > n else "")
        title = (f"diagfuzz: {n} finding{'' if n == 1 else 's'} "
                 f"({self.tally.failing} failing Cases of {self.tally.total}; {merged}"
                 f"seed {self.plan.seed}, impl {self.plan.impl})")
        terminalreporter.write_sep("=", title)
        for line in self.plan.registrations:
            write(f"diagfuzz: {line}")
        for i, finding in enumerate(self.findings, 1):
            from diagfuzz.harness.findings import block

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
            write(self._stopped_line())
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
        self.bound.summary = ""  # printed: an expiry later in teardown need not say it again
        mark("summary_written")


def _import_findings_now() -> None:
    """Import the findings' modules (torch, the Case model) in a thread of their own, once:
    a stopped run writes its findings, and the controller, which plans without torch, would
    otherwise import them only then, seconds inside its stop bound (more than it has on a
    loaded machine)."""
    global _importing
    if _importing is None and "diagfuzz.harness.findings" not in sys.modules:
        def load() -> None:
            with contextlib.suppress(Exception):
                import diagfuzz.harness.findings
                import diagfuzz.harness.reproducers  # noqa: F401

        _importing = threading.Thread(target=load, name="diagfuzz-stop-imports", daemon=True)
        _importing.start()


#: The thread importing the findings' modules after a stop (``_import_findings_now``).
_importing: threading.Thread | None = None
#: Seconds a held report's writer waits for that import (of the writer's WRITE_BOUND).
HELD_IMPORT_WAIT = 1.0


def _findings_imported(wait: float) -> bool:
    """Whether the findings' modules are imported, waiting ``wait`` seconds at most for
    the thread importing them; no thread yet starts one (an import begun here, outside
    it, could hold the writer past its bound)."""
    _import_findings_now()
    if _importing is not None:
        _importing.join(wait)
        if _importing.is_alive():
            return False
    return "diagfuzz.harness.findings" in sys.modules


class _Unconverted:
    """A progress file's finding, written as the worker wrote it (``Finding.to_dict``):
    what a held report keeps where the findings' modules are not imported in time."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def to_dict(self) -> dict[str, Any]:
        return self.data


def _unconverted(unfinished: list[dict[str, Any]], held: list[Finding]) -> list[_Unconverted]:
    """``unfinished`` as ``_Unconverted``, one per signature not already ``held``."""
    known: list[Any] = [f.signature.to_dict() for f in held]
    kept: list[_Unconverted] = []
    for data in unfinished:
        if data.get("signature") not in known:
            known.append(data.get("signature"))
            kept.append(_Unconverted(data))
    return kept


def _merged(findings: list[Finding]) -> list[Finding]:
    """``merge_findings``, imported only where there are findings (it imports torch)."""
    if not findings:
        return []
    from diagfuzz.harness.findings import merge_findings

    return merge_findings(findings)


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
