"""A stop always ends: past ``STOP_BOUND`` the process kills what it started, writes what
it holds and exits, whatever a child (ignoring SIGTERM), a thread (blocked in an import)
or its own writing (blocked on a pipe) is doing. The bound's clock is unit-tested with a
fake exit; whole gates run with a short bound (``DIAGFUZZ_STOP_BOUND``)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from diagfuzz.execution import stopbound
from diagfuzz.execution.stopbound import StopBound, descendants
from tests.test_gate_stop import _environment, _no_process_left, _processes_with, _wait_for

IGNORES_SIGTERM = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                   "print('ready', flush=True); time.sleep(120)")


class _Exit:
    def __init__(self) -> None:
        self.codes: list[int] = []
        self.called = threading.Event()

    def __call__(self, code: int) -> None:
        self.codes.append(code)
        self.called.set()


def test_past_the_bound_children_are_killed_and_what_is_held_is_written(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stopbound, "WRITE_BOUND", 0.5)
    child = subprocess.Popen([sys.executable, "-c", IGNORES_SIGTERM], stdout=subprocess.PIPE,
                             text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
        child.send_signal(signal.SIGTERM)  # ignored
        assert child.pid in descendants()
        written: list[str] = []
        exit = _Exit()
        bound = StopBound(lambda: written.append("report") or 1, bound=0.8, exit=exit)
        start = time.monotonic()
        bound.arm()
        bound.arm()  # a second signal does not restart the clock
        assert exit.called.wait(5)
        assert 0.2 <= time.monotonic() - start <= 1.5
        assert exit.codes == [1] and written == ["report"]
        assert child.wait(5) == -signal.SIGKILL
    finally:
        child.kill()


def test_a_writer_that_blocks_still_ends_with_the_stopped_code(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stopbound, "WRITE_BOUND", 0.3)
    never = threading.Event()
    exit = _Exit()
    bound = StopBound(lambda: int(never.wait()), bound=0.3, exit=exit)
    start = time.monotonic()
    bound.arm()
    assert exit.called.wait(5) and exit.codes == [7]
    assert time.monotonic() - start <= 1.5


def test_outputs_written_by_the_cooperative_path_are_not_written_again() -> None:
    exit = _Exit()
    calls: list[int] = []
    bound = StopBound(lambda: calls.append(1) or 3, bound=0.1, exit=exit)
    bound.written(2)
    bound.arm()
    assert exit.called.wait(5) and exit.codes == [2] and calls == []
    quiet = _Exit()
    disarmed = StopBound(lambda: 0, bound=0.1, exit=quiet)
    disarmed.arm()
    disarmed.disarm()
    assert not quiet.called.wait(0.5)


def _wait_for_marks(mark: Path, proc: subprocess.Popen[str], n: int, limit: float) -> None:
    end = time.monotonic() + limit
    while time.monotonic() < end and proc.poll() is None:
        if mark.is_dir() and len(list(mark.iterdir())) >= n:
            return
        time.sleep(0.1)
    raise AssertionError(f"{n} stuck imports never appeared in {mark}; exit {proc.poll()}")


def _stuck_gate(tmp_path: Path, *extra: str, stuck: int, bound: float = 4.0
                ) -> tuple[subprocess.Popen[str], str, float]:
    """A gate whose impl import never ends (the stages' thread, the suite's pytest and
    the executor: ``stuck`` of them, each ignoring SIGTERM outside the gate), SIGTERMed
    once they are stuck; (process, marker, seconds from the signal to its exit)."""
    marker = uuid.uuid4().hex
    mark = tmp_path / "stuck"
    env = dict(_environment(marker), DIAGFUZZ_TEST_STUCK_MARK=str(mark),
               DIAGFUZZ_STOP_BOUND=str(bound))
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[1]),
                                         env.get("PYTHONPATH", "")])
    proc = subprocess.Popen(
        [sys.executable, "-m", "diagfuzz", "gate", "--impl", "tests.faulty.stuck_import:impl",
         "-n", "1", "--no-compile", "--no-opinfo", "--no-sequences", "--report", "report.json",
         "--junit", "junit.xml", *extra],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for_marks(mark, proc, stuck, 120)
        proc.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        proc.wait(timeout=60)
    finally:
        proc.kill()
    return proc, marker, time.monotonic() - signalled


def test_a_gate_stuck_in_its_impl_import_and_children_that_ignore_sigterm_ends(
        tmp_path: Path) -> None:
    proc, marker, seconds = _stuck_gate(tmp_path, stuck=3)  # gate thread, suite, executor
    out = proc.stdout.read() if proc.stdout else ""
    assert proc.returncode == 7, out
    assert seconds <= 4.0 + 1.5, seconds
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["stopped"] == "SIGTERM" and report["exit_code"] == 7
    assert any(s["name"] == "fuzz suite" and s["stopped"] for s in report["stages"])
    assert ET.parse(tmp_path / "junit.xml").getroot() is not None
    assert "STOPPED" in out
    # Written by the bound's writer: the run is found where a finished run's would be.
    assert (tmp_path / ".diagfuzz/gate/latest").resolve() == (
        tmp_path / report["run_dir"]).resolve()
    _no_process_left(marker)


def test_a_gate_whose_own_writing_blocks_ends_with_what_it_wrote(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "summary.md")  # nobody reads it: writing the summary blocks
    proc, marker, seconds = _stuck_gate(tmp_path, "--no-suite", "--summary", "summary.md",
                                        stuck=2)  # gate thread, executor
    assert proc.returncode == 7
    assert seconds <= 4.0 + 1.5, seconds
    assert json.loads((tmp_path / "report.json").read_text())["stopped"] == "SIGTERM"
    assert not _processes_with(marker)


def test_a_fuzz_run_whose_worker_never_returns_ends_within_the_bound(tmp_path: Path) -> None:
    """``pytest -p diagfuzz``: a worker stuck in the impl with SIGTERM ignored (xdist
    would wait for it 10 s, then kill it); the run ends within the bound, report written."""
    marker = uuid.uuid4().hex
    mark = tmp_path / "stuck"
    env = dict(_environment(marker), DIAGFUZZ_TEST_STUCK_MARK=str(mark),
               DIAGFUZZ_STOP_BOUND="4")
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[1]),
                                         env.get("PYTHONPATH", "")])
    report = tmp_path / "report.json"
    with (tmp_path / "out.txt").open("w") as output:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pytest", "-p", "diagfuzz", "--pyargs", "diagfuzz.suite",
             "-n", "1", "--impl=tests.faulty.stuck_call:impl",
             "--diagfuzz-isolation=inprocess", "--diagfuzz-ops=diagonal",
             f"--diagfuzz-root={tmp_path / 'root'}", f"--diagfuzz-report={report}",
             "-p", "no:cacheprovider", f"--rootdir={tmp_path}"],
            cwd=tmp_path, env=env, stdout=output, stderr=subprocess.STDOUT, text=True)
        try:
            _wait_for_marks(mark, proc, 1, 120)
            proc.send_signal(signal.SIGTERM)
            signalled = time.monotonic()
            proc.wait(timeout=60)
        finally:
            proc.kill()
    seconds = time.monotonic() - signalled
    assert proc.returncode == 7, (tmp_path / "out.txt").read_text()
    assert seconds <= 4.0 + 1.5, seconds
    assert json.loads(report.read_text())["stopped"] == "SIGTERM"
    _no_process_left(marker)


@pytest.mark.parametrize(("stage", "impl", "extra"), [
    ("torch.compile parity", "tests.faulty.three_causes:impl", ("--no-opinfo", "--no-sequences",
                                                                "--no-covering")),
    # Both executors of the pool compiling: each is closed within the bound.
    ("torch.compile parity", "tests.faulty.three_causes:impl", ("--no-opinfo", "--no-sequences",
                                                                "--no-covering",
                                                                "--stage-executors", "2")),
    # A corpus Case whose every call takes 2 s: classification re-runs it for 10 s (a hang's
    # re-runs would end within a second, at the known hang's allowance).
    ("classification", "tests.faulty.slow_wrong:impl", ("--no-opinfo", "--no-sequences",
                                                        "--no-compile", "--no-covering",
                                                        "--timeout", "3",
                                                        "--corpus", "corpus")),
])
def test_a_stop_in_a_stage_ends_within_the_bound_with_its_outputs(
        tmp_path: Path, stage: str, impl: str, extra: tuple[str, ...]) -> None:
    from diagfuzz.core import corpus
    from diagfuzz.core.case import Case, Layout

    corpus.save(Case("diagonal", (3, 3), -1, 0, 1, "float32", Layout.contiguous((3, 3))),
                tmp_path / "corpus")
    marker = uuid.uuid4().hex
    env = _environment(marker)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[1]),
                                         env.get("PYTHONPATH", "")])
    err = tmp_path / "stderr.txt"
    with err.open("w") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "diagfuzz", "gate", "--impl", impl, "-n", "1",
             "--no-suite", "--report", "report.json", "--junit", "junit.xml", *extra],
            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True)
        try:
            _wait_for(err, rf"{stage}: started", proc, 180)
            time.sleep(0.5)
            proc.send_signal(signal.SIGTERM)
            signalled = time.monotonic()
            out, _ = proc.communicate(timeout=60)
        finally:
            proc.kill()
    assert time.monotonic() - signalled <= stopbound.STOP_BOUND + 1.5
    assert proc.returncode in (1, 7), out
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["stopped"] == "SIGTERM" and report["exit_code"] == proc.returncode
    assert ET.parse(tmp_path / "junit.xml").getroot() is not None
    _no_process_left(marker)


def test_a_stop_while_the_gate_starts_still_writes_its_outputs(tmp_path: Path) -> None:
    """SIGTERM during the gate's start-up (its imports, the fork server it starts first):
    no default death leaving the fork server behind, but the gate's stop: outputs, exit 7.
    (A bound of 30 s: the start-up's imports go on after the signal, slowly on a loaded
    machine, and past the bound the gate would end without its outputs.)"""
    marker = uuid.uuid4().hex
    env = dict(_environment(marker), DIAGFUZZ_STOP_BOUND="30")
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[1]),
                                         env.get("PYTHONPATH", "")])
    proc = subprocess.Popen(
        [sys.executable, "-m", "diagfuzz", "gate", "--impl", "tests.faulty.three_causes:impl",
         "-n", "1", "--no-opinfo", "--no-sequences", "--report", "report.json",
         "--junit", "junit.xml"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        end = time.monotonic() + 60
        while not _processes_with(marker)[1:] and time.monotonic() < end:
            time.sleep(0.05)  # until the fork server has started beside the gate
        proc.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        out, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert time.monotonic() - signalled <= 30 + 1.5
    assert proc.returncode == 7, out
    assert json.loads((tmp_path / "report.json").read_text())["stopped"] == "SIGTERM"
    assert (tmp_path / "junit.xml").exists()
    _no_process_left(marker)


def test_a_stop_sent_to_the_whole_group_while_spares_start_ends_as_fast(
        tmp_path: Path) -> None:
    """``timeout`` and Ctrl-C signal the gate's whole process group: the fork server dies
    with it, and the classification spares it was starting are orphans that nobody reaps
    (a container's init may never). Closing them must not wait for a status that cannot
    come; the stop ends within the suite's grace and its writing, and ``latest`` points at
    the stopped run. (A bound of 40 s, so a slow close shows as time, not as a kill.)"""
    marker = uuid.uuid4().hex
    env = dict(_environment(marker), DIAGFUZZ_STOP_BOUND="40")
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[1]),
                                         env.get("PYTHONPATH", "")])
    err = tmp_path / "stderr.txt"
    with err.open("w") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "diagfuzz", "gate", "--impl",
             "tests.faulty.three_causes:impl", "-n", "1", "--budget", "20000", "--no-opinfo",
             "--no-sequences",
             "--no-compile", "--stage-executors", "1", "--report", "report.json"],
            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True,
            start_new_session=True)
        try:
            _wait_for(err, r"error parity: \d+ Cases", proc, 180)  # spares launched by now
            os.killpg(proc.pid, signal.SIGTERM)
            signalled = time.monotonic()
            out, _ = proc.communicate(timeout=90)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
    seconds = time.monotonic() - signalled
    assert proc.returncode == 1, out  # its findings, written
    assert seconds <= 12, (seconds, err.read_text()[-2000:])
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["stopped"] == "SIGTERM"
    run_dir = tmp_path / report["run_dir"]
    assert any(p.name.startswith("spare-") for p in (run_dir / "classify").iterdir())
    assert (tmp_path / ".diagfuzz/gate/latest").resolve() == run_dir.resolve()
    _no_process_left(marker)
