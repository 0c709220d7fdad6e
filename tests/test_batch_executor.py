"""Executors judge Cases in batches; a crash, hang or poisoned context still costs one Case.

A batch that fails as a whole (its executor died, hung, or was unhealthy after failing
Cases) is judged again one Case at a time in a fresh executor: the Case responsible gets
the crash or hang verdict, every other Case its own verdict, and nothing is lost. The
verdicts equal those of Cases judged alone, on a fixed seed.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

import diagfuzz.ops as ops
from diagfuzz.execution.parent import ProcessRunner
from diagfuzz.execution.timeouts import Calibration, KnownFaults
from diagfuzz.oracles.batch import MAX_BATCH
from tests.faulty.cases import square
from tests.test_batch_oracle import mixed, outcome


def submitted(runner: ProcessRunner, cases: list) -> list:
    """Every Case submitted while the (started) executor is stopped, so it finds them all
    queued and batches them whatever the machine's load; then the verdicts, in order.
    (``runner.window`` must exceed ``len(cases)``: a full window waits for a verdict.)"""
    assert runner.pid is not None and runner.window > len(cases)
    os.kill(runner.pid, signal.SIGSTOP)
    try:
        tickets = [runner.submit(case) for case in cases]
    finally:
        os.kill(runner.pid, signal.SIGCONT)
    done = runner.drain()
    assert [t for t, _ in done] == tickets
    return [v for _, v in done]


def test_a_batch_of_64_with_one_crashing_case(tmp_path: Path) -> None:
    """abort.py dies on offset 1: that Case is the crash, the other 63 are judged."""
    offsets = [0, 2, -1, -2] * 16
    offsets[37] = 1
    cases = [square(o, n=4) for o in offsets]
    assert len(cases) == MAX_BATCH
    with ProcessRunner("tests.faulty.abort:impl", "cpu", timeout=30, workdir=tmp_path,
                       window=2 * MAX_BATCH, learnt=measured()) as runner:
        runner.start()
        verdicts = submitted(runner, cases)
        failures = list(runner.batch_failures)
    assert [v.case for v in verdicts] == cases
    assert [v.kind for v in verdicts] == ["crash" if o == 1 else "pass" for o in offsets]
    crash = verdicts[37]
    assert "SIGABRT" in crash.message and "abort.py" in crash.details["stderr_tail"]
    assert crash.details["batch_attempt"].startswith("the executor died in a batch")
    assert failures == ["the executor died"]


def test_a_hang_in_a_batch_is_its_cases(tmp_path: Path) -> None:
    offsets = [0, 2, -1, 0, 3, 2]  # hang.py never returns on offset -1
    with ProcessRunner("tests.faulty.hang:impl", "cpu", timeout=3.0, workdir=tmp_path,
                       window=2 * MAX_BATCH, learnt=measured()) as runner:
        runner.start()
        verdicts = submitted(runner, [square(o, n=4) for o in offsets])
    assert [v.kind for v in verdicts] == ["hang" if o == -1 else "pass" for o in offsets]
    assert "hang.py" in verdicts[2].details["stderr_tail"]


def test_a_poisoned_batch_blames_its_case() -> None:
    """poison.py raises like a sticky CUDA error on offset 1 and breaks every later kernel:
    the executor is unhealthy after the batch, which is judged again alone."""
    offsets = [0, 2, 1, 0, 3]
    with ProcessRunner("tests.faulty.poison:impl", ops.DEVICE, timeout=30,
                       window=2 * MAX_BATCH, learnt=measured()) as runner:
        runner.start()
        verdicts = submitted(runner, [square(o, n=4) for o in offsets])
        after = runner.run(square(0))
    assert [v.kind for v in verdicts] == ["crash" if o == 1 else "pass" for o in offsets]
    assert verdicts[2].check == "executor:health"
    assert after.kind == "pass"


def measured() -> tuple[Calibration, KnownFaults]:
    """A run's learnt times with one answer measured: until a run has one, its runners send
    Cases alone (``ProcessRunner.submit``), and these tests are about batches."""
    calibration = Calibration()
    calibration.observe("check", [square(0)], 0.01, first=True)
    return calibration, KnownFaults()


def test_batched_verdicts_equal_verdicts_alone() -> None:
    """A mutant that breaks several checks, judged through executors in batches and alone:
    the same verdicts, and the batches really held several Cases."""
    cases = mixed(6, ("diagonal", "diagonal_backward", "diag_embed"))
    impl = "tests.mutants.unwritten_last:impl"
    with ProcessRunner(impl, "cpu", timeout=60, window=2 * MAX_BATCH,
                       learnt=measured()) as batched:
        batched.start()
        together = [outcome(v) for v in submitted(batched, cases)]
        sizes = dict(batched.batch_sizes)
    with ProcessRunner(impl, "cpu", timeout=60, batch=False,
                       window=2 * MAX_BATCH, learnt=measured()) as alone_runner:
        alone_runner.start()
        alone = [outcome(v) for v in submitted(alone_runner, cases)]
    assert together == alone
    assert any(kind != "pass" for kind, *_ in alone)
    assert sizes == {len(cases): 1}, sizes  # one batch: all were queued
    assert sum(n * count for n, count in sizes.items()) == len(cases)


def test_a_failure_that_passes_alone_is_kept(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """An implementation wrong on its first call only (a flaky bug): the Case that failed
    in the batch passes when judged again alone, and its failure still stands."""
    monkeypatch.setenv("DIAGFUZZ_FIRST_CALL_MARK", str(tmp_path / "called"))
    cases = [square(o, n=4) for o in (0, 2, 0, -1)]
    with ProcessRunner("tests.test_pipeline_suite:first_call_wrong", "cpu", timeout=60,
                       window=2 * MAX_BATCH, learnt=measured()) as runner:
        runner.start()  # its warm-up judges aten, never the implementation
        verdicts = submitted(runner, cases)
        sizes = dict(runner.batch_sizes)
    assert [v.kind for v in verdicts] == ["mismatch", "pass", "pass", "pass"]
    assert verdicts[0].details["alone"] == "passed when judged again alone"
    assert sizes == {4: 1}, sizes


def test_runners_know_which_oracles_batch() -> None:
    from diagfuzz import oracles
    from diagfuzz.execution import messages

    assert tuple(oracles.BATCHED) == messages.BATCHED_ORACLES
