"""Where an executor's time goes: start-up, imports, the impl's first calls, judging.

A maintainer whose gate is slow needs to see whether their library's compile time
dominates. Each executor whose runner asked for it (``TIMING_ENV``, a directory) keeps one
``timing-<pid>.json`` there, rewritten at most once a second while it judges (an executor
killed by a crashing Case never exits cleanly) and when it exits: interpreter and torch
start-up, the impl's import, the health check and warm-up, then the Cases it judged, split
into the first Case of each (op, dtype) (where a JIT library compiles) and every later one,
and the seconds torch.compile spent compiling within them (``compile_s``, the impl's and the
torch.compile parity oracle's: a compiled impl compiles on every new shape, not only on a
first call).
``read`` sums the files of a directory tree, per stage.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from diagfuzz.core import compile_time

TIMING_ENV = "DIAGFUZZ_TIMING_DIR"
#: The parts, in the order a reader sees them.
PARTS = ("startup_s", "import_s", "warmup_s", "first_calls_s", "judging_s")


@dataclass
class ExecutorTiming:
    """One executor's seconds per part, and how many Cases each judging part covers."""

    startup_s: float = 0.0
    import_s: float = 0.0
    warmup_s: float = 0.0
    first_calls_s: float = 0.0
    judging_s: float = 0.0
    #: torch.compile's own compiles, inside the parts above (not one more part).
    compile_s: float = 0.0
    first_calls: int = 0
    judged: int = 0
    executors: int = 1
    _seen: set[tuple[str, str]] = field(default_factory=set, repr=False)
    _dumped_at: float = field(default=float("-inf"), repr=False)

    def case(self, op: str, dtype: str, seconds: float) -> None:
        """Count one judged Case: a first call for its (op, dtype) or a later one."""
        if (op, dtype) in self._seen:
            self.judging_s += seconds
            self.judged += 1
        else:
            self._seen.add((op, dtype))
            self.first_calls_s += seconds
            self.first_calls += 1

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("_seen")
        data.pop("_dumped_at")
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in data.items()}

    def add(self, other: dict[str, Any]) -> None:
        for key in (*PARTS, "compile_s", "first_calls", "judged", "executors"):
            setattr(self, key, getattr(self, key) + type(getattr(self, key))(other.get(key, 0)))

    def checkpoint(self, every: float = 1.0) -> None:
        """``dump`` if the last was ``every`` seconds ago or more."""
        if time.monotonic() - self._dumped_at >= every:
            self.dump()

    def dump(self) -> None:
        """Write ``timing-<pid>.json`` where ``TIMING_ENV`` says (nowhere when unset)."""
        self._dumped_at = time.monotonic()
        self.compile_s = compile_time.seconds()
        directory = os.environ.get(TIMING_ENV)
        if not directory:
            return
        path = Path(directory) / f"timing-{os.getpid()}.json"
        with contextlib.suppress(OSError):
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.to_dict()), encoding="utf-8")
            os.replace(tmp, path)


class Clock:
    """Seconds since the last ``lap`` (the first lap counts from process start)."""

    def __init__(self, start: float | None) -> None:
        self.last = start if start is not None else time.time()

    def lap(self) -> float:
        now = time.time()
        seconds, self.last = max(0.0, now - self.last), now
        return seconds


def read(directory: Path) -> ExecutorTiming | None:
    """Every ``timing-*.json`` under ``directory`` summed (None: there is none)."""
    total: ExecutorTiming | None = None
    for path in sorted(directory.rglob("timing-*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if total is None:
            total = ExecutorTiming(executors=0)
        total.add(data)
    return total
