"""ProcessRunner: a crash or a hang costs exactly one Case; every other Case still runs."""

from __future__ import annotations

import pytest

import diagfuzz.ops as ops
from diagfuzz.execution.child import health_check
from diagfuzz.execution.parent import ExecutorError, ProcessRunner
from diagfuzz.impl import ImplError
from tests.faulty.cases import square

TIMEOUT = 3.0  # seconds: tiny Cases take milliseconds, even on a loaded 2-core runner


def test_abort_costs_one_case_and_the_run_goes_on(tmp_path) -> None:
    offsets = [0, 1, 2, -1]
    with ProcessRunner("tests.faulty.abort:impl", "cpu", timeout=30,
                       workdir=tmp_path) as runner:
        verdicts = [runner.run(square(o)) for o in offsets]
        starts = runner.starts
    assert [v.kind for v in verdicts] == ["pass", "crash", "pass", "pass"]
    assert all(v.case == square(o) for v, o in zip(verdicts, offsets, strict=True))
    crash = verdicts[1]
    assert "SIGABRT" in crash.message and crash.details["exitcode"] == -6
    # The crash came in a used executor, so it was confirmed once in a fresh one.
    assert crash.details["first_attempt"]["kind"] == "crash"
    assert crash.details["executor_cases"] == 0
    assert starts == 3  # the first, the fresh one for the retry, the replacement
    # With a workdir the verdict carries faulthandler's stack of the dying executor.
    assert "Fatal Python error: Aborted" in crash.details["stderr_tail"]
    assert "abort.py" in crash.details["stderr_tail"]


def test_per_request_oracle() -> None:
    with ProcessRunner("tests.faulty.wrong:impl", "cpu", timeout=60) as runner:
        # An oracle that raises is the harness's error, not a verdict; the executor stays.
        with pytest.raises(ExecutorError, match="no_such_oracle"):
            runner.run_with(square(1), "no_such_oracle")
        verdict = runner.run_with(square(1), "check", timeout=45.0)
        assert runner.starts == 1
    assert verdict.kind == "mismatch" and verdict.check.startswith("bitwise")


def test_hang_is_cut_off_and_the_run_goes_on(tmp_path) -> None:
    offsets = [-1, 0, 1, 0]
    with ProcessRunner("tests.faulty.hang:impl", "cpu", timeout=TIMEOUT,
                       workdir=tmp_path) as runner:
        verdicts = [runner.run(square(o)) for o in offsets]
    assert [v.kind for v in verdicts] == ["hang", "pass", "pass", "pass"]
    assert verdicts[0].check == "executor:timeout"
    assert "hang.py" in verdicts[0].details["stderr_tail"]  # where it was stuck
    assert "first_attempt" not in verdicts[0].details  # a fresh executor: no retry needed


def test_sticky_error_fails_the_health_check_and_replaces_the_executor() -> None:
    # On the kernels' own device: there the health check runs diagfuzz's kernel, which the
    # simulated sticky error poisons (on a GPU machine a "cpu" executor checks with aten).
    with ProcessRunner("tests.faulty.poison:impl", ops.DEVICE, timeout=30) as runner:
        poisoned = runner.run(square(1))
        after = runner.run(square(0))  # would fail in the poisoned process
        starts = runner.starts
    assert poisoned.kind == "crash" and poisoned.check == "executor:health"
    assert "illegal memory access" in poisoned.message
    assert poisoned.details["original"]["kind"] != "pass"  # what the oracle saw first
    assert after.kind == "pass" and starts == 2


def test_a_kernel_left_running_costs_a_calibrated_health_wait(tmp_path) -> None:
    """A failing Case that leaves the device stuck (a kernel that never ends; the host
    waits in C, where no signal reaches it) blocks the health check after it for good. The
    runner waits for that check as long as the checks it measured warrant, not its whole
    health timeout: every such Case of a run would pay that wait."""
    from diagfuzz.execution.timeouts import KNOWN_HEALTH_FLOOR, learnt_for

    learnt = learnt_for(None)
    learnt[1].add("diagonal", "hang")  # a confirmed hang of the op: the shortest wait
    with ProcessRunner("tests.faulty.left_running:impl", ops.DEVICE, timeout=30,
                       workdir=tmp_path, learnt=learnt) as runner:
        assert runner.health_timeout == 30.0
        stuck = runner.run(square(1))
        after = runner.run(square(0))  # would wait for good in the stuck process
        starts = runner.starts
    assert stuck.kind == "crash" and stuck.check == "executor:health"
    assert f"health check gave no answer within {KNOWN_HEALTH_FLOOR:g}s" in stuck.message
    assert stuck.details["original"]["kind"] == "mismatch"  # what the oracle saw first
    assert after.kind == "pass" and starts == 2


def test_the_health_wait_follows_the_checks_measured() -> None:
    from diagfuzz.execution.timeouts import (
        HEALTH_FLOOR,
        KNOWN_HEALTH_FLOOR,
        MULTIPLIER,
        Calibration,
    )

    calibration = Calibration()
    assert calibration.health_allowance(30.0) == 30.0  # nothing measured: the cap
    assert calibration.health_allowance(30.0, known=True) == 30.0
    calibration.observe_health(0.004)
    assert calibration.health_allowance(30.0) == HEALTH_FLOOR
    assert calibration.health_allowance(30.0, known=True) == KNOWN_HEALTH_FLOOR
    assert calibration.health_allowance(5.0) == 5.0  # never past the cap
    calibration.observe_health(2.0)  # a slow machine: its checks set the wait
    assert calibration.health_allowance(60.0) == MULTIPLIER * 2.0
    assert calibration.health_allowance(60.0, known=True) == MULTIPLIER * 2.0


def test_mismatch_keeps_a_healthy_executor() -> None:
    with ProcessRunner("tests.faulty.wrong:impl", "cpu", timeout=30) as runner:
        first = runner.run(square(0))
        pid = runner.pid
        wrong = runner.run(square(1))
        after = runner.run(square(0))
        assert runner.pid == pid and runner.starts == 1  # health check passed: kept
    assert (first.kind, wrong.kind, after.kind) == ("pass", "mismatch", "pass")


def test_missing_impl_is_an_impl_error() -> None:
    runner = ProcessRunner("tests.faulty.no_such_module:impl", "cpu", timeout=30)
    with pytest.raises(ImplError, match="no_such_module"):
        runner.run(square(0))
    runner.close()


def test_executor_that_cannot_start_is_an_executor_error() -> None:
    runner = ProcessRunner("diagfuzz.impl:aten", "no-such-device", timeout=30)
    with pytest.raises(ExecutorError, match="failed to start"):
        runner.run(square(0))
    runner.close()


def test_timeout_must_be_positive() -> None:
    with pytest.raises(ValueError, match="timeout"):
        ProcessRunner("diagfuzz.impl:aten", "cpu", timeout=0)


def test_timeout_from_environment(monkeypatch) -> None:
    monkeypatch.setenv("DIAGFUZZ_TIMEOUT", "7.5")
    assert ProcessRunner("diagfuzz.impl:aten", "cpu").timeout == 7.5
    monkeypatch.setenv("DIAGFUZZ_TIMEOUT", "soon")
    with pytest.raises(ValueError, match="DIAGFUZZ_TIMEOUT"):
        ProcessRunner("diagfuzz.impl:aten", "cpu")


def test_health_check_passes_on_a_sound_runtime() -> None:
    health_check("cpu")  # raises if diagonal_copy of a 2x2 is wrong


def test_stderr_tail_is_the_dying_cases_own_output(tmp_path) -> None:
    """The tail is cut at the executor's marker for the Case, not at a log size the runner
    took itself: under load a queued Case can abort before the runner looks (the tail of
    test_abort_costs_one_case_and_the_run_goes_on once came back empty)."""
    from diagfuzz.execution.messages import CASE_MARKER
    from diagfuzz.execution.parent import _tail

    log = tmp_path / "executor.log"
    earlier = b"an earlier executor's stack\n"
    log.write_bytes(earlier + CASE_MARKER.format(0).encode() + b"case 0 warning\n"
                    + CASE_MARKER.format(1).encode() + b"Fatal Python error: Aborted\n")
    assert _tail(log, len(earlier), 1) == "Fatal Python error: Aborted\n"
    assert _tail(log, len(earlier), 0).startswith("case 0 warning\n")
    assert "earlier" not in _tail(log, len(earlier), 2)  # no marker yet: all of this one's


def test_a_poisoned_executor_is_summarised_by_its_error_line() -> None:
    """CUDA's errors end in advice lines and a blank one: the crash's message names the
    error itself (seen on an H200: an illegal address from an int32 index that wrapped)."""
    from diagfuzz.execution.parent import error_line

    trace = ("Traceback (most recent call last):\n  File \"x.py\", line 1, in f\n"
             "torch.AcceleratorError: CUDA error: an illegal memory access was encountered\n"
             "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
             "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n\n")
    assert error_line(trace) == ("torch.AcceleratorError: CUDA error: an illegal memory "
                                 "access was encountered")
    assert error_line("mismatch [bitwise]: 3 of 8 elements differ\n") == (
        "mismatch [bitwise]: 3 of 8 elements differ")
    assert error_line("") == "?"
