"""The executor: the spawned process that judges Cases for a runner (``parent``).

It imports torch, Triton and the implementation, passes a health check, warms up
(``diagfuzz.execution.warmup``) and says it is ready; then it answers requests one at a
time, in order, until the runner closes the pipe. After a failing Case it runs the health
check itself, before any queued Case, so a poisoned CUDA context never judges a Case: if
the check fails, it reports so and exits.
"""

from __future__ import annotations

import functools
import os
import signal
import sys
import threading
import time
import traceback
from dataclasses import replace
from multiprocessing.connection import Connection
from typing import Any

from diagfuzz.core.case import Case
from diagfuzz.core.impl import ImplError
from diagfuzz.core.verdict import Verdict
from diagfuzz.execution import messages as msg
from diagfuzz.execution.beacon import Marks, Stalled, StallWatch, install_marks
from diagfuzz.execution.gpu_memory import MemoryShare
from diagfuzz.execution.profiling import Profiler
from diagfuzz.execution.timeline import mark, process_start
from diagfuzz.execution.timeouts import KNOWN_HANG_NOTE
from diagfuzz.execution.timing import Clock, ExecutorTiming


def health_check(device: str) -> None:
    """Raise unless ``device`` still runs a tiny known kernel correctly.

    A sticky CUDA error surfaces at the synchronize; a broken runtime at the kernel.
    """
    import torch

    import diagfuzz.ops as ops

    cuda = str(device).startswith("cuda")
    if cuda:
        torch.cuda.synchronize()
    x = torch.arange(4, dtype=torch.float32, device=device).reshape(2, 2)
    # diagfuzz's own kernel where it runs (it refuses other devices); aten elsewhere, e.g. a
    # CPU executor on a GPU machine.
    y = ops.diagonal_copy(x) if torch.device(device).type == ops.DEVICE else x.diagonal().clone()
    if cuda:
        torch.cuda.synchronize()
    if y.cpu().tolist() != [0.0, 3.0]:
        raise RuntimeError(f"health check: diagonal_copy of a 2x2 gave {y.cpu().tolist()}")


def _watch_parent(parent_pid: int) -> None:
    """Exit when the parent is gone, so a hung executor never outlives its runner."""
    while True:
        time.sleep(1.0)
        if os.getppid() != parent_pid:
            os._exit(3)


def child_main(read_fd: int, write_fd: int, parent_pid: int, impl_spec: str,
               device: str, strict: str = "") -> None:
    """Entry point of the executor (``messages.BOOTSTRAP``, or a fork of the server)."""
    inbox = Connection(read_fd, writable=False)
    outbox = Connection(write_fd, readable=False)
    _serve(inbox, outbox, impl_spec, device, parent_pid, strict == "strict")
    # Done (closed, or a failed start reported): skip the interpreter's teardown of torch
    # and CUDA, which held a worker's session end ~1.5 s on an H200 host. Nothing is left
    # to write: verdicts went out as answered, the profile was dumped.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _send(conn: Connection, message: msg.Message) -> None:
    conn.send(msg.encode(message))


def _serve(inbox: Connection, conn: Connection, impl_spec: str, device: str,
           parent_pid: int, strict: bool = False) -> None:
    """Executor main loop: load the impl, then answer run/health requests until closed."""
    import faulthandler
    import resource

    mark("start", "executor")
    timing, clock = ExecutorTiming(), Clock(process_start())
    import torch

    mark("torch_imported", "executor")
    timing.startup_s = clock.lap()

    # One intra-op thread: the oracle's CPU work is on tensors of a few thousand elements
    # (dev and ci profiles; nightly's reach 2**20, still small for a core, and the suite
    # runs several executors side by side; in-process runners keep torch's default pool).
    # With four workers and eight executors on a 16-core H200 host, executors on torch's
    # default pool used ~8 cores while fuzzing, on one thread ~6, and the workers' pace rose
    # from 855 to 902 Cases/s each in the round where both ran warm (tools/gpu_ab;
    # BENCHMARKS.md, "Fuzz throughput and gate time").
    torch.set_num_threads(1)
    faulthandler.enable()  # a segfault prints the Python stack to stderr before dying
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # a hang's stack, on request
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core files from expected aborts
    threading.Thread(target=_watch_parent, args=(parent_pid,), daemon=True).start()
    try:
        from diagfuzz import oracles
        from diagfuzz.execution.runner import settle_heap
        from diagfuzz.execution.warmup import warm_up
        from diagfuzz.impl import load_proven

        if str(device).startswith("cuda"):
            # The CUDA context, its own step of the timeline (with a dozen executors
            # starting on one GPU, contexts are the part of start-up that waits on others).
            torch.empty(1, device=device)
            mark("cuda_context", "executor")
        # The canary references before and after the impl loads: what it registers into
        # aten must change none of them (diagfuzz.core.dispatch defers it while judging).
        impl, _ = load_proven(impl_spec, device)
        mark("impl_loaded", "executor")
        timing.import_s = clock.lap()
        health_check(device)
        mark("health_checked", "executor")
        # Start-up, not the first Cases' time (diagfuzz.execution.warmup). A replacement
        # after a crash starts inside a shard's time anyway: it goes straight to work.
        warmed = 0 if os.environ.get(msg.WARM_UP_ENV) == "0" else warm_up(device)
        health_started = time.perf_counter()
        health_check(device)  # warm: the measure of the check after a failing Case
        health_s = time.perf_counter() - health_started
        settle_heap()  # full collections would walk every import's objects (runner.py)
        timing.warmup_s = clock.lap()
    except ImplError as exc:
        _send(conn, msg.StartFailed(str(exc), impl_error=True))
        return
    except Exception:
        _send(conn, msg.StartFailed(traceback.format_exc()))
        return
    mark("ready", "executor")
    _send(conn, msg.Ready(os.getpid(), warmed, round(health_s, 6)))
    profiler = Profiler("executor")  # DIAGFUZZ_PROFILE only
    try:
        marks = install_marks()
        _answer(inbox, conn, impl, device, oracles, profiler, strict, timing, marks,
                StallWatch(marks))
    finally:
        profiler.dump()
        timing.dump()


def _answer(inbox: Connection, conn: Connection, impl: Any, device: str, oracles: Any,
            profiler: Profiler, strict: bool = False,
            timing: ExecutorTiming | None = None, marks: Marks | None = None,
            watch: StallWatch | None = None) -> None:
    """Answer Run/Health requests until the runner closes the pipe or asks to close.

    A batchable ``Run`` (not ``single``, an oracle of ``oracles.BATCHED``) is judged
    together with the batchable ``Run`` requests already queued behind it, up to
    ``MAX_BATCH``: as many as the runner got ahead, so batches grow exactly when the
    executor is the bottleneck.
    """
    from diagfuzz.oracles.batch import MAX_BATCH

    runs = 0
    markers = os.environ.get(msg.MARKERS_ENV) == "1"
    ahead: list[msg.Message] = []  # read while filling a batch, not yet answered
    closed = False
    marks = marks or Marks(None)
    share = MemoryShare(device)
    while True:
        if timing is not None:  # what was judged so far, for an executor a crash may kill
            timing.checkpoint()
        share.after_case()  # cached blocks past this executor's share back to the GPU
        if ahead:
            request = ahead.pop(0)
        elif closed:
            return
        else:
            try:
                request = msg.decode(inbox.recv())
            except EOFError:
                return
        if isinstance(request, msg.Close):
            return
        if markers and isinstance(request, msg.Run):
            # Mark where this Case's stderr starts: the runner cuts a dying Case's tail
            # here (a size it took itself could be taken after the Case began).
            os.write(2, msg.CASE_MARKER.format(runs).encode())
        if (isinstance(request, msg.Run) and not request.single and not request.stall
                and request.oracle in oracles.BATCHED):
            batch = [request]
            while len(batch) < MAX_BATCH and not ahead and not closed and inbox.poll(0):
                try:
                    queued = msg.decode(inbox.recv())
                except EOFError:
                    closed = True
                    break
                if (isinstance(queued, msg.Run) and not queued.single and not queued.stall
                        and queued.oracle == request.oracle):
                    batch.append(queued)
                else:
                    ahead.append(queued)
            runs += len(batch)
            marks.begin()
            reply = _judge_batch(batch, impl, device, oracles, profiler, strict, timing,
                                 share)
            if isinstance(reply, msg.BatchJudged):
                reply = replace(reply, stretch=round(marks.end(), 6))
            _send(conn, reply)
            if isinstance(reply, msg.Raised):
                health = _health_reply(device)
                _send(conn, health)
                if not isinstance(health, msg.Healthy):
                    return
            elif isinstance(reply, msg.BatchJudged) and reply.health:
                return
            continue
        passed = True
        try:
            if isinstance(request, msg.Health):
                health_check(device)
                reply = msg.Healthy()
            else:
                assert isinstance(request, msg.Run), request
                runs += 1
                oracle = getattr(oracles, request.oracle)
                profiler.enable()
                started = time.perf_counter()
                case = Case.from_json(request.case)
                marks.begin()
                try:
                    verdict = share.judge(functools.partial(
                        _judge_watched, oracle, case, impl, device, strict, watch,
                        request.stall))
                finally:
                    profiler.disable()
                stretch = round(marks.end(), 6)
                if timing is not None:
                    timing.case(case.op, case.dtype, time.perf_counter() - started)
                if verdict.case is case:  # the runner holds it: no need to send it back
                    reply = msg.Judged(verdict.to_json_without_case(), same_case=True,
                                       stretch=stretch)
                else:
                    reply = msg.Judged(verdict.to_json(), stretch=stretch)
                passed = verdict.ok
        except Exception as exc:
            reply = msg.Raised(repr(exc), traceback.format_exc())
            passed = False
        _send(conn, reply)
        if isinstance(request, msg.Run) and not passed:
            # Health right after the failing Case, before any queued one runs: a Case that
            # poisoned the context is found, and no later Case is judged in that context.
            health = _health_reply(device)
            _send(conn, health)
            if not isinstance(health, msg.Healthy):
                return


def _judge_watched(oracle: Any, case: Case, impl: Any, device: str, strict: bool,
                   watch: StallWatch | None, stall: float) -> Verdict:
    """The oracle's verdict of ``case``; ``hang`` where it made no progress within
    ``stall`` seconds and the watch could stop it (``StallWatch``; its runner then replaces
    this executor)."""
    if watch is None or stall <= 0:
        return oracle(case, impl, device, strict=strict)
    try:
        with watch.watch(stall):
            verdict = oracle(case, impl, device, strict=strict)
    except Stalled as exc:
        # Where it was stuck: the stack the signal found, less the watch's own frame.
        stack = traceback.extract_tb(exc.__traceback__)[:-1]
        where = "Stopped here (most recent call last):\n" + "".join(
            traceback.format_list(stack))
        return _stopped(case, stall, where)
    if watch.fired:  # the stop surfaced as the impl's error, or was swallowed: a stall
        return _stopped(case, stall, f"The stop surfaced as: {verdict.kind} "
                                     f"[{verdict.check}]: {verdict.message}")
    return verdict


def _stopped(case: Case, stall: float, where: str) -> Verdict:
    """The verdict of a Case the executor's watch stopped after ``stall`` seconds."""
    return Verdict("hang", "executor:timeout",
                   f"no progress within {stall:g}s (calibrated); stopped in the executor",
                   case, {"timeout": stall, "stopped_in_executor": True,
                          "known_hang": KNOWN_HANG_NOTE, "stderr_tail": where[-4000:]})


def _judge_batch(batch: list[msg.Run], impl: Any, device: str, oracles: Any,
                 profiler: Profiler, strict: bool,
                 timing: ExecutorTiming | None, share: MemoryShare) -> msg.Message:
    """One batch's answer: ``BatchJudged``, or ``Raised`` when the oracle raised.

    A Case that fails in a batch of several is judged again alone, after a health check
    (``_confirmed``): in a batch another Case's stray write could have caused the failure
    (``diagfuzz.oracles.batch``). After failing verdicts the health check runs again; an
    unhealthy executor reports it and exits, and the runner judges the whole batch again,
    one Case at a time, in a fresh executor.
    """
    profiler.enable()
    started = time.perf_counter()
    try:
        cases = [Case.from_json(request.case) for request in batch]
        verdicts = oracles.BATCHED[batch[0].oracle](cases, impl, device, strict=strict)
        failing = [i for i, verdict in enumerate(verdicts) if not verdict.ok]
        health = _health_text(device) if failing else ""
        if failing and not health and len(cases) > 1:
            alone = getattr(oracles, batch[0].oracle)
            for i in failing:
                verdicts[i] = _confirmed(verdicts[i], share.judge(
                    functools.partial(alone, cases[i], impl, device, strict=strict)))
            health = _health_text(device)
    except Exception as exc:
        return msg.Raised(repr(exc), traceback.format_exc())
    finally:
        profiler.disable()
    if timing is not None:
        each = (time.perf_counter() - started) / len(cases)
        for case in cases:
            timing.case(case.op, case.dtype, each)
    rows: dict[str, int] = {}
    which = [rows.setdefault(verdict.to_json_without_case(), len(rows))
             for verdict in verdicts]
    return msg.BatchJudged(list(rows), which, health)


def _confirmed(in_batch: Verdict, alone: Verdict) -> Verdict:
    """A Case's verdict from its failing judgement in a batch and its judgement alone.

    Failing alone too: the judgement alone, what judging Cases one at a time gives. Passing
    alone: the batch's failure stands, saying so. A nondeterministic implementation fails
    some calls and not others, and such a failure is a finding (classification tells how
    often it comes back); dropping it would lose exactly the flaky bugs users cannot pin
    down. (A failure caused by another Case of the batch also comes back 0 of r times.)
    """
    if not alone.ok:
        return alone
    return Verdict(in_batch.kind, in_batch.check, in_batch.message, in_batch.case,
                   {**in_batch.details, "alone": "passed when judged again alone"})


def _health_text(device: str) -> str:
    """'' if the health check passes, else its traceback."""
    try:
        health_check(device)
    except Exception:
        return traceback.format_exc()
    return ""


def _health_reply(device: str) -> msg.Message:
    """The health check's outcome as a message for the runner."""
    try:
        health_check(device)
    except Exception as exc:
        return msg.Raised(repr(exc), traceback.format_exc())
    return msg.Healthy()
