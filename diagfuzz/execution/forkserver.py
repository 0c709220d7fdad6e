"""Executors forked from a pre-warmed server, so an executor starts in milliseconds.

A spawned executor is a fresh interpreter that imports torch, Triton and the oracle before it
can judge anything: about 3 s alone, and most of a run's start-up when twelve executors of
four workers import at once. A fuzz run's pytest controller starts one fork server for all
its workers (``start_for_run``; they connect to it, ``use``), and any other process that
needs executors (the gate, a single pytest process) starts its own: a fresh interpreter
(fork+exec, never a fork of the caller, whose threads and CUDA state a child must not
inherit) that imports torch, Triton, the oracle and diagfuzz's kernels once, runs the CPU
half of the warm-up (only where no GPU can exist: see ``_preload``), and then forks one
executor per request. Each child applies its runner's environment, loads the implementation
under test and creates its CUDA context after the fork, exactly as a spawned executor does:
the server never initialises CUDA (torch's device count comes from a forked probe,
``_devices_counted_elsewhere``). A server that finds, after a preloading step, a CUDA driver
library mapped in itself (``_cuda_mapped``) or a thread started (``_threads``) spawns each
executor as a fresh interpreter instead of forking it, and says which step did it.

The runner keeps the interface of ``subprocess.Popen`` it uses (``pid``, ``poll``, ``wait``,
``kill``, ``send_signal``) through ``Forked``: the server reaps its children and reports
each exit status to the client that asked, so a crash verdict still names the signal that
killed the executor. Requests never wait for the server's imports: they queue in its
socket. A runner whose server died spawns its executors itself, as ``DIAGFUZZ_FORKSERVER=0``
makes every runner do.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from diagfuzz.core.preselect import no_gpu_here
from diagfuzz.execution.messages import BOOTSTRAP as BOOTSTRAP_EXECUTOR

#: "0": each runner spawns its executors itself (no server); "spawn": the server spawns
#: them as fresh interpreters, what it does where forking is unsafe; default: it forks.
FORKSERVER_ENV = "DIAGFUZZ_FORKSERVER"
#: The server's command line: the caller's sys.path, then ``serve`` on the inherited socket.
BOOTSTRAP = ("import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
             "from diagfuzz.execution.forkserver import serve; "
             "serve(*map(int, sys.argv[2:]))")
#: Seconds a fork request may wait for the server (its imports and CPU warm-up included).
READY_TIMEOUT = 300.0
_MAX_MESSAGE = 1 << 20
#: Seconds a runner waits for the status of an executor the server has reaped (it is sent
#: right after the reaping; the gap once read as a SIGKILL on a loaded 2-core runner).
EXIT_REPORT_WAIT = 5.0


def enabled() -> bool:
    """Whether runners start executors through a server (``DIAGFUZZ_FORKSERVER``, default
    on; ``0`` spawns them from each runner). On an H200 host forked executors pass the
    isolation tests and were ready 12.8 s into a dev run (BENCHMARKS.md); a server that
    finds forking unsafe spawns instead and says why."""
    return os.environ.get(FORKSERVER_ENV) not in ("", "0")


# --- the server ---------------------------------------------------------------------------

def _cuda_mapped() -> str:
    """The CUDA driver library's path if this process has it mapped, else ''.

    Why: a child forked after the driver initialised cannot use CUDA. A torch build may map
    ``libcuda`` at import (torch 2.11+cu130 does) without calling it; mapped by a later
    step, something called it (``_Watch`` compares with what torch's import left).
    """
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                if "libcuda.so" in line:
                    return line.split()[-1]
    except OSError:
        pass
    return ""


def _threads() -> dict[str, str]:
    """This process's threads, native ones included: id -> name ({} where /proc cannot
    say). By id: ``torch.set_num_threads(1)`` ends pool threads while preloading, and a
    count would let a new thread hide in their place."""
    names = {}
    try:
        for task in sorted(os.listdir("/proc/self/task")):
            with open(f"/proc/self/task/{task}/comm") as comm:
                names[task] = comm.read().strip()
    except OSError:
        return {}
    return names


class _Watch:
    """What each preloading step started that makes forking unsafe, first step first."""

    def __init__(self) -> None:
        self.baseline = _threads()
        self.mapped_before = _cuda_mapped()
        self.why = ""

    def after(self, step: str) -> None:
        if self.why:
            return
        new = [name for tid, name in _threads().items() if tid not in self.baseline]
        mapped = "" if self.mapped_before else _cuda_mapped()
        found = [f"{len(new)} thread(s) ({', '.join(new)}) started by {step}"] if new else []
        if mapped:
            found.append(f"the CUDA driver ({mapped}) was loaded by {step}")
        self.why = "; ".join(found)


@contextlib.contextmanager
def _devices_counted_elsewhere(torch: Any) -> Iterator[None]:
    """Within the block, torch.cuda's device count (and so ``is_available``) is the one a
    forked probe process found: counting in the server would leave a thread in it.

    Why: even through NVML (``PYTORCH_NVML_BASED_CUDA_CHECK``) the count starts a driver
    thread (``cuda0000...``) on an H200 host; a forked child would inherit its library's
    state without the thread. The probe counts once and exits; the server asks nothing.
    Afterwards torch's own functions are back, for the executors to call after the fork.
    """
    count = _count_devices_in_a_child(torch)
    real = torch.cuda.device_count
    torch.cuda.device_count = lambda: count
    try:
        yield
    finally:
        torch.cuda.device_count = real


def _count_devices_in_a_child(torch: Any) -> int:
    """torch.cuda.device_count() as a forked child of this process finds it (0 if it
    cannot say)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the probe: count, say, exit without any teardown
        try:
            os.close(read)
            os.write(write, str(torch.cuda.device_count()).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as answer:
        text = answer.read().decode() or "0"
    os.waitpid(pid, 0)
    return int(text) if text.isdigit() else 0


def _preload() -> str:
    """Import what every executor imports, warm its CPU side; '' or why forking is unsafe
    (a thread started, or the CUDA driver loaded, and by which step)."""
    # torch's availability checks through NVML: the driver stays uninitialised here.
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    import torch

    # torch starts a thread of its own at import, as in every DataLoader that forks workers
    # after importing torch; any thread started after it is ours to answer for.
    watch = _Watch()
    torch.set_num_threads(1)  # as the executor does; no OpenMP pool for a child to inherit
    with _devices_counted_elsewhere(torch):
        import diagfuzz.execution.child
        import diagfuzz.oracles

        watch.after("importing the oracle")
        from diagfuzz.core.runtime import DEVICE

        watch.after("diagfuzz.core.runtime (torch.cuda.is_available)")
        with contextlib.suppress(Exception):  # the child imports them itself if this fails
            import diagfuzz.impl
            import diagfuzz.ops  # noqa: F401
        watch.after("importing diagfuzz.ops and Triton")
        from diagfuzz.execution.runner import settle_heap
        from diagfuzz.execution.warmup import warm_up

        # The reference side runs on the CPU on every device: its lazy imports and first
        # autograd backward are paid once here, not in every executor. Not where a GPU may
        # be: the first backward of a CUDA build starts autograd's device threads, which
        # initialise CUDA, and a child forked after that cannot (on an H200 host: "CUDA
        # error: initialization error" in every forked executor).
        if no_gpu_here():
            with contextlib.suppress(Exception):
                warm_up("cpu")
        watch.after("the CPU warm-up")
    settle_heap()
    if os.environ.get(FORKSERVER_ENV) == "spawn":
        return f"{FORKSERVER_ENV}=spawn"
    if watch.why:
        return watch.why
    if DEVICE != "cpu" and torch.cuda.is_initialized():
        return "torch initialised CUDA while preloading"
    return ""


def serve(fd: int, listen_fd: int = -1) -> None:
    """The fork server's main loop: fork an executor per request until its owner goes.

    ``fd`` is the owner's connection; ``listen_fd``, if given, a listening socket through
    which other processes of the run (a controller's xdist workers) connect as clients.
    Each child's exit status goes to the client that asked for it.
    """
    from diagfuzz.execution.timeline import mark

    mark("start", "forkserver")
    owner = socket.socket(fileno=fd)
    listener = socket.socket(fileno=listen_fd) if listen_fd >= 0 else None
    try:
        refused = _preload()
    except Exception as exc:
        refused = f"preloading failed: {exc!r}"
    mark("preloaded", "forkserver")
    # A server that must not fork still serves: it spawns each executor instead.
    ready = {"ready": True, "forks": not refused, "why": refused}
    try:
        _send(owner, ready)
    except OSError:
        os._exit(0)  # the owner left while this server imported (a run that ended early)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    clients = [owner]
    asked: dict[int, socket.socket] = {}  # child pid -> the client that asked for it
    while True:
        watched = [c.fileno() for c in clients] + [wake_r]
        if listener is not None:
            watched.append(listener.fileno())
        ready_fds, _, _ = select.select(watched, [], [])
        if wake_r in ready_fds:
            with contextlib.suppress(BlockingIOError):
                os.read(wake_r, 512)
        _reap(asked)
        if listener is not None and listener.fileno() in ready_fds:
            with contextlib.suppress(OSError):
                client, _ = listener.accept()
                _send(client, ready)
                clients.append(client)
        for client in [c for c in clients if c.fileno() in ready_fds]:
            try:
                request, fds = _receive(client)
            except (EOFError, OSError):
                if client is owner:
                    os._exit(0)  # the owner is gone; children exit when they see it
                clients.remove(client)
                client.close()
                continue
            inherited = [c.fileno() for c in clients] + [wake_r, wake_w] + (
                [listener.fileno()] if listener is not None else [])
            pid = _spawn(request, fds) if refused else _fork(request, fds, inherited)
            asked[pid] = client
            with contextlib.suppress(OSError):
                _send(client, {"forked": pid})


def _reap(asked: dict[int, socket.socket]) -> None:
    """Report every exited child's status (as Popen's returncode) to the client that asked
    for it."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _SPAWNED.pop(pid, None)
        client = asked.pop(pid, None)
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.waitstatus_to_exitcode(
            status)
        if client is not None:
            with contextlib.suppress(OSError):
                _send(client, {"exited": pid, "code": code})


def _spawn(request: dict[str, Any], fds: list[int]) -> int:
    """Start one executor as a fresh interpreter, as a runner without a server does."""
    argv = [sys.executable, "-c", BOOTSTRAP_EXECUTOR, json.dumps(request["path"]), str(fds[0]),
            str(fds[1]), str(os.getpid()), *request["args"]]
    try:
        proc = subprocess.Popen(argv, pass_fds=tuple(fds[:2]), stdin=subprocess.DEVNULL,
                                stderr=fds[2] if len(fds) > 2 else None,
                                env=request["env"], cwd=request.get("cwd") or None)
    finally:
        for fd in fds:
            os.close(fd)
    _SPAWNED[proc.pid] = proc  # held: a collected Popen would reap it behind ``_reap``
    return proc.pid


_SPAWNED: dict[int, subprocess.Popen[bytes]] = {}


def _fork(request: dict[str, Any], fds: list[int], inherited: list[int]) -> int:
    """Fork one executor: the child runs ``child_main`` on the request's pipes, with the
    server's own descriptors (``inherited``: its sockets and wake-up pipe) closed."""
    pid = os.fork()
    if pid:
        for fd in fds:
            os.close(fd)
        return pid
    code = 70
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in inherited:
            with contextlib.suppress(OSError):
                os.close(fd)
        read_fd, write_fd = fds[0], fds[1]
        if len(fds) > 2:  # the runner's executor.log
            os.dup2(fds[2], 2)
            os.close(fds[2])
        os.environ.clear()
        os.environ.update(request["env"])
        if request.get("cwd"):
            os.chdir(request["cwd"])
        sys.path[:] = request.get("path", sys.path)
        from diagfuzz.execution.child import child_main

        child_main(read_fd, write_fd, os.getppid(), *request["args"])
        code = 0
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        os._exit(code)


# --- the wire ------------------------------------------------------------------------------

def _send(sock: socket.socket, message: dict[str, Any], fds: list[int] | None = None) -> None:
    data = json.dumps(message).encode() + b"\n"
    if fds:
        socket.send_fds(sock, [data], fds)
    else:
        sock.sendall(data)


def _receive(sock: socket.socket) -> tuple[dict[str, Any], list[int]]:
    """One request (a JSON line sent in one ``sendmsg``) and the descriptors it carried."""
    data, fds, _, _ = socket.recv_fds(sock, _MAX_MESSAGE, 8)
    if not data:
        raise EOFError
    return json.loads(data), list(fds)


# --- the client ----------------------------------------------------------------------------

def _abstract(address: str) -> str:
    """"@name" as the socket address it names ("\\0name": printable, and safe in argv)."""
    return "\0" + address.removeprefix("@")


class ForkServer:
    """A fork server's client: this process's own server (``shared``), or a connection to
    the server a run's controller started for its workers (``connect``).

    Requests never wait for the server: they queue in its socket while it imports, and a
    ``Forked`` learns its pid when the server answers.
    """

    def __init__(self, listen: bool = False) -> None:
        """Start a server; with ``listen``, one that other processes can ``connect`` to at
        ``address`` ("@name": a Linux abstract socket, nothing to clean up on disk)."""
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        passed = [child]
        self.address = ""
        if listen:
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            self.address = f"@diagfuzz-forkserver-{os.getpid()}-{secrets.token_hex(8)}"
            listener.bind(_abstract(self.address))
            listener.listen(64)
            passed.append(listener)
        self.proc: subprocess.Popen[bytes] | None = subprocess.Popen(
            [sys.executable, "-c", BOOTSTRAP, json.dumps(sys.path),
             *(str(s.fileno()) for s in passed)],
            pass_fds=tuple(s.fileno() for s in passed), stdin=subprocess.DEVNULL)
        for end in passed:
            end.close()
        self._attach(parent)

    @classmethod
    def connect(cls, address: str) -> ForkServer:
        """A client of the server listening at ``address`` (raises OSError if none)."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            sock.connect(_abstract(address))
        except OSError:
            sock.close()
            raise
        client = cls.__new__(cls)
        client.proc, client.address = None, address
        client._attach(sock)
        return client

    def _attach(self, sock: socket.socket) -> None:
        self.sock = sock
        self._buffer = b""
        self._gone = False  # the connection ended (a server this process does not own)
        self.forks: bool | None = None  #: True: it forks; False: it spawns (``why``)
        self.why = ""
        self._awaiting: list[Forked] = []  # requests sent, pid not yet answered
        # Runners in several threads share it (the gate classifies findings side by side).
        self._lock = threading.RLock()
        self.exits: dict[int, int] = {}  #: pid -> exit code, as the server reported them

    def alive(self) -> bool:
        if self.proc is not None:
            return self.proc.poll() is None
        return not self._gone

    def mode(self, timeout: float = READY_TIMEOUT) -> str:
        """"fork", or "spawn: <why>" (waiting for the server's start if need be)."""
        deadline = time.monotonic() + timeout
        while self.forks is None and time.monotonic() < deadline:
            try:
                self.pump(min(0.1, max(0.0, deadline - time.monotonic())))
            except (EOFError, OSError):
                return "spawn: the fork server exited"
        if self.forks is None:
            return f"spawn: the fork server did not start in {timeout:g}s"
        return "fork" if self.forks else f"spawn: {self.why}"

    def fork(self, args: list[str], fds: list[int], env: dict[str, str]) -> Forked:
        """An executor running ``child_main(fds[0], fds[1], server, *args)``; ``fds[2]``,
        if given, becomes its stderr. The caller closes its copies of ``fds``."""
        forked = Forked(self)
        with self._lock:
            _send(self.sock, {"args": args, "env": env, "cwd": os.getcwd(),
                              "path": sys.path}, fds)
            self._awaiting.append(forked)
        return forked

    def _next(self, timeout: float) -> dict[str, Any] | None:
        """The server's next message, or None if none came within ``timeout``."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            if self.sock.fileno() < 0:
                raise EOFError("the fork server was closed")
            left = deadline - time.monotonic()
            if not select.select([self.sock], [], [], max(0.0, left))[0]:
                return None
            chunk = self.sock.recv(65536)
            if not chunk:
                self._gone = True
                raise EOFError("the fork server exited")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def pump(self, timeout: float) -> bool:
        """File one message from the server (its start, a fork's pid, a child's exit);
        False if none came within ``timeout``."""
        with self._lock:
            message = self._next(timeout)
            if message is None:
                return False
            if "forked" in message:
                self._awaiting.pop(0)._pid = int(message["forked"])
            elif "exited" in message:
                self.exits[int(message["exited"])] = int(message["code"])
            elif "ready" in message:
                self.forks = bool(message.get("forks"))
                self.why = str(message.get("why", ""))
            return True

    def close(self) -> None:
        """Stop the server (its children see it go and exit: ``child._watch_parent``), or
        leave a server this process does not own."""
        with contextlib.suppress(OSError):
            self.sock.close()
        self._gone = True
        if self.proc is None:
            return
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            self.proc.wait(2)
        if self.proc.poll() is None:
            self.proc.kill()


class Forked:
    """An executor the server started, handled as the ``subprocess.Popen`` a runner holds."""

    def __init__(self, server: ForkServer) -> None:
        self.server = server
        self._pid: int | None = None
        self.returncode: int | None = None

    @property
    def pid(self) -> int:
        """Its pid, waiting for the server's answer if need be."""
        deadline = time.monotonic() + READY_TIMEOUT
        while self._pid is None:
            if not self.server.alive() and not self.server.pump(0):
                raise OSError("the fork server exited before starting the executor")
            if time.monotonic() > deadline:
                raise OSError(f"the fork server started no executor in {READY_TIMEOUT:g}s")
            self.server.pump(0.05)
        return self._pid

    def poll(self) -> int | None:
        """Its exit code (negative: the signal), None while it runs or is being started."""
        if self.returncode is not None:
            return self.returncode
        with contextlib.suppress(EOFError, OSError):
            while self.server.pump(0):
                pass
        if self._pid is None:
            if self.server.alive():
                return None
            self.returncode = -signal.SIGKILL  # the server went before it forked this one
            return self.returncode
        # A live server reaps its children: an exited one is soon reported. Only once it
        # is gone does an unreaped orphan have to be told apart (``_exists``, from /proc).
        running = (_signalable(self._pid) if self.server.alive() else _exists(self._pid))
        if self._pid not in self.server.exits and not running:
            # Reaped: the server sends its status right after, unless the server is gone.
            deadline = time.monotonic() + EXIT_REPORT_WAIT
            with contextlib.suppress(EOFError, OSError):
                while (self._pid not in self.server.exits and time.monotonic() < deadline
                       and (self.server.alive() or self.server.pump(0))):
                    self.server.pump(0.05)
            if self._pid not in self.server.exits:
                self.returncode = -signal.SIGKILL  # no status came: the server is gone
                return self.returncode
        self.returncode = self.server.exits.pop(self._pid, None)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            left = 0.05 if deadline is None else deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired(f"executor {self._pid}", timeout or 0)
            with contextlib.suppress(EOFError, OSError):
                self.server.pump(min(left, 0.05))
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError, OSError):
                os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def _signalable(pid: int) -> bool:
    """Whether ``pid`` is there to signal: running, or exited and not yet reaped."""
    try:
        os.kill(pid, 0)
    except OSError as exc:
        return exc.errno != errno.ESRCH
    return True


def _exists(pid: int) -> bool:
    """Whether ``pid`` still runs: not when it is gone, nor when it has exited and waits to
    be reaped. A zombie matters once the server is gone (a stop signal sent to the whole
    process group, as ``timeout`` and Ctrl-C send it, ends the server too): its orphans
    are then reaped by the system's init, which in a container may never do it, and no
    status will ever come for them. Reads /proc: for a gone server's children only."""
    if not _signalable(pid):
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc: what kill(0) said
    return stat.rsplit(")", 1)[-1].split()[:1] != ["Z"]


_SHARED: ForkServer | None = None
_SHARED_PID = 0
_SHARED_LOCK = threading.Lock()
#: The run's server to connect to (``use``), instead of starting one of this process's own.
_RUN_ADDRESS: str | None = None


def shared() -> ForkServer | None:
    """This process's fork server: a connection to the run's server (``use``), else its
    own, started on first use; None where executors are spawned by the runner itself
    (``DIAGFUZZ_FORKSERVER=0``, or the server died)."""
    global _SHARED, _SHARED_PID
    if not enabled():
        return None
    with _SHARED_LOCK:
        if _SHARED is None or os.getpid() != _SHARED_PID:
            server = None
            if _RUN_ADDRESS:
                with contextlib.suppress(OSError):  # gone: a server of this process's own
                    server = ForkServer.connect(_RUN_ADDRESS)
            _SHARED, _SHARED_PID = server or ForkServer(), os.getpid()
        server = _SHARED
    return server if server.alive() else None


def start_early() -> None:
    """Start this process's server now: its imports run beside the caller's own start-up."""
    shared()


_RUN_SERVER: ForkServer | None = None


def start_for_run() -> str:
    """Start a server that this run's other processes can ``use`` (a pytest controller's,
    for its xdist workers), once per process; its address, or '' where there is none.

    Why: a worker's own server starts when the worker is configured, and its imports (torch,
    Triton) then stand between the worker's start and its first Case; the controller's
    starts seconds earlier and serves every worker.
    """
    global _RUN_SERVER
    if not enabled():
        return ""
    with _SHARED_LOCK:
        if _RUN_SERVER is None or not _RUN_SERVER.alive():
            with contextlib.suppress(OSError):
                _RUN_SERVER = ForkServer(listen=True)
        return _RUN_SERVER.address if _RUN_SERVER is not None and _RUN_SERVER.alive() else ""


def use(address: str | None) -> None:
    """Fork this process's executors from the run's server at ``address`` (from its
    controller's ``start_for_run``; None or '': a server of this process's own)."""
    global _RUN_ADDRESS
    _RUN_ADDRESS = address or None


__all__ = ["FORKSERVER_ENV", "ForkServer", "Forked", "enabled", "serve", "shared",
           "start_early", "start_for_run", "use"]
