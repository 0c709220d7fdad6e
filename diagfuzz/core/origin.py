"""Where an exception comes from: the innermost frame of the implementation's own code.

One bug raises from one place, whatever dtype, invalid class or stage reaches it; so a
finding of a raised exception is keyed on that place, as Hypothesis keys its failures on
their "interesting origin". The implementation's own code is source a user can open: a file
under the current directory or a ``sys.path`` entry. The frames of torch, Triton, the
standard library and diagfuzz's harness are not, nor is code generated at run time (a file
per compiled variant: inductor's modules, a library's code cache): an ``assert`` in a
library's launcher is its origin, and so is the launcher's call into generated code, or
into torch, that raised. Keyed on a generated file, every variant would be a finding.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from functools import cache, lru_cache
from pathlib import Path
from types import TracebackType

#: Packages whose frames are never the implementation's own code.
FOREIGN_PACKAGES = ("torch", "triton", "hypothesis", "numpy", "_pytest", "pytest", "pluggy",
                    "execnet", "xdist", "functorch", "sympy")
#: Directory names of run-time code generators' caches (inductor's ``torchinductor_<user>``,
#: FlagGems' ``code_cache``, Triton's caches): their files are generated, not source.
GENERATED_DIRS = ("code_cache", ".triton", "triton-cache", ".cache", "__pycache__")


@cache
def _foreign_roots() -> tuple[str, ...]:
    """Directories (with a trailing separator) whose files are not the impl's code."""
    roots = {sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib")}
    here = Path(__file__).resolve().parent.parent  # diagfuzz/
    roots.add(str(here))  # the harness (core, execution, gate ...): never the impl
    for name in ("diagfuzz.oracles", "diagfuzz.strategies", *FOREIGN_PACKAGES):
        module = sys.modules.get(name)
        path = getattr(module, "__file__", None)
        if path:
            roots.add(str(Path(path).resolve().parent))
    return tuple(sorted(r.rstrip(os.sep) + os.sep for r in roots))


def _generated(path: Path) -> bool:
    return any(part in GENERATED_DIRS or part.startswith("torchinductor")
               for part in path.parts[:-1])


@lru_cache(maxsize=64)
def _resolved_bases(cwd: str, path: tuple[str, ...]) -> tuple[Path, ...]:
    """The current directory and the ``sys.path`` entries, resolved (once per both)."""
    bases = []
    for entry in (cwd, *path):
        try:
            bases.append(Path(entry or cwd).resolve())
        except OSError:
            continue
    return tuple(bases)


def _bases() -> tuple[Path, ...]:
    """Where the implementation's own source lives: the cwd first, then ``sys.path``."""
    return _resolved_bases(os.getcwd(), tuple(sys.path))


@lru_cache(maxsize=4096)
def _foreign(filename: str, bases: tuple[Path, ...]) -> bool:
    if filename.startswith("<"):  # <frozen importlib._bootstrap>, <string> and the like
        return True
    try:
        path = Path(filename).resolve()
    except OSError:
        return True
    if str(path).startswith(_foreign_roots()) or _generated(path):
        return True
    return not any(path.is_relative_to(base) for base in bases)


def is_foreign(filename: str) -> bool:
    """True unless ``filename`` is the implementation's own source (module docstring).
    Cached per file and search path: an implementation that fails thousands of Cases
    raises through the same few frames."""
    return _foreign(filename, _bases())


@lru_cache(maxsize=4096)
def _display(filename: str, bases: tuple[Path, ...]) -> str:
    try:
        path = Path(filename).resolve()
    except OSError:
        return filename
    best: Path | None = None
    for base in bases:
        try:
            relative = path.relative_to(base)
        except ValueError:
            continue
        if best is None or len(relative.parts) < len(best.parts):
            best = relative
    return str(best) if best is not None else str(path)


def display_path(filename: str) -> str:
    """``filename`` as a reader finds it: relative to the current directory, else to the
    ``sys.path`` entry it was imported from (``flag_gems/ops/diag_embed.py``)."""
    return _display(filename, _bases())


def _frames(tb: TracebackType | None) -> list[tuple[str, int, str]]:
    frames = []
    while tb is not None:
        code = tb.tb_frame.f_code
        frames.append((code.co_filename, tb.tb_lineno, code.co_name))
        tb = tb.tb_next
    return frames


def raise_origin(exc: BaseException) -> str:
    """``path:line in function`` of the innermost frame of the implementation's own code on
    the way to ``exc``'s raise; with none (torch raised from its own code all the way), the
    innermost frame of all, marked ``(no impl frame)``; '' without a traceback."""
    frames = _frames(exc.__traceback__)
    if not frames:
        return ""
    own = [f for f in frames if not is_foreign(f[0])]
    filename, line, function = (own or frames)[-1]
    where = f"{display_path(filename)}:{line} in {function}"
    return where if own else f"{where} (no impl frame)"
