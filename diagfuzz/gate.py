"""``diagfuzz gate``: what a kernel library runs before merging a kernel change.

Stages, in order: the regression corpus, the fuzz suite (pytest + xdist under the
derandomized ``gate`` Hypothesis profile), fixed error-parity Cases, a torch.compile parity
sample. Every failing Case is then re-run R times in fresh processes (deterministic R/R or
flaky k/R), gets a reproducer script, and is saved to the corpus.

Exit codes: 0 clean; 1 at least one deterministic failure; 2 only flaky failures; 3 the gate
could not run (impl not importable, nothing collected, an infrastructure error).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from diagfuzz import corpus
from diagfuzz.case import Case, Layout
from diagfuzz.classify import DEFAULT_REPEATS, Classification, classify
from diagfuzz.executor import DEFAULT_TIMEOUT, ExecutorError, ProcessRunner
from diagfuzz.impl import DEFAULT_IMPL, ImplError, load_impl
from diagfuzz.repro import write_reproducer
from diagfuzz.verdict import KINDS, Verdict

EXIT_CLEAN, EXIT_FAILURE, EXIT_FLAKY, EXIT_ERROR = 0, 1, 2, 3

#: Examples the fuzz suite draws by default (None: the gate profile's, see profiles.py).
DEFAULT_BUDGET: int | None = None
#: The reference impl a compile-parity failure is checked against before it counts.
BASELINE_IMPL = "diagfuzz.impl:aten"
#: Seconds a torch.compile parity Case may take (inductor compiles: slow on a CPU).
COMPILE_TIMEOUT = 300.0
#: Seconds per Case before it is a hang.


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


@dataclass
class Finding:
    """A failing Case from one stage, and what the gate learnt about it."""

    stage: str
    verdict: Verdict
    oracle: str = "check"
    test_id: str = ""
    classification: Classification | None = None
    reproducer: Path | None = None

    @property
    def key(self) -> tuple[str, str, str]:
        assert self.verdict.case is not None
        return (corpus.case_id(self.verdict.case), self.verdict.kind, self.oracle)


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
    coverage: dict[str, Counter[str]] = field(default_factory=dict)


# --- fixed Cases of the error-parity and torch.compile stages ---------------------------

def _case(op: str, shape: tuple[int, ...], offset: int = 0, dim1: int = 0, dim2: int = 1,
          dtype: str = "float32", **kw: Any) -> Case:
    layout = kw.pop("layout", None) or Layout.contiguous(shape)
    sizes = kw.pop("sizes", shape)
    return Case(op, tuple(sizes), offset, dim1, dim2, dtype, layout, **kw)


def error_parity_cases() -> list[Case]:
    """One invalid call per invalid class (diagfuzz.strategies' names) and op.

    The impl must raise exactly where aten raises, with the same error class.
    """
    d = "diagonal"
    b = "diagonal_backward"
    grad3 = Layout.contiguous((3,))
    return [
        _case(d, (), dim1=0, dim2=1, invalid="rank0", layout=Layout((), (), 0)),
        _case(d, (5,), invalid="rank1"),
        _case(b, (4,), sizes=(4,), invalid="rank1", layout=Layout.contiguous((4,))),
        _case(d, (3, 4), dim1=0, dim2=2, invalid="dim_above_range"),
        _case(b, (3,), sizes=(3, 4), dim1=5, dim2=1, invalid="dim_above_range", layout=grad3),
        _case(d, (3, 4), dim1=-3, dim2=0, invalid="dim_below_range"),
        _case(d, (3, 4), dim1=1, dim2=-1, invalid="same_dims"),
        _case(b, (3,), sizes=(3, 4), dim1=0, dim2=0, invalid="same_dims", layout=grad3),
        _case(b, (2,), sizes=(3, 4), invalid="grad_output_shape",
              layout=Layout.contiguous((2,))),
        _case(b, (3,), sizes=(3, -2), invalid="negative_size", layout=grad3),
        _case(d, (3, 4), invalid="out_dtype", out_dtype="int32"),
        _case(d, (3, 4), invalid="out_device", out_device="meta"),
        _case(d, (3, 4), invalid="non_integer", raw_args=(("offset", 1.5),)),
        _case(b, (3,), sizes=(3, 4), invalid="non_integer", layout=grad3,
              raw_args=(("input_sizes", [3, 1.5]),)),
        _case(d, (3, 4), invalid="int_overflow", raw_args=(("dim1", 2**63),)),
        _case(d, (3, 4), invalid="non_tensor", raw_args=(("input", "x"),)),
    ]


def compile_cases() -> list[Case]:
    """A small torch.compile parity sample: contiguous, offset, strided, backward."""
    return [
        _case("diagonal", (4, 5)),
        _case("diagonal", (3, 4, 5), offset=-1, dim1=2, dim2=0),
        _case("diagonal", (6, 4), offset=1, layout=Layout((6, 4), (1, 6), 0, ("permuted",))),
        _case("diagonal_backward", (3,), sizes=(3, 4), offset=1,
              layout=Layout.contiguous((3,))),
    ]


# --- coverage ---------------------------------------------------------------------------

def _count(coverage: dict[str, Counter[str]], case: Case) -> None:
    """Add ``case`` to per-axis counts, with the fuzz report's classes (diagfuzz.report)."""
    from diagfuzz.report import classify as classes_of
    from diagfuzz.report import group_of

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
               timeout: float | None = None) -> None:
    """Run ``cases`` through ``runner``; an oracle exception is an infrastructure error."""
    for case in cases:
        _count(stage.coverage, case)
        try:
            verdict = runner.run_with(case, oracle, timeout)
        except ExecutorError as exc:
            stage.error = f"{exc}"
            return
        stage.ran += 1
        if not verdict.ok:
            stage.failures.append(Finding(stage.name, verdict, oracle))


def corpus_stage(opts: Options, runner: ProcessRunner) -> Stage:
    """Replay every Case of the regression corpus."""
    stage = Stage("corpus replay")
    try:
        cases = corpus.load(opts.corpus_dir)
    except ValueError as exc:
        stage.error = str(exc)
        return stage
    if not cases:
        stage.skipped = f"corpus {opts.corpus_dir} is empty"
        return stage
    _run_cases(stage, cases, runner, "check")
    return stage


def suite_command(opts: Options, report: Path) -> list[str]:
    """The pytest command line of the fuzz-suite stage (the one place that knows it)."""
    command = [sys.executable, "-m", "pytest", "-p", "diagfuzz", "--pyargs", "diagfuzz.suite",
               "--hypothesis-profile", "gate", "-n", str(opts.workers), "--impl", opts.impl,
               "--diagfuzz-isolation", "process", "--diagfuzz-timeout", str(opts.timeout),
               "--diagfuzz-report", str(report),
               "--diagfuzz-root", str(opts.out_dir / "runs"), "-q", "-p", "no:cacheprovider"]
    if opts.budget is not None:
        command += ["--diagfuzz-budget", str(opts.budget)]
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
    """(Cases run, failures with a Case, failures the gate cannot attribute to a Case)."""
    findings, unattributed = [], []
    for failure in report.get("failures", []):
        kind, data = failure.get("kind", ""), failure.get("case")
        if kind not in KINDS or not data:
            unattributed.append(f"{kind} in {failure.get('test_id', '?')}: "
                                f"{failure.get('message', '')}")
            continue
        verdict = Verdict(kind, failure.get("check", ""), failure.get("message", ""),
                          Case.from_json(data), failure.get("details") or {})
        findings.append(Finding("fuzz suite", verdict, "check", failure.get("test_id", "")))
    return int(report.get("cases", 0)), findings, unattributed


def suite_stage(opts: Options) -> Stage:
    """Run the sharded Hypothesis suite in a pytest subprocess and read its JSON report."""
    stage = Stage("fuzz suite")
    if not opts.suite:
        stage.skipped = "--no-suite"
        return stage
    report_path = opts.out_dir / "suite-report.json"
    report_path.unlink(missing_ok=True)
    command = suite_command(opts, report_path)
    proc = subprocess.run(command, capture_output=True, text=True, check=False,
                          env=suite_environment(opts))
    output = opts.out_dir / "suite-output.txt"
    output.write_text(proc.stdout + proc.stderr, encoding="utf-8")
    if proc.returncode not in (0, 1) or not report_path.exists():
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-15:]
        stage.error = (f"pytest exited {proc.returncode} without a usable report "
                       f"({' '.join(command)}):\n" + "\n".join(tail))
        return stage
    report = json.loads(report_path.read_text(encoding="utf-8"))
    stage.ran, stage.failures, unattributed = suite_findings(report)
    stage.coverage = report_coverage(report.get("counts", {}))
    if stage.ran == 0:
        stage.error = "the fuzz suite collected or ran no Cases"
    elif unattributed:
        stage.error = ("failures the gate cannot attribute to a Case (see "
                       f"{output}):\n" + "\n".join(unattributed))
    elif proc.returncode == 1 and not stage.failures:
        stage.error = f"pytest failed but its report names no failure; see {output}"
    return stage


def error_parity_stage(runner: ProcessRunner) -> Stage:
    """Invalid calls: the impl must raise exactly when aten raises."""
    stage = Stage("error parity")
    _run_cases(stage, error_parity_cases(), runner, "check")
    return stage


def compile_stage(opts: Options, runner: ProcessRunner) -> Stage:
    """torch.compile parity on a small fixed sample (``diagfuzz.oracles.check_compile``).

    A Case that also fails with aten itself (``diagfuzz.impl:aten``, same check) shows a
    difference of torch.compile, not of the impl: it is noted, not counted as a failure.
    """
    from diagfuzz import oracles

    stage = Stage("torch.compile parity")
    if not opts.compile_sample:
        stage.skipped = "--no-compile"
        return stage
    if not callable(getattr(oracles, "check_compile", None)):
        stage.skipped = "diagfuzz.oracles has no check_compile in this version"
        return stage
    timeout = max(opts.timeout, COMPILE_TIMEOUT)
    _run_cases(stage, compile_cases(), runner, "check_compile", timeout)
    if stage.failures and opts.impl != BASELINE_IMPL:
        with ProcessRunner(BASELINE_IMPL, runner.device, timeout=timeout,
                           oracle="check_compile") as baseline:
            kept, shared = [], []
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


def _classify_all(opts: Options, device: str, findings: list[Finding]) -> tuple[list[Finding],
                                                                                  int]:
    """Distinct findings (by Case, kind, oracle), classified, with reproducers, saved."""
    distinct: dict[tuple[str, str, str], Finding] = {}
    for finding in findings:
        distinct.setdefault(finding.key, finding)
    chosen = list(distinct.values())
    for finding in chosen[:opts.max_classify]:
        timeout = opts.timeout if finding.oracle == "check" else max(opts.timeout,
                                                                       COMPILE_TIMEOUT)
        finding.classification = classify(finding.verdict, opts.impl, device,
                                          repeats=opts.repeats, timeout=timeout,
                                          oracle=finding.oracle,
                                          workdir=opts.out_dir / "classify")
        case = finding.verdict.case
        assert case is not None
        finding.reproducer = write_reproducer(
            case, opts.out_dir, impl=opts.impl, device=device, timeout=opts.timeout,
            oracle=finding.oracle, verdict=finding.verdict,
            reproducibility=finding.classification.ratio)
        if opts.save_corpus and finding.oracle == "check":
            corpus.save(case, opts.corpus_dir, verdict=finding.verdict, impl=opts.impl,
                        reproducibility=finding.classification.ratio)
    return chosen, max(0, len(chosen) - opts.max_classify)


def exit_code(stages: list[Stage], findings: list[Finding]) -> int:
    """0 clean, 1 a deterministic failure, 2 only flaky ones, 3 a stage could not run."""
    if any(s.error for s in stages):
        return EXIT_ERROR
    if any(f.classification is None or f.classification.deterministic for f in findings):
        return EXIT_FAILURE
    return EXIT_FLAKY if findings else EXIT_CLEAN


def run_gate(opts: Options) -> Result:
    """Run every stage in order, classify what failed, and decide the exit code."""
    started = time.monotonic()
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))  # --impl may name a module of the current dir
    import diagfuzz.ops as ops

    device = opts.device or ops.DEVICE
    try:
        load_impl(opts.impl)
    except ImplError as exc:
        return Result(EXIT_ERROR, [], [], opts.impl, device, time.monotonic() - started,
                      error=str(exc))
    opts.out_dir.mkdir(parents=True, exist_ok=True)
    stages: list[Stage] = []
    # One executor serves the corpus, error-parity and compile stages (a fresh one replaces
    # it after a crash); the suite's workers have their own.
    runner = ProcessRunner(opts.impl, device, timeout=opts.timeout,
                           workdir=opts.out_dir / "executor")
    steps = (("corpus replay", lambda: corpus_stage(opts, runner)),
             ("fuzz suite", lambda: suite_stage(opts)),
             ("error parity", lambda: error_parity_stage(runner)),
             ("torch.compile parity", lambda: compile_stage(opts, runner)))
    try:
        for name, step in steps:
            t0 = time.monotonic()
            try:
                stage = step()
            except (ExecutorError, ImplError, OSError) as exc:
                stage = Stage(name, error=f"{exc!r}")
            stage.seconds = time.monotonic() - t0
            stages.append(stage)
    finally:
        runner.close()
    try:
        findings, unclassified = _classify_all(
            opts, device, [f for s in stages for f in s.failures])
    except (ExecutorError, ImplError, OSError) as exc:
        return Result(EXIT_ERROR, stages, [], opts.impl, device, time.monotonic() - started,
                      error=f"classification failed: {exc!r}")
    return Result(exit_code(stages, findings), stages, findings, opts.impl, device,
                  time.monotonic() - started, unclassified=unclassified)


def _env_line() -> str:
    import torch
    import triton

    return f"torch {torch.__version__} · triton {triton.__version__}"


def reproduce_command(finding: Finding) -> str:
    """The one command that reproduces ``finding``."""
    return f"diagfuzz repro {finding.reproducer}" if finding.reproducer else "(unclassified)"
