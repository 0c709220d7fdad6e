"""What every subcommand of the ``diagfuzz`` command shares: the usage error (exit 4), the
up-front check of a file the subcommand writes at the end, and of ``--ops`` against what
the impl provides."""

from __future__ import annotations

import os
from pathlib import Path

from diagfuzz.core.roots import ImplError


class UsageError(Exception):
    """An argument the command cannot use (exit 4)."""


def writable_file(option: str, path: Path | None) -> None:
    """A file the command writes at the end: refuse it now if it cannot be written."""
    if path is None:
        return
    resolved = path.expanduser().resolve()
    if resolved.is_dir():
        raise UsageError(f"{option} {path}: is a directory; give a file path")
    for parent in resolved.parents:
        if parent.exists():
            if not parent.is_dir():
                raise UsageError(f"{option} {path}: {parent} is a file, not a directory")
            if not os.access(parent, os.W_OK):
                raise UsageError(f"{option} {path}: cannot write in {parent}")
            return


def check_ops_provided(ops: str | None, provided: tuple[str, ...], impl: str) -> None:
    """An ImplError (a usage error, exit 4) when ``--ops`` names only ops ``impl`` lacks: nothing
    would be judged, and a gate that judges nothing must not pass."""
    if not ops:
        return
    wanted = [op.strip() for op in ops.split(",") if op.strip()]
    if not any(op in provided for op in wanted):
        raise ImplError(f"--ops {ops}: {impl} provides none of them (it provides "
                        f"{', '.join(provided) or 'no op'})")
