"""FanoutRunner: one worker feeds several executor processes, so checks run in parallel.

A pipelined worker draws Cases faster than one executor checks them (the oracle is the
limit on a GPU), so with ``--diagfuzz-executors N`` the worker submits to N
``ProcessRunner``s. Each executor stays FIFO, so crash and hang attribution stays per
executor, exactly as with one: its oldest unanswered Case is the one it was running, and
the Cases queued behind a crash run again in its own replacement. The fan-out only routes
(each Case to the executor with the fewest in flight) and renames tickets: it hands out
its own, and translates the executors' tickets in verdicts and in exceptions that carry
``tickets`` (an oracle error, a replacement that cannot start).

Verdicts are released in submission order (a settled verdict waits for every earlier
Case's), so a pipelined shard sees the same first failure whatever the executors' timing,
and the journal's oldest Case without a verdict is still one that was running. After a
runner error the next ``poll`` releases everything settled, so a crash whose replacement
could not start still reaches the caller before the error's lost Cases are blamed.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from multiprocessing import connection
from typing import TYPE_CHECKING, Any

from diagfuzz.execution.parent import CLOSE_WAIT, ExecutorError, ProcessRunner

if TYPE_CHECKING:  # torch-heavy: a worker launches its executors before it imports torch
    from diagfuzz.core.case import Case
    from diagfuzz.core.verdict import Verdict


class FanoutRunner:
    """The pipelining runner interface (``submit``/``poll``/``wait``/``drain``/``run``)
    over several ``ProcessRunner``s, one executor process each."""

    def __init__(self, runners: Sequence[ProcessRunner]) -> None:
        if not runners:
            raise ValueError("FanoutRunner: runners must name at least one ProcessRunner")
        self.runners = list(runners)
        self._tickets = itertools.count(1)
        self._pending: dict[int, int] = {}  # fan-out ticket -> executor index, unsettled
        self._names: list[dict[int, int]] = [{} for _ in self.runners]  # inner -> fan-out
        self._settled: dict[int, Verdict] = {}  # settled, not yet returned
        self._release_all = False  # after a runner error: return everything settled once

    @property
    def window(self) -> int:
        """Cases kept in flight at most: every executor's window together."""
        return sum(r.window for r in self.runners)

    @property
    def in_flight(self) -> int:
        """Cases submitted and not yet answered, over all executors."""
        return sum(r.in_flight for r in self.runners)

    @property
    def starts(self) -> int:
        """Executors started so far, over all of them (replacements included)."""
        return sum(r.starts for r in self.runners)

    def add(self, runner: ProcessRunner) -> int:
        """One more executor, launched now without waiting (its Cases wait for its start);
        its index."""
        self.runners.append(runner)
        self._names.append({})
        runner.launch()
        return len(self.runners) - 1

    def launch(self) -> None:
        """Spawn every executor not running yet, without waiting (``ProcessRunner.launch``):
        they start side by side."""
        for runner in self.runners:
            runner.launch()

    def start(self) -> None:
        """Launch every executor not running yet, side by side, and return as soon as one
        of them is ready: a shard starts on the first, and ``submit`` sends Cases to the
        others as each becomes ready (verdicts come back in submission order either way).
        When none is ready within the start timeout, the first one's start says why."""
        self.launch()
        deadline = time.monotonic() + max(r.start_timeout for r in self.runners)
        while time.monotonic() < deadline:
            if any(r.ready_now() for r in self.runners):
                return
            replies = [c for c in (r.start_reply for r in self.runners) if c is not None]
            if not replies:
                break
            connection.wait(replies, timeout=max(0.0, deadline - time.monotonic()))
        self.runners[0].start()

    @property
    def device(self) -> str:
        """Where the executors run Cases (all alike)."""
        return self.runners[0].device

    def submit(self, case: Case, oracle: str | None = None, timeout: float | None = None,
               executor: int | None = None) -> int:
        """Send ``case`` to executor ``executor``, else to the ready executor with the
        fewest Cases in flight (any executor, where none is ready yet); its ticket.
        ``oracle`` and ``timeout`` as ``ProcessRunner.submit``'s (a caller that routes,
        the gate's stages, keeps a JIT library's specialisation in one process:
        ``diagfuzz.gate.pool``).

        Waits first while ``window`` Cases are in flight (verdicts kept for ``poll``).
        """
        self._collect_until(self.window - 1)
        if executor is None:
            ready = [i for i, r in enumerate(self.runners) if r.ready_now()]
            executor = min(ready or range(len(self.runners)),
                           key=lambda i: self.runners[i].in_flight)
        index = executor
        ticket = next(self._tickets)
        inner = self._call(index, lambda: self.runners[index].submit(case, oracle, timeout))
        self._names[index][inner] = ticket
        self._pending[ticket] = index
        # An inner submit may have waited for room itself: its verdicts wait in its poll.
        return ticket

    def poll(self) -> list[tuple[int, Verdict]]:
        """(ticket, Verdict) of Cases answered since the last call, in submission order,
        without waiting; a verdict waits for every earlier Case's (see the module doc)."""
        for index, runner in enumerate(self.runners):
            self._absorb(index, self._call(index, runner.poll))
        return self._release()

    def poll_settled(self) -> list[tuple[int, Verdict]]:
        """Every verdict settled so far, in ticket order, earlier Cases answered or not:
        what a stopped caller still counts before ``close`` drops the rest."""
        self._release_all = True
        return self.poll()

    def wait(self, in_flight: int = 0) -> list[tuple[int, Verdict]]:
        """Wait until at most ``in_flight`` Cases are unanswered; the verdicts releasable
        now, in submission order."""
        self._collect_until(in_flight)
        return self.poll()  # and what executors settled while making room in submit

    def drain(self) -> list[tuple[int, Verdict]]:
        """Wait for every Case in flight; every verdict not yet returned, in order."""
        return self.wait(0)

    def run(self, case: Case) -> Verdict:
        """The Case's verdict, waiting for it alone: others' verdicts stay for ``poll``."""
        ticket = self.submit(case)
        index = self._pending[ticket]
        runner = self.runners[index]
        while ticket in self._pending:
            if not runner.in_flight:  # settled in its poll, or it was never answered
                self._absorb(index, self._call(index, runner.poll))
                if ticket in self._pending:
                    raise RuntimeError(f"FanoutRunner: executor {index} lost ticket {ticket}")
                break
            self._settle_one(index)
        return self._settled.pop(ticket)

    def close(self, wait: float = CLOSE_WAIT) -> None:
        """Close every executor; Cases in flight are dropped. They are asked all at once
        and share one ``wait`` for exiting before they are killed, so a stop closes many
        executors in the time of one."""
        self._pending.clear()
        self._settled.clear()
        for names in self._names:
            names.clear()
        for runner in self.runners:
            runner.request_close()  # all at once: they exit side by side
        deadline = time.monotonic() + wait
        for runner in self.runners:
            runner.close(max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> FanoutRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals --
    def _collect_until(self, in_flight: int) -> None:
        """Block on the executor running the oldest unsettled Case (the next one to be
        released) until at most ``in_flight`` are unanswered; collect the others too."""
        while self.in_flight > in_flight:
            busy = [i for i, r in enumerate(self.runners) if r.in_flight]
            oldest = min(busy, key=self._oldest_ticket)
            self._settle_one(oldest)
            for index, other in enumerate(self.runners):
                if index != oldest and other.in_flight:
                    self._absorb(index, self._call(index, other.poll))

    def _settle_one(self, index: int) -> None:
        """Wait until executor ``index`` settles its oldest Case (at least)."""
        runner = self.runners[index]
        self._absorb(index, self._call(index, lambda: runner.wait(runner.in_flight - 1)))

    def _oldest_ticket(self, index: int) -> int:
        """The smallest unsettled ticket of executor ``index`` (its queue's head)."""
        mine = [t for t, i in self._pending.items() if i == index]
        return min(mine) if mine else 1 << 62

    def _call(self, index: int, call: Callable[[], Any]) -> Any:
        """``call()`` on executor ``index``; an exception's ``tickets`` become ours, and
        the Cases it gave up on stop holding back later verdicts."""
        try:
            return call()
        except ExecutorError as exc:
            lost = [self._names[index].pop(t) for t in exc.tickets if t in self._names[index]]
            for ticket in lost:
                self._pending.pop(ticket, None)
            self._release_all = True
            raise ExecutorError(str(exc), tuple(lost)) from exc
        except BaseException:
            self._release_all = True
            raise

    def _absorb(self, index: int, done: list[tuple[int, Verdict]]) -> None:
        """Verdicts of executor ``index`` (its tickets): settled under ours."""
        for inner, verdict in done:
            ticket = self._names[index].pop(inner, None)
            if ticket is None:  # closed meanwhile (a stop, from another thread): dropped
                continue
            self._pending.pop(ticket, None)
            self._settled[ticket] = verdict

    def _release(self) -> list[tuple[int, Verdict]]:
        """Settled verdicts older than every unsettled Case (all of them, once, after a
        runner error), in ticket order."""
        floor = min(self._pending) if self._pending and not self._release_all else None
        self._release_all = False
        out = sorted(((t, v) for t, v in self._settled.items() if floor is None or t < floor),
                     key=lambda item: item[0])
        for ticket, _ in out:
            del self._settled[ticket]
        return out
