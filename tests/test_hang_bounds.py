"""A known hang or crash is paid for once: timeouts follow the impl's measured times, and an
op whose hang (or crash) is confirmed costs each later Case of it a short allowance, alone,
never a whole timeout and never another confirmation.

The planted faults (``tests.faulty.shape_fault``) hit a common shape: every rank-4 tensor
whose first dim is 3. With the whole timeout per hanging Case (60 s, the default), the
runs below would take an hour; their bounds are a minute.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from diagfuzz.core.case import Case, Layout
from diagfuzz.core.runtime import DEVICE
from diagfuzz.execution import history
from diagfuzz.execution.beacon import Beacon, Marks, watch_compiles
from diagfuzz.execution.parent import ProcessRunner
from diagfuzz.execution.timeouts import (
    CONFIRM_FLOOR,
    CONFIRM_MULTIPLIER,
    FIRST_FLOOR,
    FLOOR,
    KNOWN_CAP,
    KNOWN_FLOOR,
    KNOWN_MULTIPLIER,
    KNOWN_UNMEASURED,
    MULTIPLIER,
    SCALE_CLASSES,
    Calibration,
    KnownFaults,
    confirm_allowance,
    learnt_for,
)
from tests.faulty.cases import square
from tests.faulty.slow_start import SECONDS as SLOW_START_SECONDS

CAP = 60.0  # the default --timeout: what every hang would cost without calibration


def diagonal(sizes: tuple[int, ...], dtype: str = "float32") -> Case:
    return Case("diagonal", sizes, 0, 0, 1, dtype, Layout.contiguous(sizes))


def hangs(case: Case) -> bool:
    return len(case.sizes) == 4 and case.sizes[0] == 3


# --- the rule -----------------------------------------------------------------------------

def test_allowance_is_the_cap_until_measured_then_follows_the_slowest_stretch() -> None:
    calib = Calibration()
    small, large = diagonal((4, 4)), diagonal((512, 512))
    assert calib.allowance("check", small, CAP, first=True) == CAP
    assert calib.allowance("check", small, CAP, first=False) == CAP
    # A confirmed hang's next Case, before anything was measured: not the whole timeout.
    assert calib.allowance("check", small, CAP, first=True, known=True) == KNOWN_UNMEASURED
    calib.observe("check", [small], 0.5, first=True)
    assert calib.allowance("check", small, CAP, first=True) == MULTIPLIER * 0.5
    # No warm Case seen yet: a warm one is allowed what a first call is.
    assert calib.allowance("check", small, CAP, first=False) == MULTIPLIER * 0.5
    calib.observe("check", [small], 0.003, first=False)
    assert calib.allowance("check", small, CAP, first=False) == FLOOR
    assert calib.allowance("check", small, CAP, first=False, known=True) == KNOWN_FLOOR
    # A larger size class than any seen: scaled by its elements (a factor of 4 a class,
    # SCALE_CLASSES at most: past it a slow Case is confirmed, not waited on), but for a
    # known hang no slower than the op's slowest Case seen.
    assert calib.allowance("check", large, CAP, first=False) == pytest.approx(
        max(FLOOR, MULTIPLIER * 0.003 * 4 ** SCALE_CLASSES))
    scaled = Calibration()
    scaled.observe("check", [small], 0.05, first=False)
    assert SCALE_CLASSES == 1 and scaled.allowance("check", large, CAP, first=False) == \
        pytest.approx(MULTIPLIER * 0.05 * 4)  # 512 x 512 is seven classes up: 4x, not 4**7
    # Its confirmation, though, waits 5x what its elements warrant, however many classes
    # up (a large Case that is merely slow answers there, never a hang): here the cap.
    assert scaled.scaled_allowance("check", large) == pytest.approx(MULTIPLIER * 0.05 * 4**7)
    assert confirm_allowance(2.0, CAP, scaled.scaled_allowance("check", large)) == CAP
    assert confirm_allowance(0.5, CAP, 3.0) == CONFIRM_MULTIPLIER * 3.0
    assert scaled.scaled_allowance("check", diagonal((64, 64))) == 0.0  # its fixed costs
    assert confirm_allowance(2.0, CAP, 0.0) == max(CONFIRM_FLOOR, CONFIRM_MULTIPLIER * 2.0)
    assert Calibration().scaled_allowance("check", large) == 0.0  # nothing measured
    assert calib.allowance("check", large, CAP, first=False, known=True) == KNOWN_FLOOR
    calib.observe("check", [large], 0.4, first=False)
    assert calib.allowance("check", large, CAP, first=False) == MULTIPLIER * 0.4
    assert calib.allowance("check", small, CAP, first=False) == FLOOR  # its own class
    # Never past the caller's timeout; other oracles calibrate on their own.
    calib.observe("check", [small], 100.0, first=True)
    assert calib.allowance("check", small, CAP, first=True) == CAP
    assert calib.allowance("check_compile", small, 300.0, first=True) == 300.0
    assert FIRST_FLOOR >= FLOOR >= KNOWN_FLOOR


def test_a_batchs_stretch_measures_its_largest_cases_only() -> None:
    """The slowest stretch of a batch is its largest Case's: the small Cases beside it
    keep their own measure (else each would wait what the large one took)."""
    calib = Calibration()
    small, large = diagonal((4, 4)), diagonal((512, 512))
    calib.observe("check", [small], 0.003, first=False)
    calib.observe("check", [small, large, small], 4.0, first=False)
    assert calib.allowance("check", small, CAP, first=False) == FLOOR
    assert calib.allowance("check", large, CAP, first=False) == MULTIPLIER * 4.0
    assert calib.allowance("check", small, CAP, first=False, known=True) == KNOWN_FLOOR


def test_a_known_hangs_case_waits_at_most_the_known_cap() -> None:
    """A confirmed hang's Case in a fresh executor (a first call again) waits no more than
    KNOWN_CAP, whatever the op's slowest first call took."""
    calib = Calibration()
    small = diagonal((4, 4))
    calib.observe("check", [diagonal((65, 65))], 2.7, first=True)
    calib.observe("check", [small], 0.003, first=False)
    assert calib.allowance("check", small, CAP, first=True) == MULTIPLIER * 2.7
    assert calib.allowance("check", small, CAP, first=True, known=True) == KNOWN_CAP == 3.0
    assert calib.allowance("check", small, CAP, first=False, known=True) == KNOWN_FLOOR


def test_known_faults_are_shared_through_the_run_file(tmp_path: Path) -> None:
    path = tmp_path / "known-faults"
    one, other = KnownFaults(str(path)), KnownFaults(str(path), refresh=0.0)
    assert not other.has("diagonal")
    one.add("diagonal", "hang")
    one.add("diagonal", "hang")  # once in the file
    assert other.has("diagonal") and other.has("diagonal", "hang")
    assert not other.has("diagonal", "crash") and not other.has("diag_embed")
    assert path.read_text() == "diagonal hang\n"
    assert learnt_for(path) is learnt_for(str(path))  # one pair per run in a process
    assert learnt_for(None) is not learnt_for(None)


# --- a runner over a common-shape fault -----------------------------------------------------

def _cases() -> list[Case]:
    """40 small diagonal Cases, every fourth one a hanging rank-4 shape."""
    cases = []
    for i in range(40):
        n = 2 + i % 5
        cases.append(diagonal((3, n, n, 2)) if i % 4 == 3 else diagonal((n + 1, n)))
    return cases


def test_a_common_shape_hang_costs_a_short_allowance_per_case(tmp_path: Path) -> None:
    cases = _cases()
    started = time.monotonic()
    with ProcessRunner("tests.faulty.shape_fault:hang", DEVICE, timeout=CAP,
                       workdir=tmp_path, learnt=learnt_for(tmp_path / "known")) as runner:
        for case in cases:
            runner.submit(case)
        verdicts = [v for _, v in runner.drain()]
        spares_used = runner.spares_used
    took = time.monotonic() - started
    assert [v.kind for v in verdicts] == ["hang" if hangs(c) else "pass" for c in cases]
    hung = [v for v in verdicts if v.kind == "hang"]
    # The first hang was confirmed, alone in a fresh executor; every later one is that
    # known hang, judged alone with the known allowance, no stack dump, no confirmation.
    assert "known_hang" not in hung[0].details
    later = hung[1:]
    assert all("known_hang" in v.details and "first_attempt" not in v.details for v in later)
    # Stopped inside the executor (a stall in Python takes the watch's signal), which is
    # then replaced: the stop may have landed anywhere, so no later Case runs there. From
    # the first Case of the op sent once its hang was confirmed, a spare is kept started
    # ahead, so every replacement after a known hang is one, the first included, and no
    # hang waits on an executor's start (the last Case hangs: nothing follows it, and its
    # spare is left unused).
    assert all(v.details.get("stopped_in_executor") for v in later)
    assert hangs(cases[-1]) and spares_used == len(later) - 1
    # (The unused last spare writes its timing file only if it got that far before the
    # runner closed it: on a loaded machine it may not have.)
    assert runner_starts_of(tmp_path) - (2 + len(later)) in (0, 1)
    assert all(v.details["timeout"] < CAP and v.details["timeout_cap"] == CAP for v in hung)
    assert "shape_fault.py" in hung[0].details["stderr_tail"]  # where the first one stuck
    faults = (tmp_path / "known").read_text().splitlines()
    assert [line for line in faults if not line.startswith("{")] == ["diagonal hang"]
    # Ten hangs at the whole timeout: ten minutes; a CPU loaded threefold took 90 s here.
    assert took < 3 * CAP, took


def test_a_rare_shape_hang_is_found_and_the_rest_pass(tmp_path: Path) -> None:
    cases = [diagonal((n + 1, n)) for n in range(2, 12)] * 3
    cases.insert(17, diagonal((7, 5)))
    with ProcessRunner("tests.faulty.shape_fault:rare_hang", DEVICE, timeout=CAP,
                       workdir=tmp_path) as runner:
        for case in cases:
            runner.submit(case)
        verdicts = [v for _, v in runner.drain()]
    kinds = [v.kind for v in verdicts]
    assert kinds.count("hang") == 1 and kinds[17] == "hang", kinds
    assert verdicts[17].details["timeout"] < CAP


def test_a_stop_the_impl_turns_into_its_own_error_is_still_the_hang(tmp_path: Path) -> None:
    """The watch's stop lands wherever the Case is stuck; a C call there may turn it into an
    error of its own (torch's argument parser: a TypeError). The Case stalled all the same:
    its verdict is the known hang's, never an error-parity finding of the impl's."""
    cases = _cases()[:16]
    with ProcessRunner("tests.faulty.shape_fault:hang_stop_turned_error", DEVICE,
                       timeout=CAP, workdir=tmp_path,
                       learnt=learnt_for(tmp_path / "known")) as runner:
        for case in cases:
            runner.submit(case)
        verdicts = [v for _, v in runner.drain()]
    assert [v.kind for v in verdicts] == ["hang" if hangs(c) else "pass" for c in cases]
    later = [v for v in verdicts if v.kind == "hang"][1:]
    assert later and all(v.details.get("stopped_in_executor") for v in later)
    assert all("TypeError" in v.details["stderr_tail"] for v in later)


def test_a_stall_a_fresh_executor_outlasts_is_no_hang(tmp_path: Path) -> None:
    """A float64 first call stalls 3 s in every process, past its calibrated first-call
    allowance (the float32 first calls were quick): judged again alone in a fresh executor,
    where it stalls as long, with a confirmation's longer allowance it passes."""
    warm = [diagonal((n + 1, n)) for n in range(2, 9)] * 3
    cases = [*warm, diagonal((4, 3), "float64"), *warm[:4]]
    with ProcessRunner("tests.faulty.slow_start:impl", DEVICE, timeout=CAP,
                       workdir=tmp_path, learnt=learnt_for(tmp_path / "known")) as runner:
        for case in cases:
            runner.submit(case)
        verdicts = [v for _, v in runner.drain()]
    slow = verdicts[len(warm)]
    assert slow.kind == "pass", slow
    assert slow.details["first_attempt"]["kind"] == "hang"  # it did stall past the first
    assert slow.details["first_attempt"]["details"]["timeout"] < SLOW_START_SECONDS
    assert all(v.ok for v in verdicts)
    assert not (tmp_path / "known").exists()


def test_a_hang_the_call_before_left_is_confirmed_after_that_call_not_dropped(
        tmp_path: Path) -> None:
    """A diagonal_backward with offset 2 leaves work the next call waits on forever (as a
    kernel that never ends is met at the next synchronisation): alone in a fresh executor
    the hanging Case passes, so its confirmation replays the call just before it first."""
    polluter = Case("diagonal_backward", (3, 3), 2, 0, 1, "float32", Layout.contiguous((3, 3)))
    cases = [*(diagonal((n + 1, n)) for n in range(2, 6)), polluter, diagonal((3, 3)),
             diagonal((4, 4))]
    with ProcessRunner("tests.faulty.history:left_running", DEVICE, timeout=CAP,
                       workdir=tmp_path, learnt=learnt_for(tmp_path / "known")) as runner:
        for case in cases:
            runner.submit(case)
        verdicts = [v for _, v in runner.drain()]
    hang = verdicts[-2]
    assert hang.kind == "hang", hang
    assert hang.details["first_attempt"]["kind"] == "hang"
    # Its history in the confirming executor: the call before it, made again.
    assert [c.case for c in history.read(hang.details["history"])] == [polluter]
    assert verdicts[-1].ok and all(v.ok for v in verdicts[:-2])
    assert (tmp_path / "known").read_text().split() == ["diagonal", "hang"]


def test_every_case_of_one_op_hanging_costs_each_a_short_allowance(tmp_path: Path) -> None:
    embeds = [Case("diag_embed", (n,), 0, -2, -1, "float32", Layout.contiguous((n,)))
              for n in range(1, 13)]
    # A passing Case first: before any answer a first call may take the whole timeout.
    cases = [c for pair in zip([diagonal((n + 1, n)) for n in range(1, 13)], embeds,
                               strict=True) for c in pair]
    started = time.monotonic()
    with ProcessRunner("tests.faulty.shape_fault:embed_hang", DEVICE, timeout=CAP,
                       workdir=tmp_path) as runner:
        for case in cases:
            runner.submit(case)
        verdicts = [v for _, v in runner.drain()]
    took = time.monotonic() - started
    assert [v.kind for v in verdicts] == ["pass", "hang"] * 12
    assert sum("known_hang" in v.details for v in verdicts) == 11
    assert took < CAP, took


def runner_starts_of(workdir: Path) -> int:
    """Executors that started under ``workdir`` (each writes its timing file)."""
    return len(list(workdir.glob("timing-*.json")))


def test_a_known_crash_is_not_confirmed_again_and_costs_only_its_case(tmp_path: Path) -> None:
    cases = _cases()
    with ProcessRunner("tests.faulty.shape_fault:crash", DEVICE, timeout=CAP,
                       workdir=tmp_path, learnt=learnt_for(tmp_path / "known")) as runner:
        for case in cases:
            runner.submit(case)
        verdicts = [v for _, v in runner.drain()]
        starts = runner.starts
    assert [v.kind for v in verdicts] == ["crash" if hangs(c) else "pass" for c in cases]
    crashed = [v for v in verdicts if v.kind == "crash"]
    assert all("first_attempt" not in v.details for v in crashed[1:])
    # One executor per crash and the first, plus at most the first crash's confirmation
    # and its batch judged again alone.
    assert starts <= len(crashed) + 3, starts
    faults = (tmp_path / "known").read_text().splitlines()  # (and the shapes learnt)
    assert [line for line in faults if not line.startswith("{")] == ["diagonal crash"]


def test_a_hang_inside_a_batch_is_found_by_progress_not_the_whole_timeout(
        tmp_path: Path) -> None:
    # Calibrated first, on passing Cases; then a batch of twelve, one of which hangs.
    calibration, known = learnt_for(tmp_path / "known")
    warm = [diagonal((n + 1, n)) for n in range(2, 7)] * 4
    with ProcessRunner("tests.faulty.shape_fault:hang", DEVICE, timeout=CAP,
                       learnt=(calibration, known)) as runner:
        for case in warm:
            runner.submit(case)
        assert all(v.ok for _, v in runner.drain())
        batch = [diagonal((n + 1, n)) for n in range(2, 7)] * 2
        batch.insert(5, diagonal((3, 2, 2, 2)))
        started = time.monotonic()
        for case in batch:
            runner.submit(case)
        verdicts = [v for _, v in runner.drain()]
        took = time.monotonic() - started
    assert [v.kind for v in verdicts] == ["hang" if hangs(c) else "pass" for c in batch]
    hang = verdicts[5]
    assert "no progress within" in hang.details["batch_attempt"]
    assert hang.details["timeout"] < CAP
    assert took < CAP / 2, took


def test_progress_and_compiles_reach_the_runner_through_the_beacon(tmp_path: Path) -> None:
    beacon = Beacon(tmp_path)
    marks = Marks(str(beacon.path))
    assert beacon.read() == (0.0, False)
    marks.begin()
    last, compiling = beacon.read()
    assert last == marks.last and not compiling
    marks.compile_begin()
    assert beacon.read()[1] is True
    marks.compile_end()
    assert beacon.read() == (marks.last, False)
    beacon.reset()
    assert beacon.read() == (0.0, False)
    beacon.close()
    assert not beacon.path.exists()


def test_triton_compiles_are_marked_and_earlier_hooks_kept() -> None:
    from triton import knobs

    runtime = knobs.runtime
    before = (runtime.jit_cache_hook, runtime.jit_post_compile_hook)
    seen: list[str] = []
    runtime.jit_cache_hook = lambda *a, **k: seen.append("cache")
    runtime.jit_post_compile_hook = lambda *a, **k: seen.append("post")
    try:
        marks = Marks(None)
        assert watch_compiles(marks)
        assert not runtime.jit_cache_hook(key="k")  # compiles: not skipped
        assert marks.compiling == 1
        runtime.jit_post_compile_hook(key="k")
        assert marks.compiling == 0 and seen == ["cache", "post"]
    finally:
        runtime.jit_cache_hook, runtime.jit_post_compile_hook = before


def test_the_suite_shares_known_hangs_through_the_environment(tmp_path: Path,
                                                              monkeypatch) -> None:
    # A gate names its run's file to the suite's workers; they read the gate's faults.
    from diagfuzz.execution.timeouts import KNOWN_FAULTS_ENV, learnt_of_run

    path = tmp_path / "gate-known"
    KnownFaults(str(path)).add("diag_embed", "hang")
    monkeypatch.setenv(KNOWN_FAULTS_ENV, str(path))
    assert learnt_of_run(tmp_path / "own")[1].has("diag_embed", "hang")
    monkeypatch.delenv(KNOWN_FAULTS_ENV)
    assert not learnt_of_run(tmp_path / "own")[1].has("diag_embed")
    assert os.fspath(path) != os.fspath(tmp_path / "own")


def test_a_known_hangs_case_after_a_kill_gets_a_first_calls_allowance(tmp_path: Path) -> None:
    """After a kill, a Case of an op with a confirmed hang is its next executor's first
    call of its op and dtype, submitted or sent again: it gets the first call's allowance,
    not that of a call the killed executor had made warm (a slow first call stopped at a
    warm call's 0.2 s was a false hang Case, and a kill)."""
    learnt = learnt_for(None)
    calibration, known = learnt
    small = diagonal((4, 4))
    calibration.observe("check", [small], 0.5, first=True)  # first calls: 1.5 s
    calibration.observe("check", [small], 0.01, first=False)  # warm calls: KNOWN_FLOOR
    known.add("diagonal", "hang")
    with ProcessRunner("diagfuzz.impl:aten", DEVICE, timeout=CAP, learnt=learnt,
                       workdir=tmp_path) as runner:
        runner.submit(small)
        assert runner._queue[0].stall == KNOWN_MULTIPLIER * 0.5
        runner.drain()
        runner.submit(small)
        assert runner._queue[0].stall == KNOWN_FLOOR  # warm in this executor
        runner.drain()
        runner._kill()
        runner.submit(small)
        assert runner._queue[0].stall == KNOWN_MULTIPLIER * 0.5
        [(_, verdict)] = runner.drain()
    assert verdict.ok


def test_a_known_faults_line_read_while_it_is_written_is_read_whole_later(
        tmp_path: Path) -> None:
    path = tmp_path / "known"
    path.write_text("diagonal hang\ndiag_embed ha")  # another process mid-write
    known = KnownFaults(str(path), refresh=0)
    assert known.has("diagonal", "hang") and not known.has("diag_embed")
    with path.open("a") as f:
        f.write("ng\n")
    assert known.has("diag_embed", "hang")


def test_a_case_waiting_when_its_ops_hang_is_confirmed_elsewhere_gets_a_known_hangs_wait(
        tmp_path: Path) -> None:
    """A Case sent before its op had a confirmed hang waits a first call's allowance (10x
    the slowest first call: 20 s here, a minute where a library compiles on first calls).
    Another process of the run confirms the op's hang meanwhile: the wait is worked out
    again, a known hang's (3x, at most 3 s), and the Case is that hang's, not confirmed
    again (rather than its whole first allowance and then a confirmation)."""
    import threading

    path = str(tmp_path / "known-faults")
    learnt = learnt_for(path)
    calibration, _ = learnt
    calibration.observe("check", [diagonal((3, 3))], 2.0, first=True)
    other = KnownFaults(path)  # another process of the run
    confirm = threading.Timer(1.0, other.add, ("diagonal", "hang"))
    with ProcessRunner("tests.faulty.hang:impl", DEVICE, timeout=CAP, learnt=learnt,
                       workdir=tmp_path / "runner") as runner:
        runner.submit(square(-1))
        assert not runner._queue[0].stall  # no known hang when it was sent
        confirm.start()
        [(_, verdict)] = runner.drain()
    assert verdict.kind == "hang"
    assert verdict.details["timeout"] == KNOWN_CAP  # not MULTIPLIER * 2.0
    assert "known_hang" in verdict.details and "first_attempt" not in verdict.details
