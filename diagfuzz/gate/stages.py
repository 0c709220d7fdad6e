"""``diagfuzz gate``: what a kernel library runs before merging a kernel change.

Stages, in order: the regression corpus, the fuzz suite (pytest + xdist under the
derandomized ``gate`` Hypothesis profile), fixed error-parity Cases, a torch.compile parity
sample. Failures are grouped by signature (``diagfuzz.core.signature``) over every stage; each
distinct one is re-run R times in fresh processes (deterministic R/R or flaky k/R), gets a
reproducer in this run's reproducer directory, and is saved to the corpus.

Exit codes: 0 clean; 1 at least one deterministic failure; 2 only flaky failures; 3 the gate
could not run (impl not importable, nothing collected, an infrastructure error); 4 a usage
error (``diagfuzz.gate.cli``); 6 cut by ``--max-seconds`` before the budget ran, with no failure
in what ran.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from diagfuzz.core import corpus
from diagfuzz.core.case import Case
from diagfuzz.core.signature import Signature, explained_by, signature_of
from diagfuzz.core.verdict import KINDS, Verdict
from diagfuzz.execution.parent import DEFAULT_TIMEOUT, ExecutorError, ProcessRunner
from diagfuzz.gate.classification import DEFAULT_REPEATS, Classification, classify
from diagfuzz.harness.findings import Finding as SuiteFinding
from diagfuzz.harness.reproducers import write_reproducer
from diagfuzz.impl import DEFAULT_IMPL, ImplError, import_roots, load_impl, use_roots
from diagfuzz.specs import all_specs

EXIT_CLEAN, EXIT_FAILURE, EXIT_FLAKY, EXIT_ERROR, EXIT_USAGE, EXIT_CUT = 0, 1, 2, 3, 4, 6

#: Examples the fuzz suite draws by default (None: the gate profile's, see profiles.py).
DEFAULT_BUDGET: int | None = None
#: The reference impl a compile-parity failure is checked against before it counts.
BASELINE_IMPL = "diagfuzz.impl:aten"
#: Seconds a torch.compile parity Case may take (inductor compiles: slow on a CPU).
COMPILE_TIMEOUT = 300.0
#: Of the time left under --max-seconds, the share the fuzz suite's drawing gets (its
#: shrinking, the fixed stages and classification share the rest).
SUITE_SHARE = 0.5


@dataclass
class Options:
    """Everything ``diagfuzz gate`` accepts (see ``cli.py`` for the flags)."""

    impl: str = DEFAULT_IMPL
    budget: int | None = DEFAULT_BUDGET
    workers: str = "auto"
    junit: Path | None = None
    report: Path | None = None
    timeout: float = DEFAULT_TIMEOUT
    device: str | None = None
    corpus_dir: Path = Path(corpus.DEFAULT_DIR)
    out_dir: Path = Path(".diagfuzz/gate")
    repeats: int = DEFAULT_REPEATS
    save_corpus: bool = True
    suite: bool = True
    compile_sample: bool = True
    max_classify: int = 20
    #: Narrowing passed to the suite (comma-separated names, as its options take them).
    ops: str | None = None
    dtypes: str | None = None
    ranks: str | None = None
    layouts: str | None = None
    max_elements: int | None = None
    strict: bool = False
    max_seconds: float | None = None

    @property
    def repro_dir(self) -> Path:
        """This run's reproducers (cleared at the start of every run)."""
        return self.out_dir / "repro"


@dataclass
class Finding:
    """A failure signature found by one stage, and what the gate learnt about it."""

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

    def __post_init__(self) -> None:
        if self.signature is None:
            signature = signature_of(self.verdict)
            if self.oracle != "check":  # a compile-parity failure is a bug of its own
                signature = Signature(signature.op, signature.kind, self.oracle,
                                      signature.check + " " + signature.trigger,
                                      signature.family)
            self.signature = signature
        if not self.dtypes and self.verdict.case is not None:
            self.dtypes = {self.verdict.case.dtype: self.count}

    @property
    def key(self) -> Signature:
        """What makes two findings one: their signature."""
        assert self.signature is not None
        return self.signature


@dataclass
class Stage:
    """One stage's outcome: Cases run, failures, or why it did not run."""

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


# --- fixed Cases of the error-parity and torch.compile stages ---------------------------

def error_parity_cases() -> list[Case]:
    """One invalid call per invalid class and op (each op's spec's ``error_cases``): the
    impl must refuse each as aten does."""
    return [case for spec in all_specs() for case in spec.error_cases()]


def compile_cases() -> list[Case]:
    """A small torch.compile parity sample (each op's spec's ``compile_cases``)."""
    return [case for spec in all_specs() for case in spec.compile_cases()]


# --- coverage ---------------------------------------------------------------------------

def _count(coverage: dict[str, Counter[str]], case: Case) -> None:
    """Add ``case`` to per-axis counts, with the fuzz report's classes (diagfuzz.harness.report)."""
    from diagfuzz.harness.report import classify as classes_of
    from diagfuzz.harness.report import group_of

    coverage.setdefault("group", Counter())[group_of(case)] += 1
    for axis, values in classes_of(case).items():
        coverage.setdefault(axis, Counter()).update(values)


def report_coverage(counts: dict[str, Any]) -> dict[str, Counter[str]]:
    """Per-axis counts from the suite report's ``counts`` ({group: {cases, classes}})."""
    coverage: dict[str, Counter[str]] = {"group": Counter()}
    for group, entry in counts.items():
        coverage["group"][group] += int(entry.get("cases", 0))
        for axis, values in entry.get("classes", {}).items():
            coverage.setdefault(axis, Counter()).update(values)
    return coverage


# --- stages -----------------------------------------------------------------------------

def _run_cases(stage: Stage, cases: list[Case], runner: ProcessRunner, oracle: str,
               timeout: float | None = None, deadline: float | None = None) -> None:
    """Run ``cases`` through ``runner``; an oracle exception is an infrastructure error."""
    for case in cases:
        if deadline is not None and time.time() >= deadline:
            stage.cut = True
            stage.note = f"cut by --max-seconds after {stage.ran} of {len(cases)} Cases"
            return
        _count(stage.coverage, case)
        try:
            verdict = runner.run_with(case, oracle, timeout)
        except ExecutorError as exc:
            stage.error = f"{exc}"
            return
        stage.ran += 1
        stage.unsupported += verdict.unsupported
        if not verdict.ok:
            stage.failures.append(Finding(stage.name, verdict, oracle))


def _fixed(opts: Options, cases: list[Case]) -> list[Case]:
    """The fixed Cases of the ops ``--ops`` leaves in."""
    if not opts.ops:
        return cases
    wanted = {op.strip() for op in opts.ops.split(",")}
    return [c for c in cases if c.op in wanted]


def corpus_stage(opts: Options, runner: ProcessRunner, deadline: float | None) -> Stage:
    """Replay every Case of the regression corpus."""
    stage = Stage("corpus replay")
    try:
        cases = corpus.load(opts.corpus_dir)
    except ValueError as exc:
        stage.error = str(exc)
        return stage
    if not cases:
        stage.skipped = f"no corpus Cases in {opts.corpus_dir}"
        return stage
    _run_cases(stage, _fixed(opts, cases), runner, "check", deadline=deadline)
    return stage


def suite_command(opts: Options, report: Path, max_seconds: float | None = None) -> list[str]:
    """The pytest command line of the fuzz-suite stage (the one place that knows it)."""
    command = [sys.executable, "-m", "pytest", "-p", "diagfuzz", "--pyargs", "diagfuzz.suite",
               "--hypothesis-profile", "gate", "-n", str(opts.workers), "--impl", opts.impl,
               "--diagfuzz-isolation", "process", "--diagfuzz-timeout", str(opts.timeout),
               f"--diagfuzz-report={report}", f"--rootdir={Path.cwd()}",
               f"--diagfuzz-root={opts.out_dir / 'runs'}", "-q", "-p", "no:cacheprovider"]
    if opts.budget is not None:
        command += ["--diagfuzz-budget", str(opts.budget)]
    for flag, value in (("ops", opts.ops), ("dtypes", opts.dtypes), ("ranks", opts.ranks),
                        ("layouts", opts.layouts), ("max-elements", opts.max_elements),
                        ("max-seconds", max_seconds)):
        if value is not None:
            command.append(f"--diagfuzz-{flag}={value}")
    if opts.strict:
        command.append("--diagfuzz-strict")
    return command


def suite_environment(opts: Options) -> dict[str, str]:
    """The suite's environment: the current directory importable (for ``--impl``), and no
    xdist worker identity inherited (a gate run from inside an xdist worker, as the tests
    do, would name its run directories after that worker)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path.cwd()),
                                                      env.get("PYTHONPATH", "")]))
    return env


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
                                signature=found.signature))
    return int(report.get("cases", 0)), findings, unattributed


def suite_stage(opts: Options, deadline: float | None,
                started: list[subprocess.Popen[str]] | None = None) -> Stage:
    """Run the sharded Hypothesis suite in a pytest subprocess and read its JSON report
    (the subprocess is appended to ``started``, so the caller can stop it)."""
    stage = Stage("fuzz suite")
    if not opts.suite:
        stage.skipped = "--no-suite"
        return stage
    cap = None
    if deadline is not None:
        cap = max(1.0, round(SUITE_SHARE * (deadline - time.time()), 1))
    report_path = opts.out_dir / "suite-report.json"
    report_path.unlink(missing_ok=True)
    command = suite_command(opts, report_path, cap)
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=suite_environment(opts))
    if started is not None:
        started.append(proc)
    text, _ = proc.communicate()
    output = opts.out_dir / "suite-output.txt"
    output.write_text(text, encoding="utf-8")
    if proc.returncode not in (0, 1, 6) or not report_path.exists():
        tail = text.strip().splitlines()[-15:]
        stage.error = (f"pytest exited {proc.returncode} without a usable report "
                       f"(the whole output: {output}):\n" + "\n".join(tail))
        return stage
    report = json.loads(report_path.read_text(encoding="utf-8"))
    stage.ran, stage.failures, unattributed = suite_findings(report)
    stage.unsupported = int(report.get("unsupported_cases", 0))
    stage.coverage = report_coverage(report.get("counts", {}))
    stage.cut = bool(report.get("cut"))
    if stage.cut:
        stage.note = f"cut by --max-seconds ({cap:g} s for this stage)"
    skipped = {k: v for k, v in report.get("skipped", {}).items()}
    if skipped:
        stage.note = "; ".join([stage.note] * bool(stage.note) + [
            f"skipped {k.removeprefix('test_')}: {v}" for k, v in skipped.items()])
    if stage.ran == 0 and not stage.cut:
        stage.error = "the fuzz suite collected or ran no Cases"
    elif unattributed:
        stage.error = ("failures the gate cannot attribute to a Case (see "
                       f"{output}):\n" + "\n".join(unattributed))
    elif proc.returncode == 1 and not stage.failures:
        stage.error = f"pytest failed but its report names no finding; see {output}"
    return stage


def error_parity_stage(opts: Options, runner: ProcessRunner, deadline: float | None) -> Stage:
    """Invalid calls: the impl must refuse them as aten does (``oracles.policy``)."""
    stage = Stage("error parity")
    _run_cases(stage, _fixed(opts, error_parity_cases()), runner, "check", deadline=deadline)
    return stage


def compile_stage(opts: Options, runner: ProcessRunner, deadline: float | None) -> Stage:
    """torch.compile parity on a small fixed sample (``diagfuzz.oracles.check_compile``).

    A Case that also fails with aten itself (``diagfuzz.impl:aten``, same check) shows a
    difference of torch.compile, not of the impl: it is noted, not counted as a failure.
    """
    stage = Stage("torch.compile parity")
    if not opts.compile_sample:
        stage.skipped = "--no-compile"
        return stage
    timeout = max(opts.timeout, COMPILE_TIMEOUT)
    _run_cases(stage, _fixed(opts, compile_cases()), runner, "check_compile", timeout,
               deadline)
    if stage.failures and opts.impl != BASELINE_IMPL:
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


# --- the gate ---------------------------------------------------------------------------

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


def distinct(findings: list[Finding]) -> list[Finding]:
    """One finding per signature over every stage (the first stage's Case represents it;
    counts add up); an invalid Case's wrong exception explained by a valid Case's is
    counted there (``signature.explained_by``)."""
    merged: dict[Signature, Finding] = {}
    for finding in findings:
        seen = merged.get(finding.key)
        if seen is None:
            merged[finding.key] = finding
        else:
            seen.count += finding.count
            seen.dtypes = dict(Counter(seen.dtypes) + Counter(finding.dtypes))
    for signature in list(merged):
        owner = explained_by(signature, set(merged))
        if owner is not None:
            merged[owner].count += merged.pop(signature).count
    return list(merged.values())


def _classify_all(opts: Options, device: str, findings: list[Finding],
                  deadline: float | None) -> tuple[list[Finding], int, list[Path]]:
    """Distinct findings, classified, with reproducers (this run's), saved to the corpus."""
    chosen = distinct(findings)
    saved: list[Path] = []
    for n, finding in enumerate(chosen):
        case = finding.verdict.case
        assert case is not None
        left = None if deadline is None else deadline - time.time()
        if n < opts.max_classify and (left is None or left > 1.0):
            timeout = opts.timeout if finding.oracle == "check" else max(opts.timeout,
                                                                           COMPILE_TIMEOUT)
            if left is not None:
                timeout = min(timeout, left)
            finding.classification = classify(finding.verdict, opts.impl, device,
                                              repeats=opts.repeats, timeout=timeout,
                                              oracle=finding.oracle, strict=opts.strict,
                                              workdir=opts.out_dir / "classify")
        ratio = finding.classification.ratio if finding.classification else ""
        finding.reproducer = write_reproducer(
            case, opts.repro_dir, impl=opts.impl, device=device, timeout=opts.timeout,
            oracle=finding.oracle, verdict=finding.verdict, reproducibility=ratio,
            impl_path=import_roots(), strict=opts.strict)
        if opts.save_corpus and finding.oracle == "check":
            path = opts.corpus_dir / corpus.file_name(case)
            if not path.exists():
                saved.append(corpus.save(case, opts.corpus_dir, verdict=finding.verdict,
                                         impl=opts.impl, reproducibility=ratio))
    unclassified = sum(f.classification is None for f in chosen)
    return chosen, unclassified, saved


def exit_code(stages: list[Stage], findings: list[Finding]) -> int:
    """3 a stage could not run; 1 a deterministic (or unclassified) failure; 2 only flaky
    ones; 6 cut by --max-seconds, nothing failed; 0 clean."""
    if any(s.error for s in stages):
        return EXIT_ERROR
    if any(f.classification is None or f.classification.deterministic for f in findings):
        return EXIT_FAILURE
    if findings:
        return EXIT_FLAKY
    return EXIT_CUT if any(s.cut for s in stages) else EXIT_CLEAN


def _clear_reproducers(directory: Path) -> None:
    """A new run's reproducers replace the last run's (only ours: ``repro_*.py``)."""
    directory.mkdir(parents=True, exist_ok=True)
    for old in directory.glob("repro_*.py"):
        old.unlink()


def _timed(name: str, step: Callable[[], Stage]) -> Stage:
    """Run one stage, timing it; an infrastructure error becomes the stage's error."""
    t0 = time.monotonic()
    try:
        stage = step()
    except (ExecutorError, ImplError, OSError) as exc:
        stage = Stage(name, error=f"{exc!r}")
    stage.seconds = time.monotonic() - t0
    return stage


def run_gate(opts: Options) -> Result:
    """Run every stage, classify what failed, and decide the exit code.

    The fuzz suite (a pytest subprocess with its own workers and executors) runs beside
    the other stages, which share one executor of this process: the gate takes about as
    long as the suite, not the sum of the stages (an H200 host spent 9 s replaying the
    corpus and 12 s on the compile sample around a 36 s suite, BENCHMARKS.md).
    """
    started = time.monotonic()
    deadline = None if opts.max_seconds is None else time.time() + opts.max_seconds
    use_roots(import_roots())  # --impl may name a module of the current directory
    opts.out_dir.mkdir(parents=True, exist_ok=True)
    procs: list[subprocess.Popen[str]] = []  # the suite's, to stop it with the gate
    with ThreadPoolExecutor(1, thread_name_prefix="diagfuzz-gate-suite") as pool:
        suite = pool.submit(_timed, "fuzz suite", lambda: suite_stage(opts, deadline, procs))
        import diagfuzz.ops as ops

        device = opts.device or ops.DEVICE
        # One executor serves the corpus, error-parity and compile stages (a fresh one
        # replaces it after a crash); the suite's workers have their own.
        runner = ProcessRunner(opts.impl, device, timeout=opts.timeout,
                               workdir=opts.out_dir / "executor", strict=opts.strict)
        try:
            runner.launch()  # it starts while this process loads the impl
            try:
                load_impl(opts.impl)
            except ImplError as exc:
                for proc in procs:
                    proc.kill()
                return Result(EXIT_ERROR, [], [], opts.impl, device,
                              time.monotonic() - started, error=str(exc))
            _clear_reproducers(opts.repro_dir)
            corpus_replay = _timed("corpus replay",
                                   lambda: corpus_stage(opts, runner, deadline))
            parity = _timed("error parity", lambda: error_parity_stage(opts, runner, deadline))
            compiled = _timed("torch.compile parity",
                              lambda: compile_stage(opts, runner, deadline))
        except BaseException:  # interrupted: the suite must not outlive the gate
            for proc in procs:
                proc.kill()
            raise
        finally:
            runner.close()
        stages = [corpus_replay, suite.result(), parity, compiled]
    t0 = time.monotonic()
    try:
        findings, unclassified, saved = _classify_all(
            opts, device, [f for s in stages for f in s.failures], deadline)
    except (ExecutorError, ImplError, OSError) as exc:
        return Result(EXIT_ERROR, stages, [], opts.impl, device, time.monotonic() - started,
                      error=f"classification failed: {exc!r}")
    classified = len(findings) - unclassified
    stages.append(Stage("classification", ran=classified * opts.repeats,
                        seconds=time.monotonic() - t0,
                        note=(f"{classified} distinct finding(s) x {opts.repeats} re-runs in "
                              "fresh processes" if findings else "nothing to classify")
                        + (f"; {unclassified} not classified" if unclassified else "")))
    return Result(exit_code(stages, findings), stages, findings, opts.impl, device,
                  time.monotonic() - started, unclassified=unclassified,
                  repro_dir=opts.repro_dir, saved=saved,
                  corpus_dir=opts.corpus_dir if opts.save_corpus else None,
                  cut=any(s.cut for s in stages))


def _env_line() -> str:
    import torch
    import triton

    return f"torch {torch.__version__} · triton {triton.__version__}"


def reproduce_command(finding: Finding) -> str:
    """The one command that reproduces ``finding``."""
    return f"python {finding.reproducer}" if finding.reproducer else "(no reproducer)"
