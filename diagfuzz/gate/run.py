"""``diagfuzz gate``: what a kernel library runs before merging a kernel change.

The stages (``stages.py``) run in a thread of their own: the fuzz suite (a pytest
subprocess with its own workers and executors) beside the fixed stages (corpus, covering,
error parity, OpInfo, compile, audit, huge), one after another, each spread over one pool
of executors of this process (``pool.py``). Their findings are merged by cause over
every stage (``distinct``), and each cause is classified once (``classification.py``), all
causes at once. Every finding gets a reproducer in this run's directory, and its shrunk Case
is saved to the corpus, one file per cause.

This thread only watches: SIGTERM, SIGINT and the ``--max-seconds`` cap (a hard one, at
``HARD_SHARE`` of it, after the stages' own cooperative deadlines) stop every child
process, and the outputs are written from whatever finished, the unfinished stages and
findings marked as such. Nothing of an earlier run is deleted: each run writes into
``<out>/run-<time>-<pid>/``, ``<out>/latest`` points at the last run that wrote its
outputs, and the oldest runs beyond ``diagfuzz.core.rundirs.KEEP`` are pruned only then.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from diagfuzz.core import corpus, rundirs
from diagfuzz.core.exits import ExitCode
from diagfuzz.core.signature import Signature
from diagfuzz.core.verdict import Verdict
from diagfuzz.execution import timeouts, timing
from diagfuzz.execution.classification import Classifier, Rerun, spare_limit
from diagfuzz.execution.fanout import FanoutRunner
from diagfuzz.execution.history import sequence_dicts
from diagfuzz.execution.messages import WARM_UP_ENV
from diagfuzz.execution.parent import CLOSE_WAIT, ExecutorError, ProcessRunner
from diagfuzz.execution.stopbound import EarlyStop, StopBound, kill_descendants
from diagfuzz.gate import suite
from diagfuzz.gate.options import Options
from diagfuzz.gate.pool import grown_stage_executors, split_compile_lane, stage_pool
from diagfuzz.gate.progress import GateProgress
from diagfuzz.gate.sequences import SEQUENCE_STAGE, sequence_stage
from diagfuzz.gate.stages import (
    AUDIT_STAGE,
    COMPILE_STAGE,
    COMPILE_TIMEOUT,
    COVERING_STAGE,
    NEVER_BEGAN,
    OPINFO_STAGE,
    Context,
    Finding,
    Stage,
    audit_stage,
    compile_stage,
    corpus_stage,
    covering_stage,
    error_parity_stage,
    huge_stage,
    not_run,
    opinfo_samples,
    opinfo_stage,
    preload,
    registration_report,
    stage_executors,
    stop_children,
    suite_root,
    suite_stage,
)
from diagfuzz.gate.usage import check_ops_provided
from diagfuzz.harness.reproducers import reproducer_timeout, write_reproducer
from diagfuzz.harness.sharding import HARD_SHARE  # the plugin's hard stop, the gate's too
from diagfuzz.harness.workers import cpu_count
from diagfuzz.impl import (
    ImplError,
    ReferenceReplaced,
    capabilities,
    import_roots,
    load_proven,
    locate_impl,
    provided_ops,
    use_roots,
)

#: The stages in report order.
STAGE_ORDER = ("corpus replay", COVERING_STAGE, "fuzz suite", "error parity",
               SEQUENCE_STAGE, OPINFO_STAGE, COMPILE_STAGE, AUDIT_STAGE, "huge tier",
               "classification")
#: The timing group of the stages the pool of executors judges.
FIXED_STAGES = "fixed stages"
#: Seconds the stopped suite gets to write its partial report, at most.
STOP_GRACE = 5.0


@dataclass
class Result:
    """The gate's outcome: exit code, stages, distinct findings, and where things went."""

    code: int
    stages: list[Stage]
    findings: list[Finding]
    impl: str
    device: str
    seconds: float
    error: str = ""
    unclassified: int = 0
    repro_dir: Path | None = None
    saved: list[Path] = field(default_factory=list)
    corpus_dir: Path | None = None
    cut: bool = False
    #: Why the gate was stopped before it finished ('' when it was not).
    stopped: str = ""
    run_dir: Path | None = None
    #: Where the wall time went: the gate's own start-up, and executor seconds per part
    #: per group of stages (``diagfuzz.execution.timing``).
    timing: dict[str, Any] = field(default_factory=dict)
    #: What the impl registered into aten: calls, warnings, the audit table
    #: (``diagfuzz.gate.stages.registration_report``).
    registrations: dict[str, Any] = field(default_factory=dict)
    #: Per op, the factor levels the impl cannot take (``diagfuzz.core.impl.capabilities``
    #: made into ``diagfuzz.strategies.covering.inapplicable``): not in the shares.
    inapplicable: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    #: The gate's directory on disk once this run's old runs are pruned: ``path``,
    #: ``bytes``, ``triton_cache_bytes``, ``runs_kept``.
    disk: dict[str, Any] = field(default_factory=dict)
    #: The t-way coverage by stage (None: every stage), measured once for the summary and
    #: the JSON report alike (``diagfuzz.gate.outputs.t_way``): seconds for a large gate.
    t_way_memo: dict[str | None, Any] = field(default_factory=dict, repr=False,
                                              compare=False)


def _as_it_fails(finding: Finding) -> Verdict:
    """The verdict its reproducer waits for: how it failed in its re-runs where that was
    another way (an error in the run that hangs alone gets a hang's wait, not the cap)."""
    c = finding.classification
    if c is not None and c.example is not None and c.kind != finding.verdict.kind:
        return c.example
    return finding.verdict


def _representing(finding: Finding) -> tuple[bool, bool, bool]:
    """Sort key of a cause's representative over stages (smaller represents it)."""
    # torch.compile's outcome depends on what the process compiled before: a cause
    # another stage met is represented by that stage's Case.
    return (timeouts.unconfirmed_stall(finding.verdict.kind, finding.verdict.details),
            finding.oracle == "check_compile", not finding.shrunk)


def distinct(findings: list[Finding]) -> list[Finding]:
    """One finding per cause over every stage: the first stage's Case represents it (a
    confirmed hang's rather than a known hang's later stall, another stage's rather than
    torch.compile parity's, and a shrunk one where a stage has it); counts, dtypes,
    classes and stages add up. Each cause is a copy: the stages' own findings keep
    counting their own Cases."""
    merged: dict[Signature, Finding] = {}
    for finding in findings:
        seen = merged.get(finding.key)
        if seen is None:
            merged[finding.key] = dataclasses.replace(finding)
            continue
        if _representing(finding) < _representing(seen):
            mine = dataclasses.replace(finding)
            mine.absorb(seen)
            merged[finding.key] = mine
        else:
            seen.absorb(finding)
    return list(merged.values())


def cannot_run_here(opts: Options, device: str) -> list[str]:
    """The stages ``opts`` asks for that ``device``'s machine cannot run, each with its
    reason (known before anything runs: no CUDA for the huge tier, no expecttest for
    OpInfo)."""
    from diagfuzz.core import huge
    from diagfuzz.strategies import opinfo

    reasons = []
    missing = opinfo.unavailable() if opts.opinfo else ""
    if missing:
        reasons.append(f"{OPINFO_STAGE}: {missing}")
    reason = huge.skip_reason(device) if opts.huge else ""
    if reason:
        reasons.append(f"huge tier: {reason}")
    return reasons


def exit_code(stages: list[Stage], findings: list[Finding], stopped: bool = False,
              require_stages: bool = False) -> int:
    """3 a stage could not run; 1 a deterministic (or unclassified) failure; 2 only flaky
    ones; 3 a stage skipped for a reason of this machine, with ``require_stages`` (a bug
    found elsewhere still says 1 or 2); 7 stopped, nothing failed; 6 cut by --max-seconds,
    nothing failed; 0 clean."""
    if any(s.error for s in stages):
        return ExitCode.ERROR
    if any(f.classification is None or f.classification.deterministic for f in findings):
        return ExitCode.FAILURE
    if findings:
        return ExitCode.FLAKY
    if require_stages and not_run(stages):
        return ExitCode.ERROR
    if stopped or any(s.stopped for s in stages):
        return ExitCode.STOPPED
    return ExitCode.CUT if any(s.cut for s in stages) else ExitCode.CLEAN


def _timed(ctx: Context, name: str, step: Callable[[], Stage]) -> Stage:
    """Run one stage, timing it; an infrastructure error becomes the stage's error."""
    t0 = time.monotonic()
    try:
        stage = step()
    except (ExecutorError, ImplError, OSError) as exc:
        stage = ctx.stages.get(name) or ctx.stage(name)
        if ctx.stopping():
            stage.stopped = True
        else:
            stage.error = f"{exc!r}"
    stage.seconds = time.monotonic() - t0
    if stage.skipped and not stage.skipped.startswith(("--", "no ")):  # not --no-X, no corpus
        ctx.progress.say(f"{name}: skipped: {stage.skipped}")
    if not stage.skipped:
        failed = f", {len(stage.failures)} failing" if stage.failures else ""
        how = (" (stopped)" if stage.stopped else " (cut)" if stage.cut
               else f" (ERROR: {stage.error.splitlines()[0]})" if stage.error else "")
        ctx.progress.end(name, f"{stage.ran:,} Cases{failed} in {stage.seconds:.1f} s{how}")
    return stage


class Gate:
    """One gate run: the stages' thread, the stop, and the result from what finished."""

    def __init__(self, opts: Options) -> None:
        self.opts = opts
        self.started = time.monotonic()
        self.deadline = None if opts.max_seconds is None else time.time() + opts.max_seconds
        self.stop_reason = ""
        self._stop = threading.Event()
        #: Set by the signal handlers (which only record the request); the main thread
        #: then stops the children.
        self.requested = ""
        self.stop_requested = threading.Event()
        self.wall_start = time.time()
        self.progress = GateProgress(opts.quiet, suite_root=suite_root(opts))
        self.ctx = Context(opts, self.progress, self.deadline, self._stop.is_set)
        #: Every executor of the fixed stages (``stage_pool``): what a stop closes.
        self.pool: FanoutRunner | None = None
        #: Executors the pool gained once the suite ended (``_new_executor``).
        self._grown: list[ProcessRunner] = []
        #: The pool's executors that judge the stages in turn.
        self.runner: FanoutRunner | None = None
        #: The torch.compile stage's own executor, taken from the pool where it has two or
        #: more (``pool.split_compile_lane``); None where the stage runs in turn.
        self.compile_runner: FanoutRunner | None = None
        #: Executors in ``runner`` (``stages.stage_executors``; 0 until it is made).
        self.stage_executors = 0
        self.classifier: Classifier | None = None
        #: Serialises making the classifier and launching its spares (any stage's thread).
        self._spares_lock = threading.Lock()
        self.device = opts.device or ""
        self.findings: list[Finding] | None = None  # distinct, once the stages are done
        self.error = ""
        self.code: int | None = None  # set where the body ends early (impl, setup)
        self.classify_seconds = 0.0
        #: Seconds the stopped suite gets to write its partial report.
        self.grace = STOP_GRACE

    # --- the stages' thread --------------------------------------------------------
    def _resolve_device(self) -> str:
        """``--device``, else where diagfuzz's kernels run (imports them)."""
        import diagfuzz.ops as ops

        self.device = self.opts.device or ops.DEVICE
        return self.device

    def body(self) -> None:
        """Every stage, then classification (the stages' thread)."""
        opts, ctx = self.opts, self.ctx
        unrunnable = (cannot_run_here(opts, self._resolve_device()) if opts.require_stages
                      else [])
        if unrunnable:
            self.error, self.code = ("--require-stages: " + "; ".join(unrunnable),
                                     ExitCode.ERROR)
            ctx.progress.say(f"nothing run: {self.error}")
            self.stop("a required stage cannot run here")
            return
        try:  # a module that is not there: said before the suite starts, not after
            locate_impl(opts.impl)
        except ImplError as exc:
            self.error, self.code = str(exc), ExitCode.USAGE
            self.stop("the impl does not import")
            return
        with ThreadPoolExecutor(3, thread_name_prefix="diagfuzz-gate-side") as pool:
            suite = pool.submit(self._suite)
            self._resolve_device()  # after the suite started: it imports the kernels
            env_cache = {"TRITON_CACHE_DIR": str(opts.triton_cache.resolve())}
            # A pool of executors judges the fixed stages (each replaced by a fresh one
            # after a crash); the suite's workers have their own. With two or more, the
            # torch.compile stage takes one of them and runs beside the other stages.
            self.stage_executors = stage_executors(opts, self.device)
            self.pool = stage_pool(opts.impl, self.device, self.stage_executors,
                                   opts.timeout, opts.run_dir / "executor", opts.strict,
                                   opts.learnt())
            self.runner, self.compile_runner = (
                split_compile_lane(self.pool) if opts.compile_sample else (self.pool, None))
            with _environment(env_cache):
                self.pool.launch()  # they start while this process loads the impl
            if opts.stage_executors is None:  # the suite's CPUs, once it ends
                ctx.grown_executors = grown_stage_executors(
                    cpu_count(), self.device, self.stage_executors)
                ctx.new_executor = functools.partial(self._new_executor, env_cache)
                ctx.growing = self.runner
            try:
                impl, proof = load_proven(opts.impl, "cpu")
                ctx.provided = provided_ops(impl)
                check_ops_provided(opts.ops, ctx.provided, opts.impl)
                wanted = tuple(op for op in ctx.provided if not opts.ops
                               or op in {o.strip() for o in opts.ops.split(",")})
                ctx.registrations = registration_report(impl, proof, wanted)
                ctx.capabilities = {
                    op: (None if opts.strict else dtypes, has_out)
                    for op, (dtypes, has_out) in capabilities(impl, ctx.provided).items()}
                for line in ctx.registrations["lines"]:
                    ctx.progress.say(line)
            except ImplError as exc:
                self.error, self.code = str(exc), ExitCode.USAGE
                self.stop("the impl does not import" if "--ops" not in str(exc)
                          else "--ops names no op the impl provides")
                return
            except ReferenceReplaced as exc:
                self.error, self.code = str(exc), ExitCode.ERROR
                self.stop("loading the impl replaced a reference")
                return
            runner = self.runner
            if opts.opinfo:  # loads while the covering Cases are judged
                ctx.opinfo = preload(functools.partial(opinfo_samples, self.device))
            lane, compiled = self.compile_runner, None
            if lane is not None:
                compiled = pool.submit(self._stage, COMPILE_STAGE,
                                       functools.partial(compile_stage, ctx, lane))
            # Its own fresh executors, beside the pool's stages and the suite.
            sequences = pool.submit(self._stage, SEQUENCE_STAGE,
                                    functools.partial(sequence_stage, ctx, runner))
            steps: list[tuple[str, Callable[[Context, FanoutRunner], Stage]]] = [
                ("corpus replay", corpus_stage), (COVERING_STAGE, covering_stage),
                ("error parity", error_parity_stage), (OPINFO_STAGE, opinfo_stage),
                *([(COMPILE_STAGE, compile_stage)] if compiled is None else []),
                (AUDIT_STAGE, audit_stage), ("huge tier", huge_stage)]
            for name, step in steps:
                if self._stop.is_set():
                    break
                self._stage(name, functools.partial(step, ctx, runner))
            self.runner.close()
            if lane is not None and compiled is not None:
                compiled.result()
                lane.close()
            suite.result()
            ctx.others_done.set()
            sequences.result()
        if self._stop.is_set():
            return
        self.findings = distinct([f for s in self.stages() for f in s.failures])
        self._classify(self.findings)

    def _suite(self) -> Stage:
        """The fuzz suite's stage; once it ends, its CPUs are the fixed stages'."""
        try:
            return self._stage("fuzz suite", lambda: suite_stage(self.ctx, STOP_GRACE))
        finally:
            self.ctx.suite_done.set()

    def _new_executor(self, env: dict[str, str]) -> ProcessRunner:
        """One more executor of the fixed stages' pool (``Context.new_executor``), closed
        with the pool at a stop."""
        opts = self.opts
        runner = stage_pool(opts.impl, self.device, 1, opts.timeout,
                            opts.run_dir / "executor" / f"grown-{len(self._grown)}",
                            opts.strict, opts.learnt()).runners[0]
        with _environment(env):
            runner.launch()
        self._grown.append(runner)
        return runner

    def _stage(self, name: str, step: Callable[[], Stage]) -> Stage:
        """``_timed``, then spare executors for the causes found so far."""
        stage = _timed(self.ctx, name, step)
        self._prepare_classification()
        return stage

    def _classify_env(self) -> dict[str, str]:
        """The re-runs' executors share the stages' Triton cache and skip the warm-up: it
        readies a pace that nobody measures."""
        return {"TRITON_CACHE_DIR": str(self.opts.triton_cache.resolve()), WARM_UP_ENV: "0"}

    def _classifier(self) -> Classifier:
        if self.classifier is None:
            opts = self.opts
            rerun = Rerun(opts.impl, self.device, opts.timeout, "check", opts.strict,
                          opts.run_dir / "classify", opts.learnt())
            self.classifier = Classifier(rerun, opts.repeats)
        return self.classifier

    def _prepare_classification(self) -> None:
        """One spare executor per cause found so far, up to what classification will run
        side by side (``Classifier.prepare``): each starts while later stages run, so
        classifying after the last stage begins with ready executors, not their start-up."""
        causes = {f.key for s in list(self.ctx.stages.values()) for f in list(s.failures)}
        wanted = min(len(causes), self.opts.max_classify, spare_limit())
        with self._spares_lock:
            if wanted and not self._stop.is_set():
                with _environment(self._classify_env()):
                    self._classifier().prepare(wanted)

    def _classify(self, findings: list[Finding]) -> None:
        opts = self.opts
        chosen = findings[:opts.max_classify]
        self.progress.begin("classification", len(chosen), "findings")
        t0 = time.monotonic()
        with self._spares_lock:
            classifier = self._classifier()
        work = []
        for f in chosen:
            timeout = opts.timeout if f.oracle == "check" else max(opts.timeout,
                                                                   COMPILE_TIMEOUT)
            if self.deadline is not None:
                timeout = max(1.0, min(timeout, self.deadline - time.time()))
            work.append((f.verdict, f.oracle, timeout))
        with _environment(self._classify_env()):
            found = classifier.classify_all(
                work, done=lambda i: self.progress.advance("classification"))
        for f, classification in zip(chosen, found, strict=True):
            f.classification = classification
        self.classify_seconds = time.monotonic() - t0
        done = sum(c is not None for c in found)
        self.progress.end("classification", f"{done} of {len(findings)} findings in "
                                            f"{self.classify_seconds:.1f} s")

    # --- stopping ----------------------------------------------------------------------
    def stop(self, reason: str) -> None:
        """Stop every child now (any thread); the body then winds down."""
        if self._stop.is_set():
            return
        self.stop_reason = reason
        self._stop.set()
        with self._spares_lock:  # a classifier being made now is seen, or sees the stop
            classifier = self.classifier
        if classifier is not None:
            classifier.stop()
        stop_children(self.ctx, self.grace)
        if self.pool is not None:  # every executor of the pool, within one wait
            grown = [r for r in self._grown if r not in self.pool.runners]
            FanoutRunner([*self.pool.runners, *grown]).close(min(CLOSE_WAIT, self.grace))

    def stages(self) -> list[Stage]:
        """The stages begun, in report order."""
        return [self.ctx.stages[n] for n in STAGE_ORDER if n in self.ctx.stages]

    # --- the result ----------------------------------------------------------------
    def result(self) -> Result:
        """The result from what finished; reproducers written and Cases saved for every
        finding, classified or not."""
        opts = self.opts
        stopped = self.stop_reason if self.code is None else ""
        # Copies: a stage's thread may still count while the outputs are written from
        # these (past the stop's bound), and every output must tell one story.
        stages = [dataclasses.replace(s) for s in self.stages()]
        if self.code == ExitCode.USAGE:  # the suite started early is stopped, not a stage run
            stages = [s for s in stages if s.ran]
        for stage in stages:
            if stopped and not stage.seconds:  # still running when stopped
                stage.stopped = True
                stage.seconds = time.monotonic() - self.started
        if stopped:  # the stages a stop came before are named, not left out
            begun = {s.name for s in stages}
            stages += [Stage(name, stopped=True, note=NEVER_BEGAN)
                       for name in self._stages_wanted() if name not in begun]
            stages.sort(key=lambda s: STAGE_ORDER.index(s.name))
        findings = self.findings
        if findings is None:  # stopped before the stages were merged
            findings = distinct([f for s in stages for f in s.failures])
        for f in findings:
            f.cut = f.classification is None and bool(stopped or self.deadline)
        if self.findings is not None:
            classified = sum(f.classification is not None for f in findings)
            det = sum(bool(f.classification and f.classification.deterministic)
                      for f in findings)
            after = sum(bool(f.classification and f.classification.deterministic
                             and f.classification.history) for f in findings)
            passed_alone = any(f.classification and (f.classification.history
                                                     or f.classification.sequence)
                               for f in findings)
            note = (f"{classified} of {len(findings)} finding(s) ({det} deterministic, "
                    f"{after} depending on what ran before), {opts.repeats} re-runs each in "
                    "a fresh process" + (f"; one that passes alone: its history replayed "
                                         f"and shrunk, the sequence found replayed "
                                         f"{2 * opts.repeats} times"
                                         if passed_alone else "")
                    if findings else "nothing to classify")
            stages.append(Stage("classification", ran=classified, seconds=self.classify_seconds,
                                note=note, stopped=bool(stopped)))
        saved = self._write_findings(findings)
        code = self.code if self.code is not None else exit_code(
            stages, findings, bool(stopped), opts.require_stages)
        if stopped == "--max-seconds" and code == ExitCode.STOPPED:
            code = ExitCode.CUT
        return Result(code, stages, findings, opts.impl, self.device,
                      time.monotonic() - self.started, error=self.error,
                      unclassified=sum(f.classification is None for f in findings),
                      repro_dir=opts.repro_dir, saved=saved,
                      corpus_dir=opts.corpus_dir if opts.save_corpus else None,
                      cut=any(s.cut for s in stages) or stopped == "--max-seconds",
                      stopped=stopped, run_dir=opts.run_dir, timing=self._timing(stages),
                      registrations=self.ctx.registrations,
                      inapplicable=_inapplicable(self.ctx.capabilities))

    def _stages_wanted(self) -> list[str]:
        """The stages this gate's options run (the classification aside)."""
        opts = self.opts
        wanted = {"corpus replay": True, COVERING_STAGE: opts.covering, "fuzz suite": opts.suite,
                  "error parity": True, SEQUENCE_STAGE: opts.sequences,
                  OPINFO_STAGE: opts.opinfo,
                  COMPILE_STAGE: opts.compile_sample, AUDIT_STAGE: True,
                  "huge tier": opts.huge}
        return [name for name, on in wanted.items() if on]

    def _write_findings(self, findings: list[Finding]) -> list[Path]:
        opts = self.opts
        saved: list[Path] = []
        roots = import_roots()
        existing = corpus.entries(opts.corpus_dir) if opts.save_corpus and findings else []
        for f in findings:
            case = f.verdict.case
            assert case is not None and f.signature is not None
            c = f.classification
            ratio = c.ratio if c else ""
            f.reproducer = write_reproducer(  # absolute: the command runs from anywhere
                case, opts.repro_dir, impl=opts.impl, device=self.device or "cpu",
                timeout=reproducer_timeout(_as_it_fails(f), opts.timeout), oracle=f.oracle,
                verdict=f.verdict, reproducibility=ratio, impl_path=roots,
                strict=opts.strict, **(c.reproducer_arguments() if c else {})).resolve()
            # A cause the corpus replay met is in the corpus already, under any name. A drawn
            # Case the suite did not shrink (flaky, or shrinking cut) is not a regression
            # test anyone wants to read: the fixed stages' Cases are chosen, not drawn.
            drawn_unshrunk = f.stage == "fuzz suite" and not f.shrunk
            if (opts.save_corpus and f.oracle == "check" and "corpus replay" not in f.stages
                    and not drawn_unshrunk):
                path = corpus.save_finding(case, f.signature, opts.corpus_dir,
                                           verdict=f.verdict, impl=opts.impl,
                                           reproducibility=ratio, existing=existing,
                                           impl_path=roots,
                                           sequence=sequence_dicts(c.sequence) if c else ())
                if path is not None:
                    saved.append(path)
        return saved

    def _timing(self, stages: list[Stage]) -> dict[str, Any]:
        from diagfuzz.execution.timeline import process_start

        start = process_start()
        # Every executor of a group writes its own timing file (replacements too): read
        # sums them and counts them as the group's "executors".
        groups = {"fuzz suite": suite_root(self.opts),
                  FIXED_STAGES: self.opts.run_dir / "executor",
                  "classification": self.opts.run_dir / "classify"}
        data: dict[str, Any] = {
            "wall_s": round(time.monotonic() - self.started, 3),
            "gate_startup_s": (round(max(0.0, self.wall_start - start), 3)
                               if start is not None else None),
            "stages_s": {s.name: round(s.seconds, 3) for s in stages},
            "stage_executors": self.stage_executors,
            "timeouts": timeouts.report(self.opts.learnt(), self.opts.timeout),
            "executors": {}}
        ran = {s.name for s in stages}
        for name, directory in groups.items():
            if name == "fuzz suite" and name not in ran:  # started early, then not a stage
                continue
            found = timing.read(directory) if directory.exists() else None
            if found is not None:
                data["executors"][name] = found.to_dict()
        return data


class _environment:
    """Set environment variables for the processes started inside the block (executors
    inherit them); restore the old values after."""

    def __init__(self, values: dict[str, str]) -> None:
        self.values = values
        self.old: dict[str, str | None] = {}

    def __enter__(self) -> None:
        for key, value in self.values.items():
            self.old[key] = os.environ.get(key)
            os.environ[key] = value

    def __exit__(self, *exc: object) -> None:
        for key, value in self.old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _install_signals(gate: Gate) -> dict[int, Any]:
    """SIGTERM and SIGINT stop the gate (main thread only); the old handlers, to restore."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    old: dict[int, Any] = {}
    names = {signal.SIGTERM: "SIGTERM", signal.SIGINT: "SIGINT"}
    for signum, name in names.items():
        def handler(_signum: int, _frame: Any, name: str = name) -> None:
            gate.requested = gate.requested or name
            gate.stop_requested.set()
        old[signum] = signal.signal(signum, handler)
    return old


def run_gate(opts: Options, write: Callable[[Result], None] | None = None,
             exit_bounded: bool = False) -> Result:
    """Run the gate; ``write`` (the outputs) is called with the result before the signal
    handlers are restored, so a second SIGTERM cannot cut the writing short. A signal
    arms a ``StopBound``: past its bound the process writes what it holds and exits,
    whatever a thread or child is doing. ``exit_bounded`` (the command line) keeps it
    armed after the return, so the interpreter's exit is bounded too."""
    use_roots(import_roots())  # --impl may name a module of the current directory
    early = suite.early(opts)  # the command line started the suite in its run directory
    if early is None:
        opts.out_dir.mkdir(parents=True, exist_ok=True)
        opts.run_dir = rundirs.new_run_dir(opts.out_dir)
    gate = Gate(opts)
    if early is not None:  # a stop stops it, as it does every stage's children
        gate.ctx.children.append(early.proc)
    write_once = _WriteOnce(gate, write)
    bound = EarlyStop.bound or StopBound(write_once.held)  # armed by a start-up signal
    bound.write = write_once.held
    write_once.bound = bound
    old = _install_signals(gate)
    if EarlyStop.signal:  # stopped while it started: stop now, with the outputs
        gate.requested = EarlyStop.signal
        gate.stop_requested.set()
    hard = (None if opts.max_seconds is None
            else time.monotonic() + HARD_SHARE * opts.max_seconds)
    if opts.max_seconds is not None:  # the stop must fit in the cap's last 5 %
        gate.grace = min(STOP_GRACE, 0.02 * opts.max_seconds)
    gate.progress.start()
    gate.progress.say(f"run directory {opts.run_dir}")
    body = threading.Thread(target=_guarded(gate), name="diagfuzz-gate", daemon=True)
    try:
        body.start()
        while body.is_alive():
            body.join(0.2)
            requested = gate.stop_requested.is_set()
            if requested or (hard is not None and time.monotonic() >= hard):
                reason = gate.requested if requested else "--max-seconds"
                if requested:
                    bound.arm()
                gate.progress.say(f"stopping ({reason}): writing what finished")
                gate.stop(reason)
                # Within the stop's bound, with time left to write (StopBound's expiry
                # writes from what the gate holds otherwise).
                left = (bound.deadline() - time.monotonic() - 1.0 if requested
                        else gate.grace + 1.0)
                body.join(max(0.5, min(gate.grace + 1.0, left)))
                break
        gate.progress.stop()
        result = gate.result()
        if result.code != ExitCode.USAGE:
            result.disk = _disk(opts)
        result = write_once(result)
        if result.code == ExitCode.USAGE:  # nothing ran: no run to keep
            print(f"diagfuzz gate: error: {result.error}", file=sys.stderr)
            shutil.rmtree(opts.run_dir, ignore_errors=True)
        else:
            rundirs.point_latest(opts.run_dir)
            rundirs.prune(opts.out_dir, protect=opts.run_dir)
    finally:
        for signum, handler in old.items():
            signal.signal(signum, handler)
        if not exit_bounded:
            bound.disarm()
    if exit_bounded and result.stopped:
        kill_descendants()  # what a stopped stage left (a compile worker), never outlives it
    return result


def _inapplicable(caps: dict[str, tuple[tuple[str, ...] | None, bool]]
                  ) -> dict[str, dict[str, list[str]]]:
    """Per op, what the covering stage narrowed its model by (``covering_for``)."""
    from diagfuzz.strategies.covering import inapplicable

    found = {op: inapplicable(op, dtypes, has_out) for op, (dtypes, has_out) in caps.items()}
    return {op: {f: sorted(v) for f, v in drop.items()} for op, drop in found.items() if drop}


def _disk(opts: Options) -> dict[str, Any]:
    """What ``opts.out_dir`` holds once the runs beyond the kept ones are pruned (they are
    pruned after the outputs are written, which report this size)."""
    try:
        going = rundirs.prunable(opts.out_dir, protect=opts.run_dir)
        runs = [p for p in opts.out_dir.glob("run-*") if p.is_dir() and p not in going]
        return {"path": str(opts.out_dir), "runs_kept": len(runs), "keep": rundirs.keep(),
                "bytes": rundirs.disk_bytes(opts.out_dir, going),
                "triton_cache_bytes": rundirs.disk_bytes(opts.triton_cache)}
    except OSError:
        return {}


class _WriteOnce:
    """The outputs, written once: by the gate's main thread, or by its ``StopBound`` from
    what the gate holds when the main thread has not written them within the bound."""

    def __init__(self, gate: Gate, write: Callable[[Result], None] | None) -> None:
        self.gate, self.write = gate, write
        self.bound: StopBound | None = None
        self.result: Result | None = None
        self._lock = threading.Lock()

    def __call__(self, result: Result) -> Result:
        with self._lock:
            if self.result is None:
                if self.write is not None:
                    self.write(result)
                self.result = result
                if self.bound is not None:
                    self.bound.written(result.code)
            return self.result

    def held(self) -> int:
        """The StopBound's writer: the result of what the gate holds, written."""
        if self.result is None:
            self.gate.stop_reason = self.gate.stop_reason or self.gate.requested
            self(self.gate.result())
            if self.result is not None and self.result.code != ExitCode.USAGE:
                with contextlib.suppress(OSError):  # found as a finished run's would be
                    rundirs.point_latest(self.gate.opts.run_dir)
        assert self.result is not None
        return int(self.result.code)


def _guarded(gate: Gate) -> Callable[[], None]:
    def run() -> None:
        try:
            gate.body()
        except BaseException as exc:  # the result says so; the main thread writes it
            if not gate._stop.is_set():
                import traceback

                gate.error = f"the gate broke: {exc!r}\n{traceback.format_exc()}"
                gate.code = ExitCode.ERROR
    return run


def env_line() -> str:
    import torch
    import triton

    return f"torch {torch.__version__} · triton {triton.__version__}"


def reproduce_command(finding: Finding) -> str:
    """The one command that reproduces ``finding``."""
    return f"python {finding.reproducer}" if finding.reproducer else "(no reproducer)"
