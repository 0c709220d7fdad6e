"""Write-ahead journal: every Case is on disk before it runs, so no failure is anonymous.

One JSON-lines file per worker (``journal_path(dir, worker_id)``). The first line of each
session is a header (torch, triton, GPU, run seed, worker, pid); then, per Case, a ``case``
line written and flushed *before* the Case runs, and a ``verdict`` line after it. A flushed
line is in the kernel's page cache, so it survives any death of this process (segfault,
abort, kill); only a crash of the whole machine could lose it, and fsync against that cost
~1.9 ms per line, the largest share of a CPU case. ``DIAGFUZZ_JOURNAL_FSYNC=1`` buys it back.
A process that dies mid-Case leaves a ``case`` line with no ``verdict``:
``last_unfinished`` finds it, and ``diagfuzz.crash.attribute_crash`` names it.
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path
from typing import IO, Any

from diagfuzz.case import Case
from diagfuzz.runner import Runner
from diagfuzz.verdict import Verdict

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
        if self._file is None:
            raise ValueError(f"journal {self.path} is closed")
        self._file.write(json.dumps(record, sort_keys=True, default=repr) + "\n")
        self._file.flush()
        if _FSYNC:
            os.fsync(self._file.fileno())

    def begin(self, case: Case, test_id: str = "") -> int:
        """Record ``case`` as about to run; returns its sequence number for ``end``."""
        self._seq += 1
        self._write({"type": "case", "seq": self._seq, "test_id": test_id,
                     "case": json.loads(case.to_json())})
        return self._seq

    def end(self, seq: int, verdict: Verdict) -> None:
        """Record the verdict of the Case ``begin`` numbered ``seq``."""
        self._write({"type": "verdict", "seq": seq, "kind": verdict.kind,
                     "verdict": json.loads(verdict.to_json())})

    def close(self) -> None:
        """Close the file; later writes raise."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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
    """The (Case, test_id) of the latest session's last Case, if it never got a verdict.

    None when the journal is missing, empty, or its last Case finished (a process that
    dies between Cases did not die of a Case). Sequence numbers restart with each header.
    """
    if not Path(path).exists():
        return None
    last: dict[str, Any] | None = None
    finished = False
    for record in read(path):
        kind = record.get("type")
        if kind == "header":
            last, finished = None, False
        elif kind == "case":
            last, finished = record, False
        elif kind == "verdict" and last is not None and record.get("seq") == last["seq"]:
            finished = True
    if last is None or finished:
        return None
    return Case.from_json(last["case"]), last.get("test_id", "")


class JournaledRunner:
    """Wraps any Runner so each Case is journaled before it runs and its verdict after.

    ``test_id`` may be reassigned between Cases (the plugin sets it to the item's nodeid).
    """

    def __init__(self, inner: Runner, journal: Journal, test_id: str = "") -> None:
        self.inner = inner
        self.journal = journal
        self.test_id = test_id

    def run(self, case: Case) -> Verdict:
        seq = self.journal.begin(case, self.test_id)
        verdict = self.inner.run(case)
        self.journal.end(seq, verdict)
        return verdict

    def close(self) -> None:
        self.inner.close()
        self.journal.close()

