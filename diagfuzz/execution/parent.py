"""ProcessRunner: each Case runs in a spawned executor process, so a crash costs one Case.

A segfault, an abort or a sticky CUDA error (illegal address, launch failure, device-side
assert: the whole context is poisoned) kills or spoils only the executor. The runner
reports that Case as ``crash``, starts a fresh executor on the next Case, and the run goes
on. A Case that makes no progress within its allowance (calibrated on the run's measured
times, at most ``timeout`` seconds: ``diagfuzz.execution.timeouts``) is a ``hang``: the
executor stops it itself where its op's hang is known, else it is killed. After any
non-pass verdict a quick health check (synchronize, then ``diagfuzz.ops.diagonal_copy`` of
a known 2x2) decides whether the executor is still fit; if not, the Case that spoiled it is
reported as ``crash``.

Executors are forked from the run's or this process's fork server (``forkserver``: an
interpreter of its own that imported torch, Triton and the oracle once and never initialised
CUDA), or, where
there is none, spawned: a fresh interpreter (fork+exec, as multiprocessing's spawn context
does, because forking a process that has initialised CUDA is undefined). Either way the
executor gets the runner's ``sys.path``, environment and directory but, unlike
multiprocessing, never re-imports the caller's ``__main__`` (a reproducer script or a user's
script without a ``__main__`` guard must still work). Requests and answers cross a pipe pair
as JSON text (Cases and Verdicts).

Hypothesis must never shrink against a poisoned context: a crash or hang seen in an
executor that had already served other Cases is retried once in a fresh executor, and the
fresh executor's verdict is the Case's verdict (the first attempt is kept in ``details``).

Cases may also be pipelined: ``submit`` sends a Case without waiting, ``poll``/``drain``
collect verdicts, so the caller draws the next Cases while the executor checks earlier
ones. The executor serves requests one at a time, in order, so the Case it is running is
always the oldest unanswered one: a crash or hang is that Case's, exactly as with ``run``,
and the Cases queued behind it are sent again, in order, to the replacement executor. After
a non-pass verdict the executor runs the health check itself, before the next queued Case,
so a poisoned context never judges a Case.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter, deque
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from diagfuzz.execution import forkserver
from diagfuzz.execution import messages as msg
from diagfuzz.execution.beacon import BEACON_ENV, Beacon
from diagfuzz.execution.fault_shapes import FAULT_CHECKS, FAULTS, describe
from diagfuzz.execution.history import History
from diagfuzz.execution.timeouts import (
    FAULT_KINDS,
    KNOWN_HANG_NOTE,
    Calibration,
    KnownFaults,
    confirm_allowance,
    learnt_for,
)
from diagfuzz.execution.timing import TIMING_ENV

if TYPE_CHECKING:  # torch-heavy: a worker launches its executors before it imports torch
    from diagfuzz.core.case import Case
    from diagfuzz.core.verdict import Verdict


def _verdict() -> type[Verdict]:
    from diagfuzz.core.verdict import Verdict

    return Verdict

#: Seconds a Case may run before it is a hang, unless the caller (or DIAGFUZZ_TIMEOUT) says
#: otherwise. Generous: the first call of a kernel on a GPU compiles it.
DEFAULT_TIMEOUT = 60.0


def default_timeout() -> float:
    """DIAGFUZZ_TIMEOUT if set, else DEFAULT_TIMEOUT: what a runner built without a timeout
    uses (e.g. the fuzz plugin without --diagfuzz-timeout; the gate passes that option)."""
    value = os.environ.get("DIAGFUZZ_TIMEOUT", "")
    try:
        return float(value) if value else DEFAULT_TIMEOUT
    except ValueError:
        raise ValueError(f"DIAGFUZZ_TIMEOUT must be a number of seconds, got {value!r}") from None


#: "0" judges every Case alone, each answered and synchronised by itself (a benchmark's
#: side-by-side, or a suspicion about batching); anything else lets executors batch.
BATCH_ENV = "DIAGFUZZ_BATCH"


def batching_default() -> bool:
    """Whether a runner built without ``batch`` lets its executor batch: yes unless
    ``BATCH_ENV`` is "0"."""
    return os.environ.get(BATCH_ENV, "1") != "0"


#: The ticket of a prelude: a call made again ahead of a hang's confirmation, whose
#: verdict is no one's (``ProcessRunner._step``).
PRELUDE = -1
#: Seconds an executor may take to import torch, Triton and the impl, pass a health check and
#: warm up (diagfuzz.execution.warmup).
START_TIMEOUT = 300.0
#: Cases ``submit`` keeps in flight at most: one full batch (``oracles.batch.MAX_BATCH``),
#: which the executor takes when the caller gets that far ahead of it, about nine Case
#: families of the average 7. Few enough that memory stays bounded and a failure is seen
#: within about ten families; the pipes are enlarged so that the requests (about 1 KB each)
#: never fill them while the executor is busy (``_PIPE_BYTES``).
MAX_IN_FLIGHT = 64
#: Seconds ``close`` waits for an asked executor to exit before it kills it (one judging a
#: batch reads the request only after it).
CLOSE_WAIT = 2.0
#: Seconds past a known hang's allowance the runner waits for the executor to stop the Case
#: itself (it answers within milliseconds when it can) before it kills it: a call stuck in C
#: takes no signal (``beacon.StallWatch``).
STALL_GRACE = 0.5
#: Seconds between two looks at a waiting Case's deadline: a hang of its op confirmed
#: meanwhile by another runner or process of the run shortens its allowance to a known
#: hang's, which a single wait until the old deadline would never see.
RECHECK = 1.0
#: Bytes each pipe to and from an executor holds (Linux; elsewhere the default).
_PIPE_BYTES = 1 << 20


class ExecutorError(RuntimeError):
    """The executor itself failed (cannot start, or the oracle raised): not a Case verdict.

    ``tickets`` names the Cases in flight the runner gave up on because of it (the one whose
    oracle raised, or every queued one when no replacement executor could start), oldest
    first: the caller attributes the failure to the first.
    """

    def __init__(self, message: str, tickets: tuple[int, ...] = ()) -> None:
        super().__init__(message)
        self.tickets = tickets


# --- runner side ------------------------------------------------------------------------


def _exit_description(exitcode: int | None) -> str:
    """'killed by SIGABRT' / 'exit code 3' for a dead executor."""
    if exitcode is None:
        return "still running"
    if exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exit code {exitcode}"


#: The most of an executor's log a tail reads (its Cases' warnings, then the dying stack).
_TAIL_READ = 1 << 20


def _tail(log: Path, start: int, index: int, limit: int = 4000) -> str:
    """What an executor that started writing ``log`` at byte ``start`` wrote while running
    its Case number ``index``: the text after that Case's marker, its last ``limit`` bytes.

    Why markers: the runner cannot know when a queued Case began (the executor starts it
    as soon as the previous one is answered), and a log size taken after a fast abort
    already includes the abort's stack (the tail came back empty under load).
    """
    with open(log, "rb") as f:
        f.seek(max(start, log.stat().st_size - _TAIL_READ))
        text = f.read()
    marker = msg.CASE_MARKER.format(index).encode()
    at = text.rfind(marker)
    if at >= 0:
        text = text[at + len(marker):]
    return text[-limit:].decode("utf-8", "replace")


#: The longest a hang's verdict waits for the executor's stack dump (seconds).
DUMP_WAIT = 3.0


def _enlarge(*fds: int) -> None:
    """Give each pipe ``_PIPE_BYTES`` of buffer where the system allows (Linux)."""
    setsize = getattr(fcntl, "F_SETPIPE_SZ", None)
    for fd in fds:
        if setsize is not None:
            with contextlib.suppress(OSError):
                fcntl.fcntl(fd, setsize, _PIPE_BYTES)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _await_quiet_growth(path: Path, before: int, quiet: float = 0.1,
                        limit: float = DUMP_WAIT) -> None:
    """Wait until ``path`` has grown past ``before`` and then not grown for ``quiet``
    seconds (faulthandler's stack dump is written), or ``limit`` seconds have passed.

    A fixed wait (0.5 s) read the log before a descheduled executor had written its stack.
    """
    deadline = time.monotonic() + limit
    size, changed = before, None
    while time.monotonic() < deadline:
        now = _size(path)
        if now != size:
            size, changed = now, time.monotonic()
        elif changed is not None and time.monotonic() - changed >= quiet:
            return
        time.sleep(0.02)


class ProcessRunner:
    """A Runner (``run(case) -> Verdict``, ``close()``) that isolates Cases in an executor.

    ``oracle`` names the function of ``diagfuzz.oracles`` to call (``check`` by default;
    e.g. ``check_compile`` for torch.compile parity). The executor starts on the first Case
    unless ``launch`` or ``start`` started it earlier; ``ImplError`` is raised if the impl
    cannot be loaded there. With ``workdir``
    the executor's stderr goes to ``workdir/executor.log`` and a crash verdict carries its
    tail (faulthandler's Python stack of the dying process); otherwise stderr is inherited.
    """

    def __init__(self, impl_spec: str, device: str | None = None,
                 timeout: float | None = None, *, oracle: str = "check",
                 workdir: str | os.PathLike[str] | None = None,
                 start_timeout: float = START_TIMEOUT, health_timeout: float = 30.0,
                 window: int = MAX_IN_FLIGHT, strict: bool = False,
                 batch: bool | None = None,
                 learnt: tuple[Calibration, KnownFaults] | None = None,
                 environ: dict[str, str] | None = None) -> None:
        timeout = default_timeout() if timeout is None else timeout
        if timeout <= 0:
            raise ValueError(f"ProcessRunner: timeout must be > 0 seconds, got {timeout}")
        if device is None:
            import diagfuzz.ops as ops

            device = ops.DEVICE
        self.impl_spec = impl_spec
        self.device = device
        self.strict = strict  #: the oracle's --diagfuzz-strict (diagfuzz.oracles.policy)
        #: Whether the executor may judge Cases in batches (``batching_default``).
        self.batch = batching_default() if batch is None else batch
        #: The most seconds a Case may stall: the upper bound of its calibrated allowance.
        self.timeout = float(timeout)
        #: What the run learnt of the impl's times and confirmed faults
        #: (``diagfuzz.execution.timeouts``), shared with the run's other runners; by
        #: default this runner's own.
        self.calibration, self.known = learnt or learnt_for(None)
        #: Whether a Case with the shape of its op's confirmed hang or crash
        #: (``fault_shapes``) is answered as that fault without being run: a stage's or a
        #: shard's Cases, never a re-run that must run (classification, a sequence).
        self.block_fault_shapes = False
        self._beacon: Beacon | None = None
        #: Variables its executors get beside this process's (``WARM_UP_ENV``, say), set
        #: per runner: a thread beside others must not change os.environ for all of them.
        self.environ = dict(environ or {})
        #: The calls sent to the current executor, in order (``history``): a failing
        #: verdict says where they are, so classification can replay what came before.
        self.history = History(None if workdir is None else Path(workdir))
        #: (oracle, op, dtype) the current executor has judged: a later one is not a first call.
        self._seen: set[tuple[str, str, str]] = set()
        #: (oracle, op, dtype) sent to the current executor: a known hang's Case of another
        #: one is a first call there.
        self._sent: set[tuple[str, str, str]] = set()
        #: The head's allowance (``_deadline``), kept while what it depends on is unchanged.
        self._group_allowance: tuple[tuple[int, ...], float] = ((), 0.0)
        self.oracle = oracle
        self.start_timeout = start_timeout
        self.health_timeout = health_timeout
        self.log: Path | None = None
        if workdir is not None:
            Path(workdir).mkdir(parents=True, exist_ok=True)
            self.log = Path(workdir) / "executor.log"
        self.starts = 0  #: executors started so far (1 + replacements)
        #: An executor started ahead, ready to replace one killed by a known hang: where a
        #: hang blocks the host in C (a kernel spinning on the device), each such Case
        #: costs a kill, and a replacement's start (a CUDA context, the impl's import)
        #: would otherwise come on top of its allowance, Case after Case.
        self._spare: _Spare | None = None
        #: Keep a spare from now on: a Case of an op with a confirmed hang or crash was sent.
        self._keep_spare = False
        self.spares_used = 0  #: replacements that were a spare started ahead
        self._proc: subprocess.Popen[bytes] | forkserver.Forked | None = None
        self._conn: Connection | None = None  # answers from the executor
        self._out: Connection | None = None  # requests to the executor
        self._served = 0  # Cases the current executor has answered
        self.window = max(1, int(window))  #: Cases ``submit`` keeps in flight at most
        self._queue: deque[_Request] = deque()  # in flight, oldest (running) first
        self._ready: list[tuple[int, Verdict]] = []  # settled, not yet returned
        self._tickets = itertools.count(1)
        self._head_started = 0.0  # when the oldest Case in flight started running
        self._log_start = 0  # executor.log's size when the current executor started
        self._starting = False  # spawned by ``launch``, its "ready" not yet read
        self._closing = False  # asked to exit (``request_close``), not yet reaped
        self.warmed = 0  #: warm-up Cases the current executor judged before "ready"
        #: Why each batch that failed as a whole was judged again alone (crash, hang,
        #: the oracle raised, unhealthy after it), oldest first.
        self.batch_failures: list[str] = []
        #: Batches answered, by their number of Cases.
        self.batch_sizes: Counter[int] = Counter()

    # -- lifecycle --
    def launch(self) -> None:
        """Spawn an executor without waiting for it (unless one is running): it imports
        torch, initialises CUDA and warms up while the caller goes on (the plugin launches
        at the end of collection). Anything that needs it waits for its "ready" then.
        With Cases in flight nothing is done: their settling replaces a dead executor and
        sends them again (``_next_head``)."""
        if not self._alive() and not self._queue:
            self._kill()
            self._spawn()
            self._starting = True

    def start(self) -> None:
        """Have a ready executor now (a Case would start it otherwise): the plugin starts
        it while a shard is set up, so the report's pace does not count interpreter,
        torch and CUDA start-up or the warm-up as fuzzing time. With Cases in flight
        nothing is done (see ``launch``)."""
        if not self._queue:
            self._ensure_ready()

    def ready_now(self) -> bool:
        """Whether a Case sent now would wait for no executor's start: none is starting, or
        the launched one's "ready" has come (read now). One that failed to start counts as
        ready: the next Case starts it again, and reports why it cannot start."""
        if not self._starting:
            return True
        assert self._conn is not None
        if not self._conn.poll(0):
            return False
        with contextlib.suppress(Exception):
            self._await_ready()
        return True

    @property
    def start_reply(self) -> Connection | None:
        """Where a launched executor's "ready" comes (None when none is starting)."""
        return self._conn if self._starting else None

    def _ensure_ready(self) -> None:
        """A live executor whose "ready" has been read: wait for a launched one, start one
        where none runs (or the last one died)."""
        if not self._alive():
            self._kill()
            self._start()
        elif self._starting:
            self._await_ready()

    def _start(self) -> None:
        self._spawn()
        self._await_ready()

    def _spawn(self) -> None:
        """The next executor: the spare started ahead where one is alive, else a new one;
        then a new spare, where known hangs cost kills (``_keep_spare``)."""
        if self._beacon is None:
            self._beacon = Beacon(None if self.log is None else self.log.parent)
        self._beacon.reset()
        self._seen, self._sent = set(), set()
        self.history.restart()
        spare, self._spare = self._spare, None
        ahead = spare is not None and spare.proc.poll() is None
        if spare is not None and ahead:
            self.spares_used += 1
            # Its Cases' stderr starts now (the executor before it wrote there since).
            spare.log_start = _size(self.log) if self.log is not None else 0
        else:
            if spare is not None:
                spare.kill()
            spare = self._fork(replacement=self.starts > 0)
        if self.starts:
            self._event(f"replacement executor {spare.proc.pid}: "
                        + ("the spare started ahead" if ahead else "started now"))
        self.starts += 1
        self._proc, self._out, self._conn = spare.proc, spare.out, spare.conn
        self._log_start = spare.log_start
        self._served = 0
        if self._keep_spare:
            self._spare = self._fork(replacement=True)

    def _fork(self, replacement: bool) -> _Spare:
        """An executor process, its pipes and where its log starts (``replacement``: it
        starts inside a shard's time, so it skips the warm-up)."""
        assert self._beacon is not None
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        _enlarge(to_child_w, from_child_w)
        args = [self.impl_spec, self.device, "strict" if self.strict else ""]
        argv = [sys.executable, "-c", msg.BOOTSTRAP, json.dumps(sys.path), str(to_child_r),
                str(from_child_w), str(os.getpid()), *args]
        stderr = open(self.log, "ab") if self.log else None  # noqa: SIM115
        log_start = stderr.tell() if stderr is not None else 0  # before it can write
        try:
            # Case markers only into a log (the runner cuts tails there), not a terminal.
            env = ({**os.environ, **self.environ, msg.MARKERS_ENV: "1"}
                   if stderr is not None else {**os.environ, **self.environ})
            if self.log is not None:  # where it writes its time breakdown (timing.py)
                env.setdefault(TIMING_ENV, str(self.log.parent))
            env[BEACON_ENV] = str(self._beacon.path)
            if replacement:
                env[msg.WARM_UP_ENV] = "0"
            server = forkserver.shared()
            proc: subprocess.Popen[bytes] | forkserver.Forked
            if server is not None:
                fds = [to_child_r, from_child_w] + ([stderr.fileno()] if stderr else [])
                proc = server.fork(args, fds, env)
            else:
                proc = subprocess.Popen(argv, pass_fds=(to_child_r, from_child_w),
                                        stdin=subprocess.DEVNULL, stderr=stderr, env=env)
        finally:
            if stderr is not None:
                stderr.close()
            os.close(to_child_r)
            os.close(from_child_w)
        return _Spare(proc, Connection(to_child_w, readable=False),
                      Connection(from_child_r, writable=False), log_start)

    def _await_ready(self) -> None:
        """Read the spawned executor's first message: "ready", or why it cannot start."""
        self._starting = False
        assert self._conn is not None
        waited = time.monotonic()
        if not self._conn.poll(0) and self.starts > 1:
            self._event("waiting for the replacement to be ready")
        if not self._conn.poll(self.start_timeout):
            self._kill()
            raise ExecutorError(f"executor for {self.impl_spec!r} on {self.device!r} did not "
                                f"start within {self.start_timeout}s")
        try:
            reply = msg.decode(self._conn.recv())
        except EOFError:
            code = self._kill()
            raise ExecutorError(f"executor for {self.impl_spec!r} died while starting "
                                f"({_exit_description(code)})") from None
        if isinstance(reply, msg.StartFailed):
            self._kill()
            if reply.impl_error:
                from diagfuzz.core.impl import ImplError

                raise ImplError(reply.message)
            raise ExecutorError(f"executor for {self.impl_spec!r} failed to start:\n"
                                f"{reply.message}")
        if not isinstance(reply, msg.Ready):
            self._kill()
            raise ExecutorError(f"executor for {self.impl_spec!r} sent {reply!r} instead of "
                                "ready")
        self.warmed = reply.warmed
        if self.starts > 1:
            self._event(f"replacement ready, waited {time.monotonic() - waited:.2f} s")
        if reply.health_s > 0:
            self.calibration.observe_health(reply.health_s)

    def _alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _event(self, text: str) -> None:
        """A line of the executor log from the runner, with the time of day: a kill and
        how long the killed process took to exit, a replacement and how long it took to be
        ready. Where a run's time went between its Cases (on a GPU a process stuck on a
        kernel that never ends can take seconds to exit) is read there, beside the
        executor's own lines."""
        if self.log is None:
            return
        now = time.time()
        stamp = time.strftime("%H:%M:%S", time.localtime(now)) + f".{int(now * 1000) % 1000:03d}"
        with contextlib.suppress(OSError), self.log.open("a") as out:
            out.write(f"[diagfuzz runner {stamp}] {text}\n")

    def _kill(self) -> int | None:
        """Stop the executor for good; returns its exit code (negative: the signal)."""
        proc, self._proc = self._proc, None
        self._starting = self._closing = False
        # A Case submitted before the next executor starts is that executor's first call
        # of its op and dtype (``_with_stall``), not one the killed executor made warm.
        self._sent = set()
        for conn in (self._conn, self._out):
            if conn is not None:
                conn.close()
        self._conn = self._out = None
        if proc is None:
            return None
        if proc.poll() is not None:
            return proc.returncode
        proc.kill()
        started = time.monotonic()
        try:
            code = proc.wait(10)
        except subprocess.TimeoutExpired:
            code = None
        self._event(f"killed executor {proc.pid}: "
                    + (f"exited in {time.monotonic() - started:.2f} s" if code is not None
                       else "still running after 10 s"))
        return code

    def close(self, wait: float = CLOSE_WAIT) -> None:
        """Ask the executor to exit, and make sure it has (killed after ``wait`` seconds);
        Cases in flight are dropped. One still starting (launched, never ready) reads no
        request yet: it is killed at once."""
        self.request_close()
        if self._proc is not None and self._closing:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(wait)
        self._kill()
        self._keep_spare = False
        if self._spare is not None:
            self._spare.kill()
            self._spare = None
        if self._beacon is not None:
            self._beacon.close()
            self._beacon = None

    def request_close(self) -> None:
        """Ask the executor to exit without waiting (``close`` waits): a runner closing
        several executors asks them all first, so they exit side by side."""
        self._queue.clear()
        self._ready.clear()
        if self._closing or self._out is None or not self._alive() or self._starting:
            return
        try:
            self._out.send(msg.encode(msg.Close()))
            self._closing = True
        except (BrokenPipeError, OSError):
            pass

    def __enter__(self) -> ProcessRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def pid(self) -> int | None:
        """The current executor's pid (None before one is launched or started, or after a
        crash)."""
        return self._proc.pid if self._proc is not None else None

    # -- running --
    def run(self, case: Case) -> Verdict:
        """The Case's verdict; crash/hang in a used executor are confirmed in a fresh one."""
        return self.run_with(case, self.oracle)

    def run_with(self, case: Case, oracle: str, timeout: float | None = None) -> Verdict:
        """``run`` with another function of diagfuzz.oracles (and timeout), same executor.

        Submit, then wait: verdicts of Cases submitted earlier stay for ``poll``/``drain``.
        """
        ticket = self.submit(case, oracle, timeout)
        done = self.wait(0)
        mine = [verdict for t, verdict in done if t == ticket]
        self._ready.extend((t, verdict) for t, verdict in done if t != ticket)
        return mine[0]

    def submit(self, case: Case, oracle: str | None = None,
               timeout: float | None = None, *, single: bool = False) -> int:
        """Send ``case`` to the executor without waiting; returns its ticket for ``poll``;
        ``single``: judged alone, never in a batch (a replay of a history).

        Waits first while ``window`` Cases are in flight (their verdicts are kept for
        ``poll``). Raises what starting an executor raises (ImplError, ExecutorError), and
        ExecutorError when the oracle raised on an earlier Case (its ``tickets`` name it).
        """
        arrived = self.wait(self.window - 1)  # (wait rebinds self._ready)
        self._ready.extend(arrived)
        oracle = oracle or self.oracle
        blocked = self._blocked(case) if self.block_fault_shapes else None
        if blocked is not None:  # answered in submission order: after those in flight
            answered = self.wait(0)  # (wait rebinds self._ready)
            self._ready.extend(answered)
            ticket = next(self._tickets)
            self._ready.append((ticket, blocked))
            return ticket
        # Alone: an op with a confirmed hang or crash, so the next such Case loses only
        # itself; and the run's first Cases until one is answered, so that before any
        # time is measured (the whole timeout is the allowance) one Case is at stake, not
        # a batch of them.
        key = (oracle, case.op, case.dtype)
        single = (single or not (self.batch and oracle in msg.BATCHED_ORACLES)
                  or self.known.has(case.op) or not self.calibration.measured(oracle))
        timeout = timeout or self.timeout
        request = self._with_stall(_Request(next(self._tickets), case, oracle, timeout,
                                            single=single))
        message = request.message()
        if not self._queue:
            self._send_to_idle(message)  # (may start an executor: ``_sent`` anew)
            self._sent.add(key)
            self._queue.append(self._recorded(request))
            self._head_started_now()
            return request.ticket
        self._sent.add(key)
        self._queue.append(self._recorded(request))
        try:
            assert self._out is not None
            self._out.send(message)
        except (BrokenPipeError, OSError):
            pass  # died running an earlier Case: found there, and this one is sent again
        return request.ticket

    def _blocked(self, case: Case) -> Verdict | None:
        """``case`` answered as its op's confirmed hang or crash, not run, where it has
        that fault's shape (``fault_shapes``): each such Case would cost a fresh executor,
        a hang its allowance too."""
        if case.invalid:
            return None
        for fault in FAULTS:
            shape = (self.known.shapes.blocks(case, fault)
                     if self.known.has(case.op, fault) else None)
            if shape is None:
                continue
            words = describe(shape)
            note = ({"known_hang": KNOWN_HANG_NOTE} if fault == "hang"
                    else {"known_crash": "a crash of this op is confirmed"})
            check = self.known.shapes.checks.get((case.op, fault), FAULT_CHECKS[fault])
            return _verdict()(fault, check,
                              f"not run: it has the shape of this op's confirmed {fault} "
                              f"({words})", case, {**note, "blocked": words})
        return None

    def _learn(self, settled: list[tuple[int, Verdict]]) -> list[tuple[int, Verdict]]:
        """``settled``, each valid Case first told to the fault shapes (hung, crashed, or
        answered; an unsupported Case never reached the impl, and an invalid one may pass no
        tensor of its sizes at all, so neither says anything of a fault's shape)."""
        for _, verdict in settled:
            if "blocked" in verdict.details:  # not run: says nothing new of its shape
                continue
            if verdict.case is not None and not verdict.case.invalid and not verdict.unsupported:
                self.known.shapes.observe(
                    verdict.case, verdict.kind if verdict.kind in FAULT_CHECKS else None,
                    verdict.check)
        return settled

    @property
    def in_flight(self) -> int:
        """Cases submitted and not yet answered (a prelude is no one's Case)."""
        return sum(1 for request in self._queue if request.ticket != PRELUDE)

    def poll(self) -> list[tuple[int, Verdict]]:
        """(ticket, Verdict) of every Case answered since the last call, in submission
        order, without waiting; a Case past its timeout is a hang now."""
        done, self._ready = self._ready, []
        try:
            while self._queue:
                step = self._step(block=False)
                if step is None:
                    break
                done += self._learn(step)
        except BaseException:
            self._ready[:0] = done
            raise
        return done

    def drain(self) -> list[tuple[int, Verdict]]:
        """Wait for every Case in flight; all verdicts not yet returned, in order."""
        return self.wait(0)

    def wait(self, in_flight: int = 0) -> list[tuple[int, Verdict]]:
        """Wait until at most ``in_flight`` Cases are unanswered; the verdicts not yet
        returned, in submission order."""
        done, self._ready = self._ready, []
        try:
            while self.in_flight > in_flight:
                done += self._learn(self._step(block=True) or [])
        except BaseException:
            self._ready[:0] = done
            raise
        return done

    def _send_to_idle(self, message: str) -> None:
        """Send to a live executor with nothing in flight (starting one if needed)."""
        for _ in range(3):
            self._ensure_ready()
            try:
                assert self._out is not None
                self._out.send(message)
                return
            except (BrokenPipeError, OSError):
                self._kill()  # died between Cases: not this Case's fault, start afresh
        raise ExecutorError(f"executor for {self.impl_spec!r} keeps dying before it can "
                            f"receive a Case")

    def _head_started_now(self) -> None:
        """The oldest Case in flight starts running now: its timeout and log start here."""
        self._head_started = time.monotonic()

    def _step(self, block: bool) -> list[tuple[int, Verdict]] | None:
        """Settle the oldest Case in flight, or the batch it heads: the (ticket, Verdict)
        pairs settled, [] when they are sent again (to confirm a crash or hang, or a failed
        batch's Cases one at a time), None if nothing settled (``block`` False)."""
        head = self._queue[0]
        if head.blocked is not None:  # never sent: answered in its turn
            self._queue.popleft()
            return self._settled([(head.ticket, head.blocked)])
        assert self._conn is not None
        # A batch of one Case, the only one in flight, failed as that Case itself would.
        alone = head.single or len(self._queue) == 1
        answered = self._conn.poll(0)
        while not answered:  # (the deadline is worked out only while no answer waits)
            deadline, allowance = self._deadline()
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if not block:
                return None
            # then again: progress may move the deadline, a hang confirmed elsewhere
            # brings it nearer
            answered = self._conn.poll(min(left, RECHECK))
        if not answered:
            if not alone:
                return self._judge_alone(f"no progress within {allowance:g}s")
            verdict = self._hang(head, allowance)
        else:
            try:
                reply = msg.decode(self._conn.recv())
            except EOFError:
                if not alone:
                    return self._judge_alone("the executor died")
                verdict = self._died(head)
            else:
                if isinstance(reply, msg.BatchJudged):
                    return self._settle_batch(reply)
                if isinstance(reply, msg.Raised) and not alone:
                    return self._judge_alone("the oracle raised")
                self._served += 1
                try:
                    verdict = self._judge(head, reply)
                except ExecutorError as exc:
                    self._queue.popleft()
                    self._next_head()
                    if head.ticket == PRELUDE:  # no one's Case: the confirmation goes on
                        return []
                    raise ExecutorError(str(exc), (head.ticket,)) from exc
                if isinstance(reply, msg.Judged):
                    # A Case the executor stopped took its allowance: no measure of time.
                    self._observe([head], 0.0 if verdict.kind == "hang" else reply.stretch)
                    if verdict.kind == "hang":
                        verdict = _with_details(verdict, timeout_cap=head.timeout)
                    if verdict.details.get("stopped_in_executor"):
                        # Stopped wherever it was (an import, a lock held): nothing after it
                        # is judged in that process; the queue goes to a fresh one, and a
                        # spare is kept for the op's next hang.
                        self._event(f"{head.case.op} hang stopped by the executor after "
                                    f"{time.monotonic() - self._head_started:.2f} s")
                        self._kill()
                        self._keep_spare = True
        self._queue.popleft()
        if head.ticket == PRELUDE:
            # The call before a hang, made again ahead of the hang's confirmation: its
            # verdict is no one's (the Case it was judged for settled long ago).
            self._next_head()
            return []
        verdict = self._with_history(head, verdict)
        if not verdict.ok and head.batch_attempt:
            verdict = _with_details(verdict, batch_attempt=head.batch_attempt)
        if head.first_attempt is not None and verdict.ok and head.first_attempt.kind == "crash":
            # Died after other Cases, not alone in a fresh executor: what ran before it
            # matters (its history says what), and the crash is the finding. (A hang that
            # does not come back after the call before it is a loaded machine's, and is
            # dropped.)
            verdict = _with_details(head.first_attempt,
                                    alone="passed when judged again alone in a fresh executor")
        elif head.first_attempt is not None:
            verdict = _with_details(verdict,
                                    first_attempt=json.loads(head.first_attempt.to_json()))
        elif (verdict.kind in FAULT_KINDS and _unconfirmed(verdict, head.timeout)
              and not self.known.has(head.case.op, verdict.kind)):
            # Confirm in a fresh executor, ahead of the queue (a hang with a longer
            # allowance: a loaded machine's stall is not a hang). A hang right after the
            # call just before it (``PRELUDE``): work a call leaves running (a kernel that
            # never ends, a lock an error path kept) hangs the next call, never the Case
            # alone.
            self._queue.appendleft(replace(head, first_attempt=verdict, single=True))
            before = self.history.before(head.at) if verdict.kind == "hang" else None
            if before is not None:
                self._queue.appendleft(_Request(PRELUDE, before.case, before.oracle,
                                                head.timeout, single=True))
            self._next_head()
            return []
        if verdict.kind in FAULT_KINDS:
            # Confirmed (or known already): no later Case of the op pays for it in full.
            self.known.add(head.case.op, verdict.kind)
        return self._settled([(head.ticket, verdict)])

    def _recorded(self, request: _Request) -> _Request:
        """``request``, recorded in the current executor's history as sent now."""
        alone = request.single or request.oracle not in msg.BATCHED_ORACLES
        return replace(request, at=self.history.record(request.oracle, request.case, alone))

    def _with_history(self, request: _Request, verdict: Verdict) -> Verdict:
        """A failing verdict says where the calls its executor made before it are."""
        if verdict.ok or request.at < 0 or "history" in verdict.details:
            return verdict
        return _with_details(verdict, history=self.history.reference(request.at))

    def _spare_ahead(self) -> None:
        """Keep an executor started ahead from this runner's first Case of an op with a
        confirmed hang or crash on (``_keep_spare``), not from its first such kill: where
        a hang blocks the host in C, every such Case costs a kill, and the first one's
        replacement would otherwise wait a whole start (FlagGems' import, a CUDA context)
        in front of the Cases after it, in each of the suite's workers."""
        if self._keep_spare:
            return
        self._keep_spare = True
        if self._proc is not None and self._spare is None and self._beacon is not None:
            self._spare = self._fork(replacement=True)

    def _with_stall(self, request: _Request) -> _Request:
        """``request``, alone and with the allowance after which the executor stops it
        itself, where its op has a known hang (the runner then replaces the executor);
        worked out for the executor it is sent to, whose first call it may be. From the
        first such request on, a spare is kept (``_spare_ahead``)."""
        case = request.case
        if self.known.has(case.op):
            self._spare_ahead()
        if not self.known.has(case.op, "hang"):
            return request
        first = (request.oracle, case.op, case.dtype) not in self._sent
        return replace(request, single=True, stall=round(self.calibration.allowance(
            request.oracle, case, request.timeout, first=first, known=True), 3))

    def _deadline(self) -> tuple[float, float]:
        """(when the Case or batch at the head of the queue is a hang, the allowance that
        gives it): ``allowance`` seconds after the executor's last progress mark (or the
        head's start), and never later than the head's ``timeout`` after its start."""
        head = self._queue[0]
        key = (head.ticket, len(self._queue), len(self._seen), self.calibration.version,
               self.known.count())
        if self._group_allowance[0] != key:  # a new head, queue, executor or measurement
            group = [head] if head.single else list(itertools.takewhile(
                lambda r: not r.single and r.oracle == head.oracle,
                itertools.islice(self._queue, MAX_IN_FLIGHT)))
            self._group_allowance = (key, max(self._allowance(r) for r in group))
        allowance = self._group_allowance[1]
        moved, compiling = self._beacon.read() if self._beacon is not None else (0.0, False)
        cap = self._head_started + head.timeout
        if compiling:  # Triton compiles (a JIT library's warm call may): progress too
            return cap, head.timeout
        last = max(self._head_started, moved)
        if head.stall:  # the executor stops it at ``stall``; a stall in C it cannot stop
            return min(cap, last + head.stall + STALL_GRACE), head.stall
        return min(cap, last + allowance), allowance

    def _allowance(self, request: _Request) -> float:
        """Seconds ``request`` may stall in the current executor (``timeouts``); a hang's
        confirmation gets ``confirm_allowance`` of the allowance it stalled past."""
        case = request.case
        first = request.first_attempt
        if first is not None and first.kind == "hang":
            return confirm_allowance(float(first.details.get("timeout", request.timeout)),
                                     request.timeout,
                                     self.calibration.scaled_allowance(request.oracle, case))
        return self.calibration.allowance(
            request.oracle, case, request.timeout,
            first=(request.oracle, case.op, case.dtype) not in self._seen,
            known=self.known.has(case.op, "hang"))

    def _observe(self, requests: list[_Request], stretch: float) -> None:
        """Calibrate on an answer for ``requests`` whose longest stretch took ``stretch``."""
        keys = {(r.oracle, r.case.op, r.case.dtype) for r in requests}
        first = not keys <= self._seen
        self._seen |= keys
        if stretch > 0:
            self.calibration.observe(requests[0].oracle, [r.case for r in requests],
                                     stretch, first)

    def _settled(self, settled: list[tuple[int, Verdict]]) -> list[tuple[int, Verdict]]:
        """``settled``, after the next Case in flight has started."""
        try:
            self._next_head()
        except BaseException:
            # No replacement executor for the Cases behind: these verdicts are settled
            # all the same, and must reach the caller (``poll``/``wait`` keep ``_ready``).
            self._ready += settled
            raise
        return settled

    def _settle_batch(self, reply: msg.BatchJudged) -> list[tuple[int, Verdict]]:
        """The verdicts of a batch the executor judged: the first ``len(reply.which)``
        Cases in flight. An unhealthy executor after it: all judged again, alone."""
        count = len(reply.which)
        if reply.health and count == 1:  # a batch of one: that Case spoiled the executor
            head = self._queue.popleft()
            self._served += 1
            judged = _verdict().from_json(reply.verdicts[0], head.case)
            base = {**self._base(head), "executor_cases": self._served - 1}
            return self._settled([(head.ticket, self._with_history(head, self._poisoned(
                head.case, reply.health, f"{judged.kind} [{judged.check}]: {judged.message}",
                base, original=json.loads(judged.to_json()))))])
        if reply.health:
            return self._judge_alone("the executor was unhealthy after it: "
                                     + error_line(reply.health))
        if count > len(self._queue) or any(r.single for r in itertools.islice(
                self._queue, count)):
            self._kill()
            raise ExecutorError(f"executor answered a batch of {count} Case(s) that does not "
                                "match the Cases in flight",
                                tuple(r.ticket for r in self._queue))
        self._served += count
        self.batch_sizes[count] += 1
        self._observe(list(itertools.islice(self._queue, count)), reply.stretch)
        settled = []
        for row in reply.which:
            request = self._queue.popleft()
            settled.append((request.ticket, self._with_history(
                request, _verdict().from_json(reply.verdicts[row], request.case))))
        return self._settled(settled)

    def _judge_alone(self, why: str) -> list[tuple[int, Verdict]]:
        """A batch failed as a whole (``why``): its executor is replaced, and every Case in
        flight is judged again alone, in order, in the fresh one, so a crash or hang is the
        Case's that causes it, as if no batch had been. Which Cases the executor had taken
        into the batch is unknown; those behind it lose only the batching."""
        self._event(f"a batch failed after {time.monotonic() - self._head_started:.2f} s "
                    f"({why}): {len(self._queue)} Cases judged again alone")
        self._kill()
        self.batch_failures.append(why)
        attempt = f"{why} in a batch of up to {len(self._queue)} Cases in flight"
        for i, request in enumerate(self._queue):
            self._queue[i] = replace(request, single=True, batch_attempt=attempt)
        self._next_head()
        return []

    def _next_head(self) -> None:
        """After the oldest Case settled: the next one starts now, in this executor or (if
        it was killed) in a replacement that gets the whole queue again, in order."""
        if not self._queue:
            return
        if self._proc is not None:
            self._head_started_now()
            return
        self._block_queued()
        lost = [r.ticket for r in self._queue if r.ticket != PRELUDE]
        try:
            self._start()
            assert self._out is not None
            for i, request in enumerate(self._queue):
                if request.blocked is not None:
                    continue
                # (hangs found since, and the allowance in this executor; its history)
                self._queue[i] = request = self._recorded(self._with_stall(request))
                self._sent.add((request.oracle, request.case.op, request.case.dtype))
                try:
                    self._out.send(request.message())
                except (BrokenPipeError, ConnectionResetError):
                    # It died running the head already (a crash the queue meets again,
                    # while the rest was being sent): found there, and the Cases behind
                    # go to its replacement, as after any crash.
                    break
        except Exception as exc:
            self._kill()
            self._queue.clear()
            raise ExecutorError(f"no replacement executor for the {len(lost)} Case(s) "
                                f"in flight: {exc}", tuple(lost)) from exc
        self._head_started_now()

    def _block_queued(self) -> None:
        """Before the queue goes to a replacement executor: each Case in it that has a
        fault's shape learnt since it was submitted is not sent (``_blocked``; a
        confirmation and the call before it always are). The Cases of a batch were
        submitted together, before their op's fault was known, so without this each one
        after the shape formed still cost a kill. The Case after one not sent is judged
        alone: it must not join a batch with the Cases before the gap."""
        if not self.block_fault_shapes:
            return
        gap = False
        for i, request in enumerate(self._queue):
            if request.blocked is not None:
                gap = True
                continue
            verdict = (self._blocked(request.case) if request.ticket != PRELUDE
                       and request.first_attempt is None else None)
            if verdict is not None:
                self._queue[i] = replace(request, blocked=verdict, single=True)
                gap = True
            elif gap:
                self._queue[i] = replace(request, single=True)
                gap = False

    def _base(self, head: _Request) -> dict[str, Any]:
        """Details every non-pass verdict of ``head`` carries."""
        return {"executor_cases": self._served, "timeout": head.timeout}

    def _hang(self, head: _Request, allowance: float) -> Verdict:
        details = {**self._base(head), "timeout": round(allowance, 3),
                   "timeout_cap": head.timeout}
        # A confirmation is never a known hang's later stall, though another runner may
        # have confirmed the op's hang while it ran.
        known = self.known.has(head.case.op, "hang") and head.first_attempt is None
        if known:
            details["known_hang"] = KNOWN_HANG_NOTE
        self._event(f"{head.case.op} hang after {time.monotonic() - self._head_started:.2f} s"
                    f" (no progress within {allowance:g} s; "
                    + ("a confirmation" if head.first_attempt is not None
                       else "its op's hang is confirmed" if known else "to be confirmed")
                    + ")")
        if self.log is not None and self._proc is not None and not known:
            before = _size(self.log)
            self._proc.send_signal(signal.SIGUSR1)  # faulthandler: where it is stuck
            _await_quiet_growth(self.log, before)
            details["stderr_tail"] = _tail(self.log, self._log_start, self._served)
        self._kill()
        if known:  # this op's hangs each cost a kill: have the next executor ready ahead
            self._keep_spare = True
        how = ("calibrated" if allowance < head.timeout else "the timeout")
        return _verdict()("hang", "executor:timeout",
                       f"no progress within {allowance:g}s ({how}); executor killed",
                       head.case, details)

    def _died(self, head: _Request) -> Verdict:
        code = self._kill()
        if self.known.has(head.case.op, "crash"):  # each of its crashes costs a start
            self._keep_spare = True
        details = {**self._base(head), "exitcode": code,
                   "seconds": round(time.monotonic() - self._head_started, 3)}
        if self.log is not None:
            details["stderr_tail"] = _tail(self.log, self._log_start, self._served)
        return _verdict()("crash", "executor:died",
                       f"executor died running this Case ({_exit_description(code)})",
                       head.case, details)

    def _judge(self, head: _Request, reply: msg.Message) -> Verdict:
        """The verdict of an answered Case; a failing one is kept only if the executor is
        still healthy (the health check the executor ran right after it)."""
        base = {**self._base(head), "executor_cases": self._served - 1}
        if isinstance(reply, msg.Judged):
            verdict = _verdict().from_json(reply.verdict, head.case if reply.same_case else None)
            return verdict if verdict.ok else self._after_failure(head.case, verdict, base)
        trace = reply.traceback if isinstance(reply, msg.Raised) else repr(reply)
        unhealthy = self._health(head.case)
        if unhealthy:
            return self._poisoned(head.case, unhealthy, trace, base)
        raise ExecutorError(f"oracle {head.oracle!r} raised on Case {head.case.to_json()}:\n"
                            f"{trace}")

    def _after_failure(self, case: Case, verdict: Verdict, base: dict[str, Any]) -> Verdict:
        """Keep ``verdict`` if the executor is healthy; else the Case poisoned it: crash."""
        unhealthy = self._health(case)
        if not unhealthy:
            return verdict
        return self._poisoned(case, unhealthy,
                              f"{verdict.kind} [{verdict.check}]: {verdict.message}", base,
                              original=json.loads(verdict.to_json()))

    def _poisoned(self, case: Case, health: str, what: str, base: dict[str, Any],
                  original: dict[str, Any] | None = None) -> Verdict:
        self._event(f"{case.op}: unhealthy after its Case ({error_line(health)})")
        self._kill()
        details = {**base, "health": health, "original": original or what}
        return _verdict()("crash", "executor:health",
                       f"executor unhealthy after this Case ({error_line(health)}); "
                       f"the Case's own outcome: {error_line(what)}", case, details)

    def _health(self, case: Case) -> str:
        """'' if the health check the executor ran after the failing ``case`` passed, else
        why not (the executor sends it unasked, before serving the next queued Case). The
        wait is calibrated on the checks measured (``Calibration.health_allowance``): a
        kernel the Case left running on the GPU blocks the check in C for good, and a fixed
        wait would be paid by every such Case of the run."""
        wait = self.calibration.health_allowance(self.health_timeout,
                                                 known=self.known.has(case.op))
        started = time.monotonic()
        try:
            assert self._conn is not None
            if not self._conn.poll(wait):
                return f"health check gave no answer within {wait:g}s"
            reply = msg.decode(self._conn.recv())
        except (EOFError, BrokenPipeError, OSError):
            return f"executor died during the health check ({_exit_description(self._kill())})"
        if isinstance(reply, msg.Raised):
            return reply.traceback or reply.message
        if not isinstance(reply, msg.Healthy):
            return f"health check answered {reply!r}"
        self.calibration.observe_health(time.monotonic() - started)
        return ""


@dataclass
class _Spare:
    """An executor process started ahead of need (``ProcessRunner._spawn``)."""

    proc: subprocess.Popen[bytes] | forkserver.Forked
    out: Connection  # requests to it
    conn: Connection  # its answers ("ready" first)
    log_start: int  # the executor log's size when it started

    def kill(self) -> None:
        for conn in (self.out, self.conn):
            conn.close()
        if self.proc.poll() is None:
            self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)


def _unconfirmed(verdict: Verdict, cap: float) -> bool:
    """Whether a hang or crash needs judging again alone in a fresh executor: one that
    came after other Cases in its executor, or a hang past an allowance shorter than the
    caller's timeout (a loaded machine stalls a first call too)."""
    return bool(verdict.details.get("executor_cases", 0)) or (
        verdict.kind == "hang" and float(verdict.details.get("timeout", cap)) < cap)


def _with_details(verdict: Verdict, **more: Any) -> Verdict:
    return _verdict()(verdict.kind, verdict.check, verdict.message, verdict.case,
                      {**verdict.details, **more})


_ERROR_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)\b")


def error_line(text: str) -> str:
    """The line of ``text`` (a traceback, a verdict's line) that names the error: its last
    ``SomeError: ...`` line, else its last non-blank one. CUDA's errors end in advice
    lines and a blank one, which said nothing as a summary."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    named = [line for line in lines if _ERROR_LINE.match(line)]
    return (named or lines or ["?"])[-1]


@dataclass(frozen=True)
class _Request:
    """A Case in flight: ``first_attempt`` is set when it runs again to confirm a crash;
    ``single`` when it is judged alone, ``batch_attempt`` saying why when that is because
    its batch failed as a whole (a failing verdict carries it)."""

    ticket: int
    case: Case
    oracle: str
    timeout: float
    first_attempt: Verdict | None = None
    single: bool = False
    batch_attempt: str = ""
    #: The allowance after which the executor stops the Case itself (0: it never does).
    stall: float = 0.0
    #: Calls the executor got before this one (its place in ``history``; -1: not sent).
    at: int = -1
    #: Its verdict where it is not run: it has a fault's shape learnt while it waited in
    #: the queue (``ProcessRunner._block_queued``).
    blocked: Verdict | None = None

    def message(self) -> str:
        return msg.encode(msg.Run(self.case.to_json(), self.oracle, self.single, self.stall))
