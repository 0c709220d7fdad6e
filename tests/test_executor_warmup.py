"""An executor warms up before it is ready, and can be spawned without waiting for it.

Without a warm-up the first Cases of a run pay for lazy loading (CUDA modules of each aten op and
dtype, torch modules on the first backward, Triton variants): start-up counted as fuzzing
time. ``diagfuzz.execution.warmup`` pays it before "ready", judging aten against itself only.
"""

from __future__ import annotations

import time

import torch

import diagfuzz.ops as ops
from diagfuzz import oracles
from diagfuzz.core.case import DTYPE_NAMES
from diagfuzz.execution.parent import ProcessRunner
from diagfuzz.execution.warmup import warm_up, warm_up_cases
from diagfuzz.impl import aten
from diagfuzz.specs import SPECS
from tests.faulty.cases import square


def test_warm_up_cases_cover_every_dtype_and_op_and_pass_against_aten() -> None:
    cases = warm_up_cases()
    assert {c.dtype for c in cases} == {n for n in DTYPE_NAMES if hasattr(torch, n)}
    assert {c.op for c in cases} == set(SPECS)
    assert {c.layout.kinds for c in cases} == {("contiguous",), ("sliced", "offset")}
    verdicts = [oracles.check(c, aten, ops.DEVICE) for c in cases]
    assert all(v.ok for v in verdicts), [str(v) for v in verdicts if not v.ok]
    assert warm_up(ops.DEVICE) == len(cases)


def test_executor_reports_its_warm_up_and_a_launch_does_not_wait(tmp_path) -> None:
    with ProcessRunner("diagfuzz.impl:triton_aten", ops.DEVICE, timeout=60,
                       workdir=tmp_path) as runner:
        runner.launch()
        # Spawned, its "ready" (which carries the warm-up count) not yet read.
        assert runner.pid is not None and runner.warmed == 0
        runner.start()  # waits for "ready"
        assert runner.warmed == len(warm_up_cases())
        assert runner.run(square(1)).ok and runner.starts == 1


def test_a_launched_executor_serves_the_first_case_and_closes_cleanly(tmp_path) -> None:
    with ProcessRunner("tests.faulty.wrong:impl", ops.DEVICE, timeout=60,
                       workdir=tmp_path) as runner:
        runner.launch()
        verdict = runner.run(square(1))  # waits for "ready" first
        assert verdict.kind == "mismatch" and runner.starts == 1
    with ProcessRunner("diagfuzz.impl:triton_aten", ops.DEVICE, timeout=60) as runner:
        runner.launch()  # closed before it is ready: nothing hangs
    assert runner.pid is None


def test_a_kernel_bug_is_a_failing_case_not_an_executor_that_cannot_start(tmp_path) -> None:
    """The warm-up runs only the oracle on aten: diagfuzz's kernels broken for 2-byte words
    leave the executor starting as usual, and only the int16 Case fails, as a verdict."""
    int16 = square(1).replace(dtype="int16")
    with ProcessRunner("tests.faulty.int16_kernels:impl", ops.DEVICE, timeout=60,
                       workdir=tmp_path) as runner:
        runner.start()
        assert runner.warmed == len(warm_up_cases())
        float32_verdict, int16_verdict = runner.run(square(1)), runner.run(int16)
        assert runner.starts == 1
    assert float32_verdict.ok
    assert int16_verdict.kind == "error-parity"
    assert "simulated kernel bug" in int16_verdict.details["actual"]["message"]


def test_an_executor_killed_by_a_crash_leaves_the_time_of_what_it_judged(tmp_path) -> None:
    """The gate's time breakdown counts the Cases of executors that crashing Cases killed."""
    from diagfuzz.execution import timing

    with ProcessRunner("tests.faulty.abort:impl", "cpu", timeout=60,
                       workdir=tmp_path) as runner:
        assert runner.run(square(0)).kind == "pass"
        time.sleep(1.1)  # past the once-a-second rewrite
        assert runner.run(square(-1, n=4)).kind == "pass"
        assert runner.run(square(1)).kind == "crash"  # SIGABRT: no clean exit
    total = timing.read(tmp_path)
    assert total is not None and total.first_calls + total.judged == 2
