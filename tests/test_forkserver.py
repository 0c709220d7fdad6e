"""Executors forked from the pre-warmed server judge exactly as spawned ones do."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from diagfuzz.core.preselect import no_gpu_here
from diagfuzz.execution import forkserver
from diagfuzz.execution.parent import ProcessRunner
from tests.faulty.cases import square

ROOT = Path(__file__).resolve().parents[1]
CASES = [square(0), square(1), square(-1, n=4), square(2, op="diagonal_backward")]


def _verdicts(impl: str, tmp_path) -> list[tuple[str, str, str]]:
    with ProcessRunner(impl, "cpu", timeout=30, workdir=tmp_path) as runner:
        return [(v.kind, v.check, v.message) for v in map(runner.run, CASES)]


def _fresh_server(monkeypatch, mode: str = "1") -> None:
    """This test's runners use a server of their own (``mode``: DIAGFUZZ_FORKSERVER; "1"
    turns it on on a GPU host too, where it is off by default)."""
    monkeypatch.setenv(forkserver.FORKSERVER_ENV, mode)
    monkeypatch.setattr(forkserver, "_SHARED", None)
    monkeypatch.setattr(forkserver, "_RUN_ADDRESS", None)


def test_forked_executors_give_the_spawned_ones_verdicts(monkeypatch, tmp_path) -> None:
    _fresh_server(monkeypatch, "0")
    spawned = _verdicts("tests.faulty.wrong:impl", tmp_path / "spawned")
    _fresh_server(monkeypatch)
    forked = _verdicts("tests.faulty.wrong:impl", tmp_path / "forked")
    server = forkserver._SHARED
    # Where no GPU can exist it forks; on a GPU host it may have to spawn (and says why).
    assert server is not None
    assert server.mode() == "fork" or not no_gpu_here(), server.mode()
    assert forked == spawned
    assert [kind for kind, _, _ in forked] == ["pass", "mismatch", "pass", "mismatch"]
    server.close()


def test_a_forked_executors_crash_names_its_signal(monkeypatch, tmp_path) -> None:
    _fresh_server(monkeypatch)
    with ProcessRunner("tests.faulty.abort:impl", "cpu", timeout=30,
                       workdir=tmp_path) as runner:
        runner.start()
        assert isinstance(runner._proc, forkserver.Forked)
        crash = runner.run(square(1))
    assert crash.kind == "crash" and "SIGABRT" in crash.message
    assert crash.details["exitcode"] == -signal.SIGABRT
    assert "abort.py" in crash.details["stderr_tail"]  # its stderr went to the log
    forkserver._SHARED.close()


def test_an_executor_gets_its_runners_environment_path_and_directory(
        monkeypatch, tmp_path) -> None:
    """Set after the server started: a fork sees what a spawn would."""
    _fresh_server(monkeypatch)
    forkserver.start_early()
    probe = tmp_path / "lib"
    probe.mkdir()
    (probe / "env_probe.py").write_text(
        "import os\n"
        "from diagfuzz.impl import aten as impl\n"
        "assert os.environ['PROBE'] == 'set later', os.environ.get('PROBE')\n"
        "assert os.getcwd() == os.environ['PROBE_CWD'], os.getcwd()\n")
    monkeypatch.setenv("PROBE", "set later")
    monkeypatch.setenv("PROBE_CWD", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(probe))
    with ProcessRunner("env_probe:impl", "cpu", timeout=30) as runner:
        assert runner.run(square(0)).kind == "pass"
        assert isinstance(runner._proc, forkserver.Forked)
    forkserver._SHARED.close()


#: A run's worker: its executors come from the run's server at argv[1]; prints what it saw.
_WORKER = """
import json, os, sys
from diagfuzz.execution import forkserver
from diagfuzz.execution.parent import ProcessRunner
from tests.faulty.cases import square
forkserver.use(sys.argv[1])
with ProcessRunner("tests.faulty.abort:impl", "cpu", timeout=30) as runner:
    verdicts = [runner.run(square(0))]
    parent = open(f"/proc/{runner.pid}/stat").read().rsplit(")", 1)[1].split()[1]
    verdicts.append(runner.run(square(1)))
    server = forkserver.shared()
print(json.dumps({"kinds": [v.kind for v in verdicts], "crash": verdicts[1].message,
                  "connected": server.proc is None, "executor_parent": int(parent)}))
"""


def test_a_runs_workers_fork_their_executors_from_its_controllers_server(
        monkeypatch, tmp_path) -> None:
    """Two workers at once: each gets its own executors' verdicts and exit statuses."""
    _fresh_server(monkeypatch)
    monkeypatch.setattr(forkserver, "_RUN_SERVER", None)
    address = forkserver.start_for_run()
    server = forkserver._RUN_SERVER
    assert address and server.address == address and server.mode() == "fork"
    workers = [subprocess.Popen([sys.executable, "-c", _WORKER, address], cwd=ROOT,
                                stdout=subprocess.PIPE, text=True) for _ in range(2)]
    seen = [json.loads(w.communicate(timeout=120)[0]) for w in workers]
    for worker in seen:
        assert worker["kinds"] == ["pass", "crash"] and "SIGABRT" in worker["crash"]
        assert worker["connected"] and worker["executor_parent"] == server.proc.pid
    server.close()


def test_a_worker_whose_runs_server_is_gone_starts_its_own(monkeypatch) -> None:
    _fresh_server(monkeypatch)
    forkserver.use("@diagfuzz-forkserver-that-never-was")
    server = forkserver.shared()
    assert server is not None and server.proc is not None  # its own
    server.close()


def test_a_server_that_must_not_fork_spawns_each_executor(monkeypatch, tmp_path) -> None:
    _fresh_server(monkeypatch, "spawn")
    verdicts = _verdicts("tests.faulty.abort:impl", tmp_path)
    server = forkserver._SHARED
    assert server.mode() == "spawn: DIAGFUZZ_FORKSERVER=spawn"
    assert [kind for kind, _, _ in verdicts] == ["pass", "crash", "pass", "pass"]
    assert "SIGABRT" in verdicts[1][2]  # the server reaped it and reported the signal
    server.close()


def test_a_runner_whose_server_died_spawns_its_executors(monkeypatch, tmp_path) -> None:
    _fresh_server(monkeypatch)
    forkserver.start_early()
    server = forkserver._SHARED
    server.proc.kill()
    server.proc.wait(10)
    assert forkserver.shared() is None
    with ProcessRunner("diagfuzz.impl:aten", "cpu", timeout=60) as runner:
        assert runner.run(square(0)).kind == "pass"
        assert not isinstance(runner._proc, forkserver.Forked)


def _running(pid: int) -> bool:
    """Alive and not a zombie (a container's init may never reap an orphan)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_executors_exit_when_their_server_goes(monkeypatch) -> None:
    _fresh_server(monkeypatch)
    runner = ProcessRunner("diagfuzz.impl:aten", "cpu", timeout=30)
    runner.start()
    pid = runner.pid
    assert _running(pid)
    forkserver._SHARED.close()
    deadline = time.monotonic() + 10
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(pid)
    runner.close()


def test_on_by_default_on_every_host_and_off_with_zero(monkeypatch) -> None:
    monkeypatch.delenv(forkserver.FORKSERVER_ENV, raising=False)
    for gpu_may_exist in (False, True):
        monkeypatch.setattr(forkserver, "no_gpu_here", lambda g=gpu_may_exist: not g)
        assert forkserver.enabled()
    monkeypatch.setenv(forkserver.FORKSERVER_ENV, "1")
    assert forkserver.enabled()
    monkeypatch.setenv(forkserver.FORKSERVER_ENV, "0")
    assert not forkserver.enabled()
    monkeypatch.setenv(forkserver.FORKSERVER_ENV, "")
    assert not forkserver.enabled()


def test_a_thread_started_while_preloading_is_named_with_its_step() -> None:
    import threading

    watch = forkserver._Watch()
    watch.after("a quiet step")
    assert watch.why == ""
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait, name="diagfuzz-probe")
    thread.start()
    try:
        watch.after("the step that starts a thread")
        later = watch.why
        watch.after("a later step")
    finally:
        stop.set()
        thread.join()
    assert later == watch.why  # the first step that did it is kept
    assert "1 thread(s)" in later and later.endswith("started by the step that starts a thread")


def test_a_status_reported_just_after_the_reaping_is_waited_for() -> None:
    """The server reaps an executor, then sends its status: a runner that looks in between
    finds no process and no status yet, and must wait for it, not call it a SIGKILL."""
    import subprocess
    import sys

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    pid = int(gone.stdout)  # exited and reaped: no such process now

    class Server:
        def __init__(self) -> None:
            self.exits: dict[int, int] = {}
            self.calls = 0

        def alive(self) -> bool:
            return True

        def pump(self, timeout: float) -> bool:
            self.calls += 1
            if self.calls == 3:  # the status arrives a little later
                self.exits[pid] = -signal.SIGABRT
                return True
            return False

    forked = forkserver.Forked(Server())  # type: ignore[arg-type]
    forked._pid = pid
    assert forked.poll() == -signal.SIGABRT


def test_a_thread_started_where_another_ended_is_seen() -> None:
    """Threads are told apart by id: preloading ends pool threads (set_num_threads(1)), and
    a new one in their place is still a new thread (a count missed the threads autograd's
    first backward starts, which initialise CUDA)."""
    import threading

    done = threading.Event()
    ending = threading.Thread(target=done.wait)
    ending.start()
    watch = forkserver._Watch()
    done.set()
    ending.join()
    late = threading.Event()
    started = threading.Thread(target=late.wait)
    started.start()
    try:
        watch.after("a step")
    finally:
        late.set()
        started.join()
    assert watch.why.startswith("1 thread(s)") and "a step" in watch.why, watch.why


def test_a_server_whose_owner_left_while_it_imported_exits_quietly(monkeypatch, capfd) -> None:
    """A run that ends early (a usage error) leaves no traceback from its server."""
    _fresh_server(monkeypatch)
    server = forkserver.ForkServer()
    server.sock.close()
    assert server.proc.wait(120) == 0
    assert "Traceback" not in capfd.readouterr().err


class _GoneServer:
    """A server that has exited: nothing more will come from it."""

    def alive(self) -> bool:
        return False

    def pump(self, timeout: float) -> bool:
        raise EOFError("the fork server exited")


def test_a_fork_the_gone_server_never_answered_reads_as_killed() -> None:
    forked = forkserver.Forked(_GoneServer())  # type: ignore[arg-type]
    assert forked.poll() == -signal.SIGKILL
    assert forked.wait(1) == -signal.SIGKILL


def test_an_orphan_that_exited_unreaped_is_not_running() -> None:
    """Orphans of a gone server that nobody reaps (a container's init may not): a zombie
    reads as not running, so its runner does not wait for a status that cannot come."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    end = time.monotonic() + 10
    while time.monotonic() < end:
        stat = Path(f"/proc/{child.pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            break
        time.sleep(0.05)
    try:
        assert not forkserver._exists(child.pid)  # exited, not yet reaped
        assert forkserver._exists(os.getpid())
    finally:
        child.wait()
    assert not forkserver._exists(child.pid)
