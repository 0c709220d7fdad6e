"""What every subcommand of the ``diagfuzz`` command shares: the usage error (exit 4), and
the up-front check of a file the subcommand writes at the end."""

from __future__ import annotations

import os
from pathlib import Path


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
