"""Where ``--impl`` modules are imported from, and whether one is there, without importing
torch.

Why apart from ``diagfuzz.core.impl``: a worker puts the impl's directories on ``sys.path``
before it launches its executors (they inherit ``sys.path``), and it launches them before it
imports torch; the pytest controller and ``diagfuzz gate`` refuse an ``--impl`` that is not
there before they start anything, and neither imports torch to do so.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Sequence
from pathlib import Path

#: The implementation a run tests when ``--impl`` names none (``diagfuzz.impl``).
DEFAULT_IMPL = "diagfuzz.impl:triton_aten"
#: ``--impl`` prefix of a library tested through its aten registrations.
REGISTERED = "registered:"


class ImplError(Exception):
    """The implementation named by ``--impl`` cannot be used (a usage error, not a failure)."""


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


def locate_impl(spec: str) -> None:
    """Refuse an ``--impl`` whose module cannot be found, without importing it (ImplError,
    as ``load_impl`` words it): a caller can say so before it starts anything slow.
    ``registered:MODULE[:CALLABLE]`` is located by its MODULE."""
    module_name = spec.removeprefix(REGISTERED).partition(":")[0]
    if not module_name:
        raise ImplError(f"--impl {spec!r}: expected MODULE:ATTR")
    if module_name.endswith(".py"):
        module_file(module_name, spec)
        return
    top = module_name.split(".")[0]
    if top not in sys.modules and importlib.util.find_spec(top) is None:
        raise ImplError(not_found(spec, top))


def not_found(spec: str, module_name: str) -> str:
    searched = "\n  ".join(p or "." for p in sys.path)
    return (f"--impl {spec!r}: cannot import {module_name!r}: no such module on the path "
            f"searched:\n  {searched}")


def module_file(module_name: str, spec: str) -> Path:
    """The module file ``path/to/mod.py`` an ``--impl`` names (ImplError if there is none)."""
    path = Path(module_name)
    if not path.is_file():
        raise ImplError(f"--impl {spec!r}: no module file {path.resolve()}")
    return path
