"""Turn pytest-xdist's bare "worker crashed" into the Case that killed the worker.

The plugin's ``pytest_handlecrashitem`` hook calls ``attribute_crash`` with the journal
directory and the dead worker's id; the write-ahead journal holds the Case that was running.
"""

from __future__ import annotations

import os
from pathlib import Path

from diagfuzz.core import corpus
from diagfuzz.execution.journal import header, journal_path, last_unfinished


def attribute_crash(journal_dir: str | os.PathLike[str], worker_id: str,
                    nodeid: str = "") -> str:
    """A report for a dead worker: its last unfinished Case, saved, with a reproduce command.

    The Case is saved under ``<journal_dir>/crashes/`` (corpus format), so
    ``diagfuzz repro`` can run it at once.
    """
    path = journal_path(journal_dir, worker_id)
    found = last_unfinished(path)
    where = f" while running {nodeid!r}" if nodeid else ""
    if found is None:
        return (f"worker {worker_id!r} crashed{where}; its journal {path} has no unfinished "
                f"Case, so the crash happened outside a Case (collection, set-up or teardown)")
    case, test_id = found
    meta = header(path)
    impl = meta.get("impl", "")
    saved = corpus.save(case, Path(journal_dir) / "crashes", impl=impl,
                        note=f"worker {worker_id} died running it in {test_id or nodeid}")
    impl_arg = f" --impl {impl}" if impl else ""
    return "\n".join([
        f"worker {worker_id!r} crashed{where}: the process died running this Case",
        f"  test: {test_id or nodeid}",
        f"  case: {case.describe()}",
        f"  json: {case.to_json()}",
        f"  run seed: {meta.get('run_seed')}; torch {meta.get('torch')}, triton "
        f"{meta.get('triton')}, gpu {meta.get('gpu') or 'none'}",
        f"  reproduce: diagfuzz repro {saved}{impl_arg}",
    ])
