"""The fixed stages over a pool of executors: each specialisation on one executor, a crash
still its Case's, and the same findings and counts whatever the number of executors."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from diagfuzz.core import corpus
from diagfuzz.core.case import Case, Layout, Values
from diagfuzz.core.verdict import Verdict
from diagfuzz.gate.options import Options
from diagfuzz.gate.pool import (
    Router,
    auto_stage_executors,
    grown_stage_executors,
    layout_class,
    specialisation,
    stage_pool,
)
from diagfuzz.gate.progress import GateProgress
from diagfuzz.gate.stages import Context, run_cases, stage_executors
from tests.faulty.cases import square


def _case(dtype: str = "float32", offset: int = 0, layout: Layout | None = None,
          rank: int = 2, **more: Any) -> Case:
    sizes = (3,) * rank
    return Case("diagonal", sizes, offset, 0, 1, dtype, layout or Layout.contiguous(sizes),
                **more)


def test_layout_classes_are_what_a_kernel_specialises_on() -> None:
    assert layout_class(Layout.contiguous((3, 4))) == "contiguous"
    assert layout_class(Layout((3, 4), (1, 3), 0, ("permuted",))) == "strided"
    assert layout_class(Layout((3, 4), (0, 1), 0, ("expanded",))) == "expanded"
    assert layout_class(Layout((3, 4), (4, 1), 2, ("offset",))) == "contiguous+offset"
    # A size-1 dim's stride does not matter: torch calls such a view contiguous.
    assert layout_class(Layout((1, 4), (7, 1), 0, ("sliced",))) == "contiguous"


def test_a_specialisation_is_op_dtype_rank_layout_class_and_call() -> None:
    base = specialisation(_case())
    assert specialisation(_case(offset=2, values=Values(7))) == base  # values, offset
    strided = Layout((3, 3), (1, 3), 0, ("permuted",))
    for other in (_case("float64"), _case(rank=3), _case(layout=strided),
                  _case(out_dtype="float32"), _case(invalid="dim_out_of_range"),
                  square(0, op="diagonal_backward")):
        assert specialisation(other) != base, other


def _drive(router: Router, executors: int, window: int = 3) -> list[tuple[int, int]]:
    """What a stage submits, one Case a tick, to executors that answer a Case every 2, 3,
    ... ticks (executor 0 the fastest); nothing is submitted while every one is full."""
    in_flight = [0] * executors
    steps = []
    tick = 0
    while True:
        tick += 1
        for i in range(executors):
            if in_flight[i] and tick % (i + 2) == 0:
                in_flight[i] -= 1
        if min(in_flight) >= window:
            continue
        step = router.next(in_flight)
        if step is None:
            return steps
        steps.append(step)
        in_flight[step[0]] += 1


def test_each_specialisation_goes_whole_to_one_executor_and_both_get_work() -> None:
    dtypes = ["float32", "float64", "int32", "int64", "bool", "float16"]
    cases = [_case(dtypes[i % 6], offset=i % 3, rank=2 + i // 6 % 2) for i in range(60)]
    router = Router(cases, 2)
    steps = _drive(router, 2)
    assert sorted(index for _, index in steps) == list(range(len(cases)))  # each once
    executor_of: dict[object, set[int]] = {}
    for executor, index in steps:
        executor_of.setdefault(specialisation(cases[index]), set()).add(executor)
    assert len(executor_of) == 12 and all(len(e) == 1 for e in executor_of.values())
    load = Counter(executor for executor, _ in steps)
    # Groups of 5 go where there is room: the faster executor takes more, both a share.
    assert load[0] > load[1] >= 20, load
    # An executor's Cases come a group at a time: a JIT library compiles, then reuses.
    for executor in (0, 1):
        keys = [specialisation(cases[i]) for i in router.given[executor]]
        runs = [k for n, k in enumerate(keys) if n == 0 or keys[n - 1] != k]
        assert len(runs) == len(set(keys))


def test_the_largest_group_goes_first_and_one_executor_takes_every_group_in_turn() -> None:
    cases = [_case("float64")] + [_case("float32", offset=o) for o in range(3)]
    router = Router(cases, 1)
    assert [index for _, index in _drive(router, 1)] == [1, 2, 3, 0]
    assert router.given == [[1, 2, 3, 0]]


def test_the_default_leaves_the_suites_workers_their_cpus() -> None:
    assert auto_stage_executors(2, 2) == 1  # CI: never a second executor
    assert auto_stage_executors(2, 0) == 1
    assert auto_stage_executors(16, 8) == 7  # one GPU, 16 CPUs: the gate's 8 workers
    assert auto_stage_executors(128, 8) == 8
    assert stage_executors(Options(stage_executors=3), "cpu") == 3
    suite_off = Options(suite=False)
    from diagfuzz.harness.workers import cpu_count

    assert stage_executors(suite_off, "cpu") == auto_stage_executors(cpu_count(), 0)
    assert stage_executors(Options(workers="0"), "cpu") == auto_stage_executors(cpu_count(), 1)


def test_a_crash_in_a_pool_of_two_is_its_cases_and_every_other_case_is_judged(
        tmp_path: Path) -> None:
    """tests.faulty.abort aborts on offset 1: one float64 Case; the other dtypes' groups
    are judged by the other executor meanwhile and after."""
    cases = [_case(dtype, offset) for dtype in ("float32", "float64", "int32", "int64")
             for offset in (0, -1, 2)]
    cases.insert(5, _case("float64", 1))
    out = io.StringIO()
    ctx = Context(opts=Options(), progress=GateProgress(stream=out))
    stage = ctx.stage("covering array")
    pool = stage_pool("tests.faulty.abort:impl", "cpu", 2, 60.0, tmp_path, False)
    with pool:
        run_cases(ctx, stage, cases, pool, "check")
        starts = [r.starts for r in pool.runners]
    assert not stage.error and stage.ran == len(cases) == 13
    assert [f.verdict.kind for f in stage.failures] == ["crash"]
    assert stage.failures[0].verdict.case == _case("float64", 1)
    assert stage.coverage["dtype"] == Counter({"float32": 3, "int32": 3, "int64": 3,
                                               "float64": 4})
    assert starts[0] >= 1 and starts[1] >= 1 and max(starts) >= 2  # both; one replaced
    logs = sorted(p.parent.name for p in tmp_path.glob("*/executor.log"))
    assert logs == ["0", "1"]


def test_the_pool_grows_onto_the_suites_cpus_once_the_suite_has_ended(
        tmp_path: Path) -> None:
    """On a CPU the fixed stages take the CPUs the suite's workers leave when it ends: a
    second executor judges groups from then on, and the findings are the same Cases."""
    cases = [_case(dtype, offset) for dtype in ("float32", "float64", "int32", "int64")
             for offset in (0, -1, 2)]
    cases.insert(5, _case("float64", 1))

    def run(suite_done: bool, where: Path) -> tuple[Any, int, list[int]]:
        ctx = Context(opts=Options(), progress=GateProgress(stream=io.StringIO()))
        pool = stage_pool("tests.faulty.abort:impl", "cpu", 1, 60.0, where / "pool", False)
        made = iter(range(8))
        ctx.grown_executors = grown_stage_executors(2, "cpu", 1)
        ctx.new_executor = lambda: stage_pool("tests.faulty.abort:impl", "cpu", 1, 60.0,
                                              where / f"grown-{next(made)}", False).runners[0]
        ctx.growing = pool
        if suite_done:
            ctx.suite_done.set()
        stage = ctx.stage("covering array")
        with pool:
            run_cases(ctx, stage, cases, pool, "check")
            starts = [r.starts for r in pool.runners]
        return stage, len(pool.runners), starts

    alone, executors_alone, _ = run(False, tmp_path / "running")
    grown, executors_grown, starts = run(True, tmp_path / "ended")
    assert (executors_alone, executors_grown) == (1, 2) and min(starts) >= 1
    assert [f.verdict.case for f in grown.failures] == [f.verdict.case for f in alone.failures]
    assert grown.ran == alone.ran == len(cases)
    assert grown_stage_executors(2, "cuda:0", 1) == 1  # a GPU executor's start costs more
    assert grown_stage_executors(32, "cpu", 3) == 8


class _Backwards:
    """A pool whose executors answer in the reverse of submission order, at the end: the
    latest-routed executor's last Case first."""

    def __init__(self, executors: int) -> None:
        self.runners = [_Lane() for _ in range(executors)]
        self.sent: list[tuple[int, Case, int]] = []

    @property
    def in_flight(self) -> int:
        return len(self.sent)

    def submit(self, case: Case, oracle: str, timeout: float | None, executor: int) -> int:
        self.sent.append((len(self.sent) + 1, case, executor))
        self.runners[executor].in_flight += 1
        return len(self.sent)

    def poll(self) -> list[tuple[int, Verdict]]:
        return []

    def drain(self) -> list[tuple[int, Verdict]]:
        done = [(ticket, Verdict("mismatch", "bitwise:aten", "differ", case))
                for ticket, case, _ in reversed(self.sent)]
        self.sent.clear()
        return done


class _Lane:
    in_flight = 0


def test_findings_keep_the_stages_case_order_whatever_answers_first() -> None:
    """The first Case of a cause represents it: it must not be whichever executor was
    quicker."""
    cases = [_case(dtype, offset) for offset in (0, 1, 2) for dtype in ("float32", "int32")]
    ctx = Context(opts=Options(), progress=GateProgress(stream=io.StringIO()))
    stage = ctx.stage("opinfo samples")
    pool = _Backwards(2)
    run_cases(ctx, stage, cases, pool, "check")  # type: ignore[arg-type]
    assert [case for _, case, _ in pool.sent] != cases  # routed by group, not in order
    assert stage.ran == 6 and [f.verdict.case for f in stage.failures] == cases


# --- the whole gate, N = 1 and N = 2 ------------------------------------------------------

def _gate(tmp_path: Path, executors: int) -> dict[str, Any]:
    """The gate on three planted causes, the fixed stages only, a corpus Case replayed."""
    where = tmp_path / f"n{executors}"
    where.mkdir()
    corpus.save(Case("diagonal", (2, 2), 0, 0, 1, "float32", Layout.contiguous((2, 2))),
                where / "corpus")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(Path.cwd()), env.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, "-m", "diagfuzz", "gate", "--impl", "tests.faulty.three_causes:impl",
         "--no-suite", "--no-opinfo", "--no-compile", "--no-sequences",
         "--ops", "diag_embed,diagonal",
         "--repeats", "1", "--no-save", "--report", "report.json",
         "--stage-executors", str(executors)],
        cwd=where, capture_output=True, text=True, check=False, env=env, timeout=600)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = json.loads((where / "report.json").read_text())
    report["run_dir"] = str(where / report["run_dir"])  # relative to where it ran
    return report


def _judged(report: dict[str, Any]) -> dict[str, Any]:
    """What the gate judged: the report less paths, times and the executors' timing."""
    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items()
                    if k not in ("reproducer", "reproduce", "seconds", "run_dir",
                                 "repro_dir", "disk", "timing", "history")}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value
    return strip(report)


def test_one_or_two_stage_executors_judge_the_same_findings_and_counts(
        tmp_path: Path) -> None:
    one, two = _gate(tmp_path, 1), _gate(tmp_path, 2)
    assert one["timing"]["stage_executors"] == 1 and two["timing"]["stage_executors"] == 2
    assert one["timing"]["executors"]["fixed stages"]["executors"] == 1
    assert two["timing"]["executors"]["fixed stages"]["executors"] == 2
    stages = {s["name"]: s for s in one["stages"]}
    assert stages["covering array"]["cases"] > 1000 and stages["covering array"]["failures"]
    assert stages["corpus replay"]["cases"] == 1 and stages["error parity"]["failures"]
    assert len(one["findings"]) == 2  # diagonal's signed zero; diag_embed's assert
    assert _judged(one) == _judged(two)
    # Spare executors, launched as the stages found the causes, took every re-run.
    for report in (one, two):
        reruns = sorted(p.name for p in (Path(report["run_dir"]) / "classify").iterdir()
                        if p.is_dir())
        assert reruns == ["spare-0", "spare-1"]


def test_stage_executors_is_auto_or_a_positive_number(
        capsys: pytest.CaptureFixture[str]) -> None:
    from diagfuzz.gate.cli import gate_options, parser

    def parsed(*argv: str) -> Options:
        return gate_options(parser().parse_args(["gate", *argv]))  # type: ignore[no-any-return]

    assert parsed().stage_executors is None
    assert parsed("--stage-executors", "auto").stage_executors is None
    assert parsed("--stage-executors", "3").stage_executors == 3
    for bad in ("0", "-1", "many"):
        with pytest.raises(SystemExit) as exc:
            parsed("--stage-executors", bad)
        assert exc.value.code == 4  # a usage error
    assert "--stage-executors" in capsys.readouterr().err


# --- the torch.compile stage's own executor -----------------------------------------------

class _Idle:
    """An executor stand-in: nothing spawned, nothing judged."""

    def __init__(self) -> None:
        self.closed = False

    def launch(self) -> None:
        pass

    def request_close(self) -> None:
        pass

    def close(self, wait: float = 0.0) -> None:
        self.closed = True


def _gate_stages(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                 executors: int) -> dict[str, Any]:
    """Gate.body over stand-in executors and stages: which thread ran each stage, on how
    many executors, and whether the covering stage saw the compile stage start."""
    import threading

    from diagfuzz.execution.fanout import FanoutRunner
    from diagfuzz.gate import run

    seen: dict[str, Any] = {"threads": {}, "executors": {}}
    compiling = threading.Event()
    monkeypatch.setattr(run, "stage_pool", lambda *a: FanoutRunner(
        [_Idle() for _ in range(executors)]))  # type: ignore[list-item]

    def stand_in(name: str) -> Any:
        def step(ctx: Context, runner: Any) -> Any:
            seen["threads"][name] = threading.current_thread().name
            seen["executors"][name] = len(runner.runners)
            if name == "torch.compile parity":
                compiling.set()
            if name == "covering array":  # waits for a compile stage running beside it
                seen["beside"] = compiling.wait(3.0)
            return ctx.stage(name)
        return step

    for attr, name in [("corpus_stage", "corpus replay"), ("covering_stage", "covering array"),
                       ("error_parity_stage", "error parity"),
                       ("sequence_stage", "sequence search"),
                       ("opinfo_stage", "opinfo samples"),
                       ("compile_stage", "torch.compile parity"),
                       ("audit_stage", "registration audit"), ("huge_stage", "huge tier")]:
        monkeypatch.setattr(run, attr, stand_in(name))
    opts = Options(impl="diagfuzz.impl:aten", suite=False, opinfo=False, device="cpu",
                   stage_executors=executors, quiet=True, out_dir=tmp_path,
                   run_dir=tmp_path / "run")
    gate = run.Gate(opts)
    gate.body()
    seen["order"] = [s.name for s in gate.stages()]
    seen["closed"] = all(r.closed for r in (gate.runner.runners  # type: ignore[union-attr]
                                            + (gate.compile_runner.runners
                                               if gate.compile_runner else [])))
    return seen


def test_with_two_executors_the_compile_stage_runs_beside_the_others_on_its_own(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen = _gate_stages(monkeypatch, tmp_path, 3)
    assert seen["beside"]
    assert seen["threads"]["torch.compile parity"] != seen["threads"]["covering array"]
    # The sequence search makes fresh executors of its own, beside the pool's stages.
    assert seen["threads"]["sequence search"] != seen["threads"]["covering array"]
    assert seen["executors"]["torch.compile parity"] == 1
    assert seen["executors"]["covering array"] == 2
    assert seen["closed"]
    # The report keeps its order, whichever stage finished first.
    assert seen["order"] == ["corpus replay", "covering array", "fuzz suite", "error parity",
                             "sequence search", "opinfo samples", "torch.compile parity",
                             "registration audit", "huge tier"]


def test_with_one_executor_the_compile_stage_runs_in_turn(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen = _gate_stages(monkeypatch, tmp_path, 1)
    assert seen["beside"] is False  # it had not started while the covering stage ran
    assert seen["threads"]["torch.compile parity"] == seen["threads"]["covering array"]
    assert seen["executors"]["torch.compile parity"] == 1
    assert seen["closed"]
