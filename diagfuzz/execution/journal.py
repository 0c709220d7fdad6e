"""Write-ahead journal: every Case is on disk before it runs, so no failure is anonymous.

One JSON-lines file per worker (``journal_path(dir, worker_id)``). The first line of each
session is a header (torch, triton, GPU, run seed, worker, pid); then, per Case, a ``case``
line written and flushed *before* the Case runs, and a ``verdict`` line after it. A flushed
line is in the kernel's page cache, so it survives any death of this process (segfault,
abort, kill); only a crash of the whole machine could lose it, and fsync against that cost
~1.9 ms per line, the largest share of a CPU case. ``DIAGFUZZ_JOURNAL_FSYNC=1`` buys it back.
A process that dies mid-Case leaves a ``case`` line with no ``verdict``:
``last_unfinished`` finds it, and ``diagfuzz.execution.crash.attribute_crash`` names it.

With a pipelined runner (``submit``/``poll``) several Cases are in flight: each is written
before it is submitted, each verdict as it arrives, and the executor runs them in order, so
the Case that was running when the process died is the *oldest* one without a verdict. A
Case the runner gave up on (its oracle raised, or no executor could start) gets an
``abandoned`` line, so it is not mistaken for the one running.
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path
from typing import IO, Any

from diagfuzz.core.case import Case
from diagfuzz.core.verdict import Verdict
from diagfuzz.execution.runner import Runner

#: fsync every journal line (survives a machine crash, at ~1.9 ms a line); off by default.
_FSYNC = os.environ.get("DIAGFUZZ_JOURNAL_FSYNC", "") not in ("", "0")


def journal_path(journal_dir: str | os.PathLike[str], worker_id: str) -> Path:
    """Where worker ``worker_id`` (e.g. "gw0", or "main" without xdist) writes its journal."""
    if not worker_id or "/" in worker_id or worker_id.startswith("."):
        raise ValueError(f"journal_path: worker_id must be a plain name, got {worker_id!r}")
    return Path(journal_dir) / f"{worker_id}.jsonl"


def environment() -> dict[str, Any]:
    """Versions and hardware a journal header records: what a replay must match."""
    import torch
    import triton

    gpu = ""
    if torch.cuda.is_available():  # spawn-only executors, so initialising CUDA here is safe
        gpu = torch.cuda.get_device_name()
    return {
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda or "",
        "gpu": gpu,
        "python": platform.python_version(),
        "host": platform.node(),
        "triton_interpret": os.environ.get("TRITON_INTERPRET", ""),
    }


class Journal:
    """Appends the header, then ``begin``/``end`` records for each Case, durably.

    Opened in append mode: a replacement worker or a second session reuses the file, and
    every session starts with its own header.
    """

    def __init__(self, path: str | os.PathLike[str], *, run_seed: int | None = None,
                 worker_id: str = "main", impl: str = "",
                 env: dict[str, Any] | None = None) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[str] | None = open(self.path, "a", encoding="utf-8")  # noqa: SIM115
        self._seq = 0
        self._write({"type": "header", "run_seed": run_seed, "worker": worker_id, "impl": impl,
                     "pid": os.getpid(), "time": time.time(),
                     **(env if env is not None else environment())})

    def _write(self, record: dict[str, Any]) -> None:
        self._write_line(json.dumps(record, sort_keys=True, default=repr))

    def _write_line(self, line: str) -> None:
        if self._file is None:
            raise ValueError(f"journal {self.path} is closed")
        self._file.write(line + "\n")
        self._file.flush()
        if _FSYNC:
            os.fsync(self._file.fileno())

    # The two per-Case records are written as text around the Case's own JSON
    # (``Case.to_json``, made once per Case and cached): encoding the Case again for each
    # record cost a pipelined worker ~20 us a Case. Same keys, in the same (sorted) order,
    # and the same values as ``_write`` of the record would give.
    def begin(self, case: Case, test_id: str = "") -> int:
        """Record ``case`` as about to run; returns its sequence number for ``end``."""
        self._seq += 1
        self._write_line(f'{{"case": {case.to_json()}, "seq": {self._seq}, '
                         f'"test_id": {json.dumps(test_id)}, "type": "case"}}')
        return self._seq

    def end(self, seq: int, verdict: Verdict) -> None:
        """Record the verdict of the Case ``begin`` numbered ``seq``."""
        self._write_line(f'{{"kind": {json.dumps(verdict.kind)}, "seq": {int(seq)}, '
                         f'"type": "verdict", "verdict": {verdict_text(verdict)}}}')

    def abandon(self, seq: int, reason: str) -> None:
        """Record that the Case ``begin`` numbered ``seq`` will get no verdict (the harness
        failed on it, or it was never submitted): it is finished, not running."""
        self._write({"type": "abandoned", "seq": seq, "reason": reason})

    def close(self) -> None:
        """Close the file; later writes raise."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def verdict_text(verdict: Verdict) -> str:
    """``verdict.to_json()``'s value, with its Case as the Case's cached ``to_json`` text
    (the keys are sorted, so "case" comes first)."""
    body = verdict.to_json_without_case()
    if verdict.case is None:
        return body
    head = '{"case": null'
    if not body.startswith(head):  # a Verdict whose JSON no longer sorts "case" first
        raise ValueError(f"verdict JSON does not start with {head!r}: {body[:40]!r}")
    return '{"case": ' + verdict.case.to_json() + body[len(head):]


def read(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every record of a journal; a torn last line (the writer died mid-write) is skipped."""
    records = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return records


def header(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The latest session's header record ({} if there is none)."""
    found: dict[str, Any] = {}
    if Path(path).exists():
        for record in read(path):
            if record.get("type") == "header":
                found = record
    return found


def last_unfinished(path: str | os.PathLike[str]) -> tuple[Case, str] | None:
    """The (Case, test_id) the latest session was running: its oldest Case without a verdict.

    Cases run in the order they were written (one at a time, or pipelined to an executor
    that serves them in order), so the oldest unanswered one is the Case that was running;
    those after it were waiting. None when the journal is missing, empty, or every Case
    finished (a process that dies between Cases did not die of a Case). Sequence numbers
    restart with each header.
    """
    if not Path(path).exists():
        return None
    open_cases: dict[int, dict[str, Any]] = {}
    for record in read(path):
        kind = record.get("type")
        if kind == "header":
            open_cases = {}
        elif kind == "case":
            open_cases[record["seq"]] = record
        elif kind in ("verdict", "abandoned"):
            open_cases.pop(record.get("seq"), None)  # type: ignore[arg-type]
    if not open_cases:
        return None
    oldest = open_cases[min(open_cases)]
    return Case.from_json(oldest["case"]), oldest.get("test_id", "")


class JournaledRunner:
    """Wraps any Runner so each Case is journaled before it runs and its verdict after.

    ``test_id`` may be reassigned between Cases (the plugin sets it to the item's nodeid).
    With a runner that pipelines (``diagfuzz.execution.parent.ProcessRunner``), ``submit``/``poll``/
    ``drain`` do the same for Cases in flight: written before they are sent, verdicts
    written as they are collected.
    """

    def __init__(self, inner: Runner, journal: Journal, test_id: str = "") -> None:
        self.inner = inner
        self.journal = journal
        self.test_id = test_id
        self._seqs: dict[int, int] = {}  # ticket -> journal seq, for Cases in flight
        self._ready: list[tuple[int, Verdict]] = []  # journaled, not yet returned

    def run(self, case: Case) -> Verdict:
        seq = self.journal.begin(case, self.test_id)
        try:
            verdict = self.inner.run(case)
        except BaseException as exc:
            self.journal.abandon(seq, f"{type(exc).__name__}: {exc}")
            raise
        self.journal.end(seq, verdict)
        return verdict

    def launch(self) -> None:
        """Spawn the inner runner's executor(s) without waiting, where it has any."""
        launch = getattr(self.inner, "launch", None)
        if launch is not None:
            launch()

    def start(self) -> None:
        """Start the inner runner's executor(s) now, where it has any (``start``)."""
        start = getattr(self.inner, "start", None)
        if start is not None:
            start()

    @property
    def pipelines(self) -> bool:
        """Whether the inner runner can keep Cases in flight (submit/poll/drain)."""
        return all(hasattr(self.inner, name) for name in ("submit", "poll", "wait"))

    def submit(self, case: Case) -> int:
        """Journal ``case``, then send it without waiting; returns its ticket.

        Room is made first (the runner keeps a bounded window in flight), so the Case is
        written only when it can be sent at once.
        """
        inner: Any = self.inner
        arrived = self._settle(lambda: inner.wait(inner.window - 1))
        self._ready.extend(arrived)
        seq = self.journal.begin(case, self.test_id)
        try:
            ticket = inner.submit(case)
        except BaseException as exc:
            self.journal.abandon(seq, f"not submitted: {type(exc).__name__}: {exc}")
            self._abandon_lost(exc)
            raise
        self._seqs[ticket] = seq
        return ticket

    def poll(self) -> list[tuple[int, Verdict]]:
        """Verdicts that have arrived (journaled now), without waiting."""
        inner: Any = self.inner
        done, self._ready = self._ready, []
        try:
            return done + self._settle(inner.poll)
        except BaseException:
            self._ready[:0] = done  # journaled already: they still go to the caller
            raise

    def drain(self) -> list[tuple[int, Verdict]]:
        """Wait for every Case in flight; their verdicts, journaled."""
        inner: Any = self.inner
        done, self._ready = self._ready, []
        try:
            return done + self._settle(lambda: inner.wait(0))
        except BaseException:
            self._ready[:0] = done  # journaled already: they still go to the caller
            raise

    def _settle(self, collect: Any) -> list[tuple[int, Verdict]]:
        try:
            done = collect()
        except BaseException as exc:
            self._abandon_lost(exc)
            raise
        for ticket, verdict in done:
            self.journal.end(self._seqs.pop(ticket), verdict)
        return done

    def _abandon_lost(self, exc: BaseException) -> None:
        """Journal the Cases ``exc`` says the runner gave up on (``exc.tickets``)."""
        for ticket in getattr(exc, "tickets", ()):
            seq = self._seqs.pop(ticket, None)
            if seq is not None:
                self.journal.abandon(seq, f"{type(exc).__name__}: {exc}")

    def close(self) -> None:
        self.inner.close()
        self.journal.close()
