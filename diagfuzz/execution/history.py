"""What an executor ran before a Case: kept for every executor, replayed where a failure needs it.

Kernel libraries keep state between calls (compiled-kernel caches keyed on some of the
arguments, autotuning that switches after N calls, workspaces, memoised outputs, flags one
op leaves for another, lazy first-call initialisation). A bug behind such state fails only
after particular earlier calls, and deterministically so; judged alone in a fresh process
it passes. So each runner records the calls it sent to its current executor, in order (a
replacement executor starts a new history): the Cases, invalid ones included, with the
oracle each went to. The executor's warm-up never calls the implementation, so a fresh
executor's past is the same in a replay.

Recording is an append of a reference per Case (no copy, no I/O). Only when a Case fails is
the history written, once per executor and appended as it grows, to ``history-<n>.jsonl``
beside the executor's log (a temporary directory for a runner without one), and the
failing verdict's ``details.history`` says which file and how many of its calls came
before the Case. Classification reads it back (``read``), replays it in a fresh executor
(``replay``) and shrinks it; a reproducer replays the shortest sequence.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import shutil
import tempfile
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # torch-heavy: the runner side records before it imports torch
    from diagfuzz.core.case import Case

#: Calls kept per executor (the oldest are dropped past it): a polluter further back than
#: this is not replayed. A suite executor judges a few thousand Cases.
HISTORY_LIMIT = 4096


@dataclass(frozen=True)
class Call:
    """One call an executor made: ``oracle`` (a function of ``diagfuzz.oracles``) on ``case``;
    ``alone``: judged by the oracle itself, not its batch form (``oracles.check_batch``),
    which allocates otherwise (a cache keyed on addresses sees other addresses)."""

    oracle: str
    case: Case
    alone: bool = False

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data (the Case as ``Case.to_dict``)."""
        data = {"oracle": self.oracle, "case": self.case.to_dict()}
        return {**data, "alone": True} if self.alone else data

    @staticmethod
    def from_dict(data: dict[str, Any]) -> Call:
        """The inverse of ``to_dict``."""
        from diagfuzz.core.case import Case

        return Call(str(data.get("oracle") or "check"), Case.from_json(data["case"]),
                    bool(data.get("alone", False)))

    def describe(self) -> str:
        """The Case's one-line description, with its oracle where it is not ``check``."""
        oracle = "" if self.oracle == "check" else f" [{self.oracle}]"
        return self.case.describe() + oracle


_fallback: Path | None = None


def _fallback_dir() -> Path:
    """One temporary directory per process for runners without a log directory, removed
    at exit (their failures are classified in this process or not at all)."""
    global _fallback
    if _fallback is None:
        _fallback = Path(tempfile.mkdtemp(prefix="diagfuzz-history-"))
        atexit.register(shutil.rmtree, _fallback, True)
    return _fallback


class History:
    """The calls sent to one runner's current executor, in the order it runs them."""

    def __init__(self, directory: Path | None, limit: int = HISTORY_LIMIT) -> None:
        self._directory = directory
        self._limit = limit
        self._calls: deque[Call] = deque(maxlen=limit)
        self._count = 0  # calls sent to the current executor (the deque keeps the last)
        self._executors = 0
        self._file: Path | None = None
        self._written = 0  # of the current executor's calls, how many are in ``_file``

    def restart(self) -> None:
        """A new executor: its history starts empty."""
        self._calls.clear()
        self._count = 0
        self._executors += 1
        self._file = None
        self._written = 0

    def record(self, oracle: str, case: Case, alone: bool = False) -> int:
        """Record a call sent now; how many calls this executor got before it."""
        self._calls.append(Call(oracle, case, alone))
        self._count += 1
        return self._count - 1

    def before(self, index: int) -> Call | None:
        """The call this executor got just before its call ``index`` (None for its first,
        or one dropped past the limit)."""
        dropped = self._count - len(self._calls)
        i = index - 1 - dropped
        return self._calls[i] if 0 <= i < len(self._calls) and index <= self._count else None

    def reference(self, before: int) -> dict[str, Any]:
        """``details.history`` of a failing Case that had ``before`` calls before it in this
        executor: the file holding them (written now, as far as it has grown)."""
        path = self._write()
        dropped = self._count - len(self._calls)
        return {"file": str(path), "calls": before, "dropped": min(dropped, before)}

    def _write(self) -> Path:
        if self._file is None:
            directory = self._directory or _fallback_dir()
            directory.mkdir(parents=True, exist_ok=True)
            self._file = _free_name(directory, self._executors)
        dropped = self._count - len(self._calls)
        start = max(self._written, dropped)
        if start < self._count:
            lines = [json.dumps({"i": i, **call.to_dict()}, sort_keys=True)
                     for i, call in zip(range(start, self._count),
                                        list(self._calls)[start - dropped:], strict=True)]
            with self._file.open("a", encoding="utf-8") as out:
                out.write("\n".join(lines) + "\n")
            self._written = self._count
        return self._file


def _free_name(directory: Path, n: int) -> Path:
    """``history-<n>.jsonl`` (another suffix if a runner before this one took it)."""
    path = directory / f"history-{n}.jsonl"
    k = 1
    while path.exists():
        path = directory / f"history-{n}-{k}.jsonl"
        k += 1
    path.touch()
    return path


def read(reference: Any) -> list[Call]:
    """The calls a failing Case's ``details.history`` names, oldest first ([] where it names
    none, or its file is gone)."""
    if not isinstance(reference, dict) or not reference.get("file"):
        return []
    before = int(reference.get("calls", 0))
    calls: list[Call] = []
    with contextlib.suppress(OSError, ValueError, KeyError):
        for line in Path(reference["file"]).read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            data = json.loads(line)
            if int(data.get("i", 0)) < before:
                calls.append(Call.from_dict(data))
        return calls
    return []


class _Runner(Protocol):
    def submit(self, case: Case, oracle: str | None = None, timeout: float | None = None,
               *, single: bool = False) -> int: ...

    def wait(self, in_flight: int = 0) -> list[tuple[int, Any]]: ...

    @property
    def starts(self) -> int: ...


class Stopped(Exception):
    """A replay's caller stopped it between two calls."""


def replay(runner: _Runner, calls: Sequence[Call], target: Call,
           stopped: Callable[[], bool] = lambda: False) -> tuple[Any, list[Any]]:
    """Run ``calls`` then ``target`` in ``runner``'s executor, one at a time, each judged as
    it was (``Call.alone``; batches replay as batches of one: a part of a batch could not
    be replayed as a batch): (the target's verdict, the verdicts of ``calls`` in order).
    The target's verdict says in ``details.replay_restarted`` if an earlier call killed the
    executor (its state was lost on the way, so the replay is not the sequence). Raises
    ``Stopped`` once ``stopped()`` (a runner closed under it would start a new executor
    at its next call: a long history must not go on after the gate's stop)."""
    starts = runner.starts
    done: dict[int, Any] = {}
    tickets = []
    for call in [*calls, target]:
        if stopped():
            raise Stopped
        tickets.append(runner.submit(call.case, call.oracle, single=call.alone))
        done.update(runner.wait(0))
    last = tickets.pop()
    verdict = done[last]
    restarted = runner.starts - max(starts, 1)
    if restarted > 0 and not verdict.ok:
        from diagfuzz.core.verdict import Verdict

        verdict = Verdict(verdict.kind, verdict.check, verdict.message, verdict.case,
                          {**verdict.details, "replay_restarted": restarted})
    return verdict, [done[t] for t in tickets]


def sequence_dicts(calls: Iterable[Call]) -> list[dict[str, Any]]:
    """JSON-ready calls (reports, reproducers, the corpus)."""
    return [call.to_dict() for call in calls]
