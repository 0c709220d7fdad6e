"""The gate's stages: what each one runs, and the finding and stage records they give.

Stages, in order: the regression corpus, the covering Cases (every valid 3-way combination
of each op's factor model: ``diagfuzz.strategies.covering``), the fuzz suite (pytest +
xdist under the derandomized ``gate`` Hypothesis profile, in a subprocess), fixed
error-parity Cases, a torch.compile parity sample, PyTorch's OpInfo samples, and with
``--huge`` the huge tier (Cases past 2**31 elements, GPU only). ``run.py`` runs them,
merges their findings by cause and classifies each cause once.
"""

from __future__ import annotations

import bisect
import contextlib
import json
import os
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from diagfuzz.core import corpus
from diagfuzz.core.case import Case
from diagfuzz.core.signature import Signature, cause_axes, keyed_on_registration, signature_of
from diagfuzz.core.verdict import KINDS, Verdict
from diagfuzz.execution.classification import Classification
from diagfuzz.execution.fanout import FanoutRunner
from diagfuzz.execution.parent import ExecutorError, ProcessRunner
from diagfuzz.gate import suite, unfinished
from diagfuzz.gate.options import Options
from diagfuzz.gate.pool import Router, auto_stage_executors
from diagfuzz.gate.progress import GateProgress
from diagfuzz.gate.suite import (  # re-exported: the suite's process is suite.py's
    GATE_MAX_WORKERS_PER_GPU as GATE_MAX_WORKERS_PER_GPU,
)
from diagfuzz.gate.suite import SUITE_SHARE as SUITE_SHARE
from diagfuzz.gate.suite import gate_workers_per_gpu as gate_workers_per_gpu
from diagfuzz.gate.suite import suite_command as suite_command
from diagfuzz.gate.suite import suite_environment as suite_environment
from diagfuzz.gate.suite import suite_root as suite_root
from diagfuzz.harness.findings import Finding as SuiteFinding
from diagfuzz.harness.findings import add_tallies, merge_examples, own_example
from diagfuzz.specs import all_specs

#: The reference impl a compile-parity failure is checked against before it counts.
BASELINE_IMPL = "diagfuzz.impl:aten"
#: Seconds a torch.compile parity Case may take (inductor compiles: slow on a CPU).
COMPILE_TIMEOUT = 300.0
#: The OpInfo stage's name (reports, progress lines, JUnit).
OPINFO_STAGE = "opinfo samples"
#: The covering stage's name.
COVERING_STAGE = "covering array"
#: The torch.compile parity stage's name.
COMPILE_STAGE = "torch.compile parity"


@dataclass
class Finding:
    """One cause found by one or more stages, and what the gate learnt about it.

    ``stage`` is the stage of the representative Case; ``stages`` counts failing Cases per
    stage, ``dtypes`` per dtype and ``classes`` per other axis (invalid class, aten's
    exception type: ``diagfuzz.core.signature.cause_axes``).
    """

    stage: str
    verdict: Verdict
    oracle: str = "check"
    test_id: str = ""
    classification: Classification | None = None
    reproducer: Path | None = None
    count: int = 1
    dtypes: dict[str, int] = field(default_factory=dict)
    shrunk: bool = False
    flaky: bool = False
    signature: Signature | None = None
    classes: dict[str, dict[str, int]] = field(default_factory=dict)
    stages: dict[str, int] = field(default_factory=dict)
    #: Not classified because the gate was stopped or cut before it could be.
    cut: bool = False
    #: A wrong result's representative per symptom (``harness.findings.Finding.examples``).
    examples: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.signature is None:
            signature = signature_of(self.verdict)
            # A compile-parity failure is a bug of its own; a dropped gradient is its
            # registration's, whichever stage met it.
            if self.oracle != "check" and not keyed_on_registration(signature):
                signature = Signature(signature.op, signature.kind,
                                      f"{self.oracle} {signature.check}".strip(),
                                      signature.trigger, signature.origin)
            self.signature = signature
        if not self.dtypes and self.verdict.case is not None:
            self.dtypes = {self.verdict.case.dtype: self.count}
        if not self.classes and self.verdict.case is not None:
            axes = cause_axes(self.verdict.case.to_dict(), self.verdict.details)
            self.classes = {axis: {value: self.count} for axis, value in axes.items()}
        if not self.stages:
            self.stages = {self.stage: self.count}
        if not self.examples:
            self.examples = own_example(self.verdict.to_dict(), self.shrunk, self.flaky)

    @property
    def key(self) -> Signature:
        """What makes two findings one cause: their signature."""
        assert self.signature is not None
        return self.signature

    def absorb(self, other: Finding) -> None:
        """Count ``other`` (same cause, maybe another stage) under this finding."""
        self.count += other.count
        self.dtypes = dict(Counter(self.dtypes) + Counter(other.dtypes))
        self.classes = add_tallies(self.classes, other.classes)
        self.stages = dict(Counter(self.stages) + Counter(other.stages))
        self.examples = merge_examples(self.examples, other.examples)


def not_run(stages: list[Stage]) -> list[Stage]:
    """Stages skipped for a reason of this machine (no CUDA, no expecttest), not because
    an option (``--no-...``) or an empty input (``no ...``) asked for it."""
    return [s for s in stages if s.skipped and not s.skipped.startswith(("--", "no "))]


#: The note of a stage a stop or the time cap came before (``Gate.result``).
NEVER_BEGAN = "stopped before it began"


def cut_before_running(stages: list[Stage]) -> list[Stage]:
    """Stages the time cap or a stop ended before they reported a Case (the suite's
    unfinished shards report nothing)."""
    return [s for s in stages if (s.cut or s.stopped) and not s.ran and not s.skipped]


@dataclass
class Stage:
    """One stage's outcome: Cases run, failures, or why it did not run or finish."""

    name: str
    ran: int = 0
    failures: list[Finding] = field(default_factory=list)
    error: str = ""
    skipped: str = ""
    note: str = ""
    seconds: float = 0.0
    unsupported: int = 0
    cut: bool = False
    coverage: dict[str, Counter[str]] = field(default_factory=dict)
    #: Cases planned (0: not known ahead).
    planned: int = 0
    #: Stopped by SIGTERM/SIGINT or the gate's time cap before it finished.
    stopped: bool = False
    #: Executor seconds per part (``diagfuzz.execution.timing``), where it ran executors.
    timing: dict[str, Any] = field(default_factory=dict)
    #: Judged Cases per op as factor-model rows (``diagfuzz.strategies.covering``: the
    #: row's text -> Cases), for the t-way coverage.
    levels: dict[str, Counter[str]] = field(default_factory=dict)
    #: The factor-model rows of the Cases the impl refused as unsupported, by op.
    refused: dict[str, Counter[str]] = field(default_factory=dict)


# --- fixed Cases of the error-parity and torch.compile stages ---------------------------

def error_parity_cases() -> list[Case]:
    """One invalid call per invalid class and op (each op's spec's ``error_cases``): the
    impl must refuse each as aten does."""
    return [case for spec in all_specs() for case in spec.error_cases()]


def compile_cases() -> list[Case]:
    """A small torch.compile parity sample (each op's spec's ``compile_cases``)."""
    return [case for spec in all_specs() for case in spec.compile_cases()]


def fixed(opts: Options, cases: list[Case],
          provided: tuple[str, ...] | None = None) -> list[Case]:
    """The fixed Cases of the ops ``--ops`` leaves in and the impl provides (``provided``,
    where known: as the suite, the gate skips an op the impl lacks rather than counting
    its Cases unsupported)."""
    wanted = {op.strip() for op in opts.ops.split(",")} if opts.ops else None
    return [c for c in cases if (wanted is None or c.op in wanted)
            and (provided is None or c.op in provided)]


# --- coverage ---------------------------------------------------------------------------

def count_case(stage: Stage, case: Case) -> None:
    """Add ``case`` to the stage's per-axis counts, with the fuzz report's classes
    (diagfuzz.harness.report), and to its factor-model rows."""
    from diagfuzz.harness.report import classify as classes_of
    from diagfuzz.harness.report import group_of, levels_row

    coverage = stage.coverage
    coverage.setdefault("group", Counter())[group_of(case)] += 1
    for axis, values in classes_of(case).items():
        coverage.setdefault(axis, Counter()).update(values)
    row = levels_row(case)
    if row:
        stage.levels.setdefault(case.op, Counter())[row] += 1


def _refused(stage: Stage, case: Case) -> None:
    """Add an unsupported ``case``'s factor-model row to the stage's refused rows."""
    from diagfuzz.harness.report import levels_row

    row = levels_row(case)
    if row:
        stage.refused.setdefault(case.op, Counter())[row] += 1


def report_coverage(counts: dict[str, Any]) -> dict[str, Counter[str]]:
    """Per-axis counts from the suite report's ``counts`` ({group: {cases, classes}})."""
    coverage: dict[str, Counter[str]] = {"group": Counter()}
    for group, entry in counts.items():
        if group in ("unsupported_dtypes", "unsupported_out"):  # tallies, not groups
            continue
        coverage["group"][group] += int(entry.get("cases", 0))
        for axis, values in entry.get("classes", {}).items():
            coverage.setdefault(axis, Counter()).update(values)
    return coverage


def report_levels(counts: dict[str, Any]) -> dict[str, Counter[str]]:
    """Factor-model rows per op from the suite report's ``counts``."""
    return {group: Counter(entry["levels"]) for group, entry in counts.items()
            if isinstance(entry, dict) and entry.get("levels")}


# --- stages run by the gate's own executor ----------------------------------------------

@dataclass
class Context:
    """What every stage needs: the options, the progress lines, and whether to stop."""

    opts: Options
    progress: GateProgress
    deadline: float | None = None
    stopping: Callable[[], bool] = lambda: False
    #: Child processes the gate must stop with itself (the suite's pytest).
    children: list[subprocess.Popen[Any]] = field(default_factory=list)
    #: Every stage begun, by name: a stopped gate reports what each one had done.
    stages: dict[str, Stage] = field(default_factory=dict)
    #: The ops the impl provides (known once the gate has loaded it).
    provided: tuple[str, ...] | None = None
    #: ``registration_report`` of the impl (known once the gate has loaded it).
    registrations: dict[str, Any] = field(default_factory=dict)
    #: Per op, the dtypes the impl declares and whether it has ``.out``
    #: (``diagfuzz.core.impl.capabilities``; known once the gate has loaded it).
    capabilities: dict[str, tuple[tuple[str, ...] | None, bool]] = field(
        default_factory=dict)
    #: The OpInfo samples, loading while the stages before theirs run (``preload``).
    opinfo: Future[Any] | None = None
    #: Set once the fuzz suite has ended: its CPUs are free for the fixed stages.
    suite_done: threading.Event = field(default_factory=threading.Event)
    #: The fixed stages' executors once the suite has ended (``pool.grown_stage_executors``),
    #: a new one of the pool's kind, and the runner that grows (not the torch.compile
    #: stage's lane); None: the pool stays as it started.
    grown_executors: int = 0
    new_executor: Callable[[], ProcessRunner] | None = None
    growing: FanoutRunner | None = None
    #: Set once every stage but the sequence search has ended (the suite included): the
    #: search, beside them, then ends too (``diagfuzz.gate.sequences``).
    others_done: threading.Event = field(default_factory=threading.Event)

    def out_of_time(self) -> bool:
        return self.deadline is not None and time.time() >= self.deadline

    def stage(self, name: str) -> Stage:
        """A new stage record, registered so that a stopped gate still reports it."""
        self.stages[name] = Stage(name)
        return self.stages[name]


def run_cases(ctx: Context, stage: Stage, cases: list[Case], runner: FanoutRunner,
              oracle: str, timeout: float | None = None,
              seen: Callable[[Verdict], None] | None = None, spread: bool = True) -> None:
    """Run ``cases`` through the stage executors ``runner``; an oracle exception is an
    infrastructure error. ``seen`` gets every verdict (the huge tier records each Case's
    memory); ``spread`` False keeps every Case on the first executor (one at a time on the
    device: the huge tier's Cases each fill its memory).

    Each Case of one specialisation goes to the same executor (``pool.Router``), submitted
    ahead of its verdict, so each executor judges what is queued in batches. The findings
    are kept in the order of ``cases`` whatever executor answered first, so the first
    Case of a cause, its representative, is the same with any number of executors. A stop
    or ``--max-seconds`` ends submitting; the verdicts already in hand are recorded, the
    Cases still in flight are dropped (the executors are closed) and the stage's note
    says how many of them were judged.
    """
    stage.planned = len(cases)
    if ctx.stopping():  # stopped while the stage loaded its Cases: it never started
        stage.stopped = True
        return
    ctx.progress.begin(stage.name, len(cases))
    router = Router(cases, len(runner.runners) if spread else 1)
    where: dict[int, int] = {}  # ticket -> the Case's index in ``cases``
    order: list[int] = []  # the indices of stage.failures' Cases, ascending

    def record(done: list[tuple[int, Verdict]]) -> None:
        for ticket, verdict in done:
            stage.ran += 1
            if seen is not None:
                seen(verdict)
            stage.unsupported += verdict.unsupported
            if verdict.case is not None and not (verdict.unsupported
                                                 or verdict.details.get("skipped")):
                count_case(stage, verdict.case)  # judged: what it reached counts
            elif verdict.case is not None and verdict.unsupported:
                _refused(stage, verdict.case)
            signature = ""
            if not verdict.ok:
                finding = Finding(stage.name, verdict, oracle)
                at = bisect.bisect(order, where.get(ticket, len(cases)))
                order.insert(at, where.get(ticket, len(cases)))
                stage.failures.insert(at, finding)
                signature = finding.key.describe()
            where.pop(ticket, None)
            ctx.progress.advance(stage.name, 1, signature)

    def end(why: str) -> None:
        record(runner.poll_settled())
        if runner.in_flight:
            runner.close()  # its queue is dropped: a later stage must not meet its verdicts
        stage.note = f"{why} after {stage.ran} of {len(cases)} Cases"

    try:
        while True:
            if ctx.stopping():
                stage.stopped = True
                end("stopped")
                return
            if ctx.out_of_time():
                stage.cut = True
                end("cut by --max-seconds")
                return
            if (spread and runner is ctx.growing and ctx.new_executor is not None
                    and ctx.suite_done.is_set() and len(runner.runners) < ctx.grown_executors):
                runner.add(ctx.new_executor())  # the suite's CPUs are free
                router.add_executor()
                continue
            step = router.next([r.in_flight for r in runner.runners])
            if step is None:
                break
            executor, index = step
            where[runner.submit(cases[index], oracle, timeout, executor)] = index
            record(runner.poll())
        record(runner.drain())
    except ExecutorError as exc:
        with contextlib.suppress(ExecutorError):
            record(runner.poll())  # verdicts settled before the error
        if ctx.stopping():
            stage.stopped = True
            return
        stage.error = f"{exc}"


def corpus_stage(ctx: Context, runner: FanoutRunner) -> Stage:
    """Replay every Case of the regression corpus: first those that fail only after other
    calls, each after its sequence in a fresh executor, then the rest."""
    stage = ctx.stage("corpus replay")
    try:
        entries = corpus.entries(ctx.opts.corpus_dir)
    except ValueError as exc:
        stage.error = str(exc)
        return stage
    if not entries:
        stage.skipped = f"no corpus Cases in {ctx.opts.corpus_dir}"
        return stage
    chained = [e for e in entries if corpus.sequence_of(e)]
    try:
        replayed = replay_sequences(ctx, stage, chained, runner.device)
    except ExecutorError as exc:
        stage.error = f"{exc}"
        return stage
    cases = [e.case for e in entries if not corpus.sequence_of(e)]
    run_cases(ctx, stage, fixed(ctx.opts, cases, ctx.provided), runner, "check")
    stage.planned += replayed
    return stage


def replay_sequences(ctx: Context, stage: Stage, entries: list[corpus.Entry],
                     device: str) -> int:
    """Each entry's Case after the calls it needs (``corpus.sequence_of``), in a fresh
    executor of its own: the state those calls leave is the bug's trigger, so they run
    exactly as the corpus says, never beside other Cases."""
    from diagfuzz.execution.history import Call, replay

    wanted = set(fixed(ctx.opts, [e.case for e in entries], ctx.provided))
    chosen = [e for e in entries if e.case in wanted]
    for i, entry in enumerate(chosen):
        if ctx.stopping():
            stage.stopped = True
            return i
        calls = [Call.from_dict(c) for c in corpus.sequence_of(entry)]
        with ProcessRunner(ctx.opts.impl, device, timeout=ctx.opts.timeout,
                           strict=ctx.opts.strict, learnt=ctx.opts.learnt(),
                           workdir=ctx.opts.run_dir / "corpus-sequences" / str(i)) as fresh:
            verdict, _ = replay(fresh, calls, Call("check", entry.case))
        stage.ran += 1
        if not verdict.ok:
            stage.failures.append(Finding(stage.name, verdict, "check"))
        elif verdict.case is not None and not verdict.unsupported:
            count_case(stage, verdict.case)
    return len(chosen)


def covering_stage(ctx: Context, runner: FanoutRunner) -> Stage:
    """Every op's covering Cases (``diagfuzz.strategies.covering``): each valid 3-way
    combination of its factor model and 4-way combination of its geometric core, made
    into small Cases, judged like the corpus's (within ``--dtypes`` where given)."""
    stage = ctx.stage(COVERING_STAGE)
    if not ctx.opts.covering:
        stage.skipped = "--no-covering"
        return stage
    run_cases(ctx, stage, covering_for(ctx.opts, ctx.provided, ctx.capabilities), runner,
              "check")
    return stage


def covering_for(opts: Options, provided: tuple[str, ...] | None,
                 capabilities: dict[str, tuple[tuple[str, ...] | None, bool]] | None = None
                 ) -> list[Case]:
    """The covering Cases of the ops and dtypes ``opts`` leave in: for each op, of its
    model narrowed to what the impl can take (``capabilities``: the dtype families it
    declares, ``call=out`` only with an ``.out`` method), so that every combination that
    applies to it is reached."""
    from diagfuzz.specs import SPECS
    from diagfuzz.strategies.covering import covering_set, inapplicable

    cases: list[Case] = []
    for op in SPECS:
        dtypes, has_out = (capabilities or {}).get(op, (None, True))
        cases += covering_set(op, drop=inapplicable(op, dtypes, has_out), dtypes=dtypes).cases
    wanted = {d.strip() for d in opts.dtypes.split(",")} if opts.dtypes else None
    return [c for c in fixed(opts, cases, provided) if wanted is None or c.dtype in wanted]


def error_parity_stage(ctx: Context, runner: FanoutRunner) -> Stage:
    """Invalid calls: the impl must refuse them as aten does (``oracles.policy``)."""
    stage = ctx.stage("error parity")
    run_cases(ctx, stage, fixed(ctx.opts, error_parity_cases(), ctx.provided), runner, "check")
    return stage


def compile_stage(ctx: Context, runner: FanoutRunner) -> Stage:
    """torch.compile parity on a small fixed sample (``diagfuzz.oracles.check_compile``).

    A Case that also fails with aten itself (``diagfuzz.impl:aten``, same check) shows a
    difference of torch.compile, not of the impl: it is noted, not counted as a failure.
    """
    stage = ctx.stage(COMPILE_STAGE)
    opts = ctx.opts
    if not opts.compile_sample:
        stage.skipped = "--no-compile"
        return stage
    timeout = max(opts.timeout, COMPILE_TIMEOUT)
    run_cases(ctx, stage, fixed(opts, compile_cases(), ctx.provided), runner, "check_compile",
              timeout)
    if stage.failures and opts.impl != BASELINE_IMPL and not ctx.stopping():
        with ProcessRunner(BASELINE_IMPL, runner.device, timeout=timeout,
                           oracle="check_compile") as baseline:
            kept: list[Finding] = []
            shared: list[Finding] = []
            for finding in stage.failures:
                assert finding.verdict.case is not None
                base = baseline.run(finding.verdict.case)
                (shared if base.check == finding.verdict.check else kept).append(finding)
        stage.failures = kept
        if shared:
            stage.note = (f"{len(shared)} Case(s) fail with {BASELINE_IMPL} too (a "
                          f"torch.compile difference, not the impl's): " + "; ".join(
                              f"{f.verdict.check}" for f in shared))
    return stage


def opinfo_stage(ctx: Context, runner: FanoutRunner) -> Stage:
    """PyTorch's OpInfo samples and error inputs of the ops (``diagfuzz.strategies.opinfo``),
    judged bitwise by the same oracle; skipped with the reason where op_db cannot be
    imported (it needs ``expecttest``)."""
    stage = ctx.stage(OPINFO_STAGE)
    if not ctx.opts.opinfo:
        stage.skipped = "--no-opinfo"
        return stage
    samples = ctx.opinfo.result() if ctx.opinfo is not None else opinfo_samples(
        runner.device)
    if samples.skipped:
        stage.skipped = samples.skipped
        return stage
    stage.note = f"OpInfo of torch {torch_version()}: {samples.summary()}"
    run_cases(ctx, stage, fixed(ctx.opts, samples.cases, ctx.provided), runner, "check")
    return stage


def preload(call: Callable[[], Any]) -> Future[Any]:
    """``call()`` in a daemon thread: a stage's Cases load while earlier stages are judged
    (OpInfo's take seconds), and a stopped gate never waits for them to exit."""
    future: Future[Any] = Future()

    def load() -> None:
        try:
            future.set_result(call())
        except BaseException as exc:  # the stage that asks for it raises it
            future.set_exception(exc)

    threading.Thread(target=load, name="diagfuzz-gate-load", daemon=True).start()
    return future


def opinfo_samples(device: str) -> Any:
    """The OpInfo Cases for ``device``'s type (``diagfuzz.strategies.opinfo.Samples``)."""
    from diagfuzz.strategies import opinfo

    return opinfo.load("cuda" if str(device).startswith("cuda") else "cpu")


def torch_version() -> str:
    import torch

    return str(torch.__version__)


# --- the fuzz suite, a pytest subprocess ------------------------------------------------

def suite_workers(opts: Options, device: str) -> int:
    """The fuzz suite's workers: ``-n``, for ``-n auto`` what the plugin takes (per GPU
    ``gate_workers_per_gpu``, off the GPU xdist's one per CPU); none with ``--no-suite``."""
    from diagfuzz.harness.workers import cpu_count

    if not opts.suite:
        return 0
    if opts.workers != "auto":
        return max(1, int(opts.workers))  # -n 0: the suite's pytest judges in-process
    if not device.startswith("cuda"):
        return cpu_count()
    return suite.gate_gpus() * gate_workers_per_gpu()


def stage_executors(opts: Options, device: str) -> int:
    """The fixed stages' executors: ``--stage-executors``, else ``pool.STAGE_EXECUTORS_RULE``
    for this machine."""
    from diagfuzz.harness.workers import cpu_count

    if opts.stage_executors is not None:
        return opts.stage_executors
    return auto_stage_executors(cpu_count(), suite_workers(opts, device))


def suite_findings(report: dict[str, Any]) -> tuple[int, list[Finding], list[str]]:
    """(Cases run, findings with a Case, findings the gate cannot attribute to a Case)."""
    findings, unattributed = [], []
    for data in report.get("findings", []):
        found = SuiteFinding.from_dict(data)
        verdict = found.as_verdict()
        if verdict is None or found.kind not in KINDS:
            test = (found.test_ids or ["?"])[0]
            unattributed.append(f"{found.kind} in {test}: {found.message}")
            continue
        findings.append(Finding("fuzz suite", verdict, "check", (found.test_ids or [""])[0],
                                count=found.count, dtypes=dict(found.dtypes),
                                shrunk=found.shrunk, flaky=found.flaky,
                                signature=found.signature, classes=dict(found.classes),
                                examples=found.symptom_examples()))
    return int(report.get("cases", 0)), findings, unattributed


def _stop_suite(proc: subprocess.Popen[Any], grace: float) -> None:
    """SIGTERM the suite's pytest (it writes the report it has), then kill its whole
    process group (workers and their executors) after ``grace`` seconds."""
    import signal

    if proc.poll() is None:
        try:
            proc.send_signal(signal.SIGTERM)
            proc.wait(grace)
        except (subprocess.TimeoutExpired, OSError):
            pass
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)


def suite_stage(ctx: Context, stop_grace: float = 5.0) -> Stage:
    """Run the sharded Hypothesis suite in a pytest subprocess and read its JSON report (a
    partial one when the gate stops it: ``stop_children``)."""
    stage = ctx.stage("fuzz suite")
    opts = ctx.opts
    if not opts.suite:
        stage.skipped = "--no-suite"
        return stage
    from diagfuzz.harness.profiles import BUDGETS

    stage.planned = opts.budget or BUDGETS["gate"].total
    cap = None
    if ctx.deadline is not None:
        cap = max(1.0, round(SUITE_SHARE * (ctx.deadline - time.time()), 1))
    ctx.progress.begin(stage.name, stage.planned)
    # Started by the command line before the gate's imports, or now.
    started = suite.early(opts) or suite.start(opts, cap)
    proc, cap, report_path, output = started.proc, started.cap, started.report, started.output
    if proc not in ctx.children:
        ctx.children.append(proc)
    try:
        proc.wait()
    finally:
        if proc.returncode is None:
            _stop_suite(proc, stop_grace)
    text = output.read_text(encoding="utf-8", errors="replace")
    stopped = ctx.stopping()
    if not report_path.exists() or (proc.returncode not in (0, 1, 6, 7) and not stopped):
        if stopped:  # what the workers judged is still in their progress files
            stage.stopped = True
            held = unfinished.progress_counts(suite_root(opts))
            stage.ran = int(held["cases"])
            stage.failures = suite_findings(
                {"findings": unfinished.unfinished_findings(set(), held["findings"])})[1]
            stage.note = ("stopped before the suite wrote a report; "
                          + unfinished.unfinished_note(0, stage.ran))
            return stage
        tail = text.strip().splitlines()[-15:]
        stage.error = (f"pytest exited {proc.returncode} without a usable report "
                       f"(the whole output: {output}):\n" + "\n".join(tail))
        return stage
    report = json.loads(report_path.read_text(encoding="utf-8"))
    stage.ran, stage.failures, unattributed = suite_findings(report)
    stage.ran = max(stage.ran, int(report.get("cases_seen", 0)))
    stage.unsupported = int(report.get("unsupported_cases", 0))
    stage.coverage = report_coverage(report.get("counts", {}))
    stage.levels = report_levels(report.get("counts", {}))
    stage.cut = bool(report.get("cut"))
    stage.stopped = stopped or bool(report.get("stopped"))
    if stage.stopped:  # the workers judged on until killed: count what they judged
        held = unfinished.progress_counts(suite_root(opts))
        stage.ran = max(stage.ran, int(held["cases"]))
        extra = unfinished.unfinished_findings({f.key for f in stage.failures},
                                               held["findings"])
        stage.failures += suite_findings({"findings": extra})[1]
        stage.note = unfinished.unfinished_note(int(report.get("cases", 0)), stage.ran)
    elif stage.cut:
        stage.note = f"cut by --max-seconds ({cap:g} s for this stage)"
    skipped = dict(report.get("skipped", {}))
    if skipped:
        stage.note = "; ".join([stage.note] * bool(stage.note) + [
            f"skipped {k.removeprefix('test_')}: {v}" for k, v in skipped.items()])
    if stage.ran == 0 and not (stage.cut or stage.stopped):
        stage.error = "the fuzz suite collected or ran no Cases"
    elif unattributed and not stage.stopped:
        stage.error = ("failures the gate cannot attribute to a Case (see "
                       f"{output}):\n" + "\n".join(unattributed))
    elif proc.returncode == 1 and not stage.failures and not stage.stopped:
        stage.error = f"pytest failed but its report names no finding; see {output}"
    return stage


def stop_children(ctx: Context, grace: float) -> None:
    """Stop the suite's pytest (its report first) and everything it started."""
    for proc in list(ctx.children):
        _stop_suite(proc, grace)


# --- the huge tier: Cases past 2**31 elements, judged on the GPU -------------------------

#: The huge tier's draw: fixed, as the gate profile is derandomized.
HUGE_SEED = 0


def huge_dtypes(opts: Options, impl: Any) -> Callable[[str], tuple[str, ...] | None]:
    """The dtypes the huge tier may draw for an op: what the impl declares (all under
    --strict), within --dtypes."""
    from diagfuzz.core.impl import declared_dtypes

    wanted = tuple(d.strip() for d in opts.dtypes.split(",")) if opts.dtypes else None

    def allowed(op: str) -> tuple[str, ...] | None:
        declared = None if opts.strict else declared_dtypes(impl, op)
        if wanted is None or declared is None:
            return wanted or declared
        return tuple(d for d in declared if d in wanted)

    return allowed


def huge_memory_note(records: list[dict[str, Any]], path: Path) -> str:
    """The stage's note: the GPU memory its Cases took (peak above what was held before
    each), and where the per-Case lines are."""
    peaks = sorted((r["peak_gib"], r["case"]) for r in records if r.get("peak_gib") is not None)
    skipped = sum(bool(r.get("skipped")) for r in records)
    parts = []
    if peaks:
        top, case = peaks[-1]
        parts.append(f"GPU memory per Case: median {peaks[len(peaks) // 2][0]:g} GiB, max "
                     f"{top:g} GiB ({case})")
    if skipped:
        parts.append(f"{skipped} skipped (memory cap or device)")
    parts.append(f"per Case: {path}")
    return "; ".join(parts)


#: The registration audit's name (reports, progress lines, JUnit).
AUDIT_STAGE = "registration audit"


def audit_stage(ctx: Context, runner: FanoutRunner) -> Stage:
    """The registration audit (``diagfuzz.oracles.check_registration``) on the
    torch.compile sample, for an impl that runs a library's aten registrations."""
    stage = ctx.stage(AUDIT_STAGE)
    if not ctx.registrations.get("audit"):
        stage.skipped = "no aten registration to audit (an adapter of functions)"
        return stage
    run_cases(ctx, stage, fixed(ctx.opts, compile_cases(), ctx.provided), runner,
              "check_registration", max(ctx.opts.timeout, COMPILE_TIMEOUT))
    return stage


def registration_report(impl: Any, proof: str = "",
                        ops: tuple[str, ...] | None = None) -> dict[str, Any]:
    """What the run says of aten registrations: the calls, the references' proof and the
    warnings (``diagfuzz.impl.registration_lines``) and the per-op audit table."""
    from diagfuzz.impl import registration_lines
    from diagfuzz.oracles.registration import audit_table, audited_package

    registration = getattr(impl, "registration", None)
    with registration() if callable(registration) else contextlib.nullcontext():
        rows = audit_table(impl)
    return {"package": audited_package(impl), "lines": registration_lines(impl, proof, ops),
            "audit": rows}


def huge_stage(ctx: Context, runner: FanoutRunner) -> Stage:
    """The huge tier (``--huge``): a few Cases per op past 2**31 elements and 2**32 bytes
    (``diagfuzz.strategies.huge_cases``), judged by ``diagfuzz.oracles.check_huge`` on the
    GPU; skipped with the reason elsewhere. Each Case's time and GPU memory go to
    ``huge-cases.jsonl`` in the run directory, their summary to the stage's note."""
    if not ctx.opts.huge:
        return Stage("huge tier", skipped="--huge not given")  # not registered: not reported
    from diagfuzz.core import huge
    from diagfuzz.impl import load_impl
    from diagfuzz.strategies import huge_cases

    stage = ctx.stage("huge tier")
    reason = huge.skip_reason(runner.device)
    if reason:
        stage.skipped = reason
        return stage
    opts = ctx.opts
    wanted = tuple(op for op in (opts.ops.split(",") if opts.ops else ctx.provided or ())
                   if ctx.provided is None or op in ctx.provided)
    cases = huge_cases(HUGE_SEED, ops=wanted or None,
                       dtypes=huge_dtypes(opts, load_impl(opts.impl)))
    records: list[dict[str, Any]] = []
    path = opts.run_dir / "huge-cases.jsonl"

    def seen(verdict: Verdict) -> None:
        details = verdict.details
        record = {"case": verdict.case.describe() if verdict.case else "", "kind": verdict.kind,
                  **{k: details.get(k) for k in ("seconds", "estimate_gib", "peak_gib",
                                                 "skipped")}}
        records.append(record)
        with path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")

    run_cases(ctx, stage, cases, runner, "check_huge", max(opts.timeout, huge.TIMEOUT), seen,
              spread=False)
    note = huge_memory_note(records, path)
    stage.note = "; ".join(filter(None, [stage.note, note]))
    return stage
