"""Where ``--impl`` modules are imported from, without importing torch.

Why apart from ``diagfuzz.core.impl``: a worker puts the impl's directories on ``sys.path``
before it launches its executors (they inherit ``sys.path``), and it launches them before it
imports torch.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path


def import_roots(*extra: str | os.PathLike[str]) -> list[str]:
    """Where ``--impl`` modules are looked for beyond ``sys.path``: the current directory,
    then ``extra`` (the pytest root), as absolute paths without duplicates."""
    roots = [str(Path.cwd()), *(str(Path(e).resolve()) for e in extra)]
    return list(dict.fromkeys(roots))


def use_roots(roots: Sequence[str]) -> None:
    """Put ``roots`` on ``sys.path`` (after what is there): processes this one starts
    (executors) inherit ``sys.path``, so they import the impl the same way."""
    for root in roots:
        if root not in sys.path:
            sys.path.append(root)
