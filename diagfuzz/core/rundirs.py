"""Run directories: each run writes into a directory of its own, and old ones are pruned.

A new run never deletes an earlier run's evidence before it has finished: it writes into a
fresh directory, points ``latest`` at it once it has finished (or was stopped with a partial
report), and only then removes the oldest runs beyond the last ``KEEP``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Sequence
from pathlib import Path

#: Finished runs kept per directory (``DIAGFUZZ_KEEP_RUNS`` overrides); older ones are pruned
#: when a run finishes.
KEEP = 5
KEEP_ENV = "DIAGFUZZ_KEEP_RUNS"
#: The link to the last run that finished or was stopped with a partial report.
LATEST = "latest"


def keep() -> int:
    """How many runs to keep (at least 1: the run that just finished)."""
    try:
        return max(1, int(os.environ.get(KEEP_ENV, KEEP)))
    except ValueError:
        return KEEP


def new_run_dir(parent: Path, prefix: str = "run-") -> Path:
    """A fresh directory ``parent/<prefix><UTC time>-<pid>`` (never an existing one)."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    return fresh_dir(parent, f"{prefix}{stamp}-{os.getpid()}")


def fresh_dir(parent: Path, name: str) -> Path:
    """``parent/name`` made now, else ``name.2``, ``name.3`` ...: never a directory an
    earlier run made (a second fuzz run with the same seed, another impl, must not
    overwrite the first one's reproducers)."""
    parent.mkdir(parents=True, exist_ok=True)
    n = 1
    while True:
        path = parent / (name if n == 1 else f"{name}.{n}")
        try:
            path.mkdir()
            return path
        except FileExistsError:
            n += 1


def point_latest(run_dir: Path) -> Path:
    """Make ``run_dir.parent/latest`` a relative link to ``run_dir`` (atomically)."""
    link = run_dir.parent / LATEST
    tmp = run_dir.parent / f".{LATEST}.{os.getpid()}"
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    os.symlink(run_dir.name, tmp)
    os.replace(tmp, link)
    return link


def prunable(parent: Path, prefix: str = "run-", keep_runs: int | None = None,
             protect: Path | None = None) -> list[Path]:
    """The ``parent/<prefix>*`` directories ``prune`` removes: the oldest beyond the newest
    ``keep_runs`` (by modification time), never ``protect`` nor ``latest``'s target."""
    keep_runs = keep() if keep_runs is None else keep_runs
    link = parent / LATEST
    kept = {p.resolve() for p in (protect, link if link.exists() else None) if p is not None}
    runs = sorted((p for p in parent.glob(f"{prefix}*") if p.is_dir() and not p.is_symlink()),
                  key=lambda p: p.stat().st_mtime, reverse=True)
    return [old for old in runs[keep_runs:] if old.resolve() not in kept]


def prune(parent: Path, prefix: str = "run-", keep_runs: int | None = None,
          protect: Path | None = None) -> list[Path]:
    """Remove ``prunable``'s directories; the removed ones."""
    removed = prunable(parent, prefix, keep_runs, protect)
    for old in removed:
        shutil.rmtree(old, ignore_errors=True)
    return removed


def disk_bytes(path: Path, leave_out: Sequence[Path] = ()) -> int:
    """Bytes of the files under ``path`` (links not followed), ``leave_out``'s excepted."""
    skip = {str(p) for p in leave_out}
    total = 0
    for root, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if os.path.join(root, d) not in skip]
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total
