"""Where an exception comes from: the innermost frame of the implementation's own code.

One bug raises from one place, whatever dtype, invalid class or stage reaches it; so a
finding of a raised exception is keyed on that place, as Hypothesis keys its failures on
their "interesting origin". The implementation's own code is any source a user can open,
wherever it is installed: the current directory, a ``sys.path`` entry, site-packages (pip
into a virtual environment), a ``pip install --target`` directory, a ``.pth`` path or an
editable install's source tree. A frame is foreign when it belongs to

* the framework: torch, Triton, Hypothesis, pytest, numpy and the packages they require
  (sympy, jinja2, filelock ...), found by top-level module name wherever installed;
* the standard library proper (``sysconfig``'s ``stdlib``/``platstdlib``, less the
  site-packages and dist-packages under them: in a virtual environment ``platstdlib`` is
  ``<venv>/lib/pythonX.Y``, which holds site-packages);
* diagfuzz itself (core, execution, gate ..., its oracles and strategies);
* code generated at run time (a file per compiled variant: inductor's modules, a library's
  code cache): an ``assert`` in a library's launcher is its origin, and so is the
  launcher's call into generated code, or into torch, that raised. Keyed on a generated
  file, every variant would be a finding.
"""

from __future__ import annotations

import contextlib
import os
import re
import site
import sys
import sysconfig
from functools import cache, lru_cache
from pathlib import Path
from types import TracebackType

#: Packages whose frames are never the implementation's own code (besides the packages
#: that the FRAMEWORK_DISTRIBUTIONS require, found from their installed metadata).
FOREIGN_PACKAGES = ("torch", "triton", "hypothesis", "numpy", "_pytest", "pytest", "pluggy",
                    "execnet", "xdist", "functorch", "sympy", "mpmath", "networkx", "jinja2",
                    "markupsafe", "filelock", "fsspec", "typing_extensions", "setuptools",
                    "pkg_resources", "_distutils_hack", "sortedcontainers", "attr", "attrs",
                    "packaging", "iniconfig", "pygments", "expecttest", "nvidia", "diagfuzz")
#: Distributions whose requirement closure is the framework: their modules are not the
#: implementation's, wherever they are installed.
FRAMEWORK_DISTRIBUTIONS = ("torch", "triton", "hypothesis", "pytest", "pytest-xdist", "numpy")
#: Directory names of run-time code generators' caches (inductor's ``torchinductor_<user>``,
#: FlagGems' ``code_cache``, Triton's caches): their files are generated, not source.
GENERATED_DIRS = ("code_cache", ".triton", "triton-cache", ".cache", "__pycache__")
#: Top-level names a carelessly packaged distribution installs besides its own package:
#: never taken for the framework (a user's ``tests/`` must stay the user's).
GENERIC_NAMES = frozenset({"tests", "test", "testing", "examples", "docs", "benchmarks",
                           "scripts", "tools", "src"})
#: Directory names that hold installed third-party packages, never the standard library.
SITE_DIR_NAMES = ("site-packages", "dist-packages")


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@cache
def framework_modules() -> frozenset[str]:
    """Top-level module names of the framework: FOREIGN_PACKAGES and the modules of every
    distribution FRAMEWORK_DISTRIBUTIONS require, transitively (requirements under an
    environment marker, extras mostly, are left out)."""
    names = set(FOREIGN_PACKAGES)
    try:
        import importlib.metadata as metadata

        modules: dict[str, set[str]] = {}
        for module, dists in metadata.packages_distributions().items():
            for dist in dists:
                modules.setdefault(_normalized(dist), set()).add(module)
        todo = [_normalized(d) for d in FRAMEWORK_DISTRIBUTIONS]
        seen: set[str] = set()
        while todo:
            dist = todo.pop()
            if dist in seen:
                continue
            seen.add(dist)
            names |= modules.get(dist, set())
            try:
                requires = metadata.requires(dist) or []
            except metadata.PackageNotFoundError:
                continue
            for requirement in requires:
                match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
                if match and ";" not in requirement:
                    todo.append(_normalized(match.group(1)))
    except Exception:  # broken metadata: the named packages still count
        pass
    return frozenset(names - GENERIC_NAMES)


def _dir(path: str) -> str:
    return path.rstrip(os.sep) + os.sep


@cache
def _stdlib_roots() -> tuple[str, ...]:
    """The standard library's directories (with a trailing separator)."""
    paths = sysconfig.get_paths()
    return tuple(sorted({_dir(str(Path(paths[key]).resolve()))
                         for key in ("stdlib", "platstdlib") if paths.get(key)}))


@cache
def _site_roots() -> tuple[str, ...]:
    """Where third-party packages are installed (with a trailing separator)."""
    paths = sysconfig.get_paths()
    roots = {paths.get("purelib", ""), paths.get("platlib", "")}
    with contextlib.suppress(AttributeError):  # a virtualenv's old site module
        roots |= set(site.getsitepackages()) | {site.getusersitepackages()}
    return tuple(sorted({_dir(str(Path(r).resolve())) for r in roots if r}))


@cache
def _harness_roots() -> tuple[str, ...]:
    """diagfuzz's own directories, wherever its parts are mapped (with a separator)."""
    roots = {str(Path(__file__).resolve().parent.parent)}  # diagfuzz/
    for name in ("diagfuzz.oracles", "diagfuzz.strategies"):
        module = sys.modules.get(name)
        path = getattr(module, "__file__", None)
        if path:
            roots.add(str(Path(path).resolve().parent))
    return tuple(sorted(_dir(r) for r in roots))


def _framework_roots() -> tuple[str, ...]:
    """The directories of the framework's packages imported so far (a source build of
    torch is foreign outside site-packages too)."""
    roots = set()
    for name in framework_modules():
        module = sys.modules.get(name)
        path = getattr(module, "__file__", None)
        if not path:
            continue
        resolved = Path(path).resolve()
        # A package is its directory; a single-file module (typing_extensions.py) is that
        # file alone: its directory is site-packages, which holds the impl's code too.
        roots.add(_dir(str(resolved.parent)) if resolved.stem == "__init__"
                  else str(resolved))
    return tuple(sorted(roots))


def _generated(path: Path) -> bool:
    return any(part in GENERATED_DIRS or part.startswith("torchinductor")
               for part in path.parts[:-1])


def _in_site_dir(path: Path) -> bool:
    return str(path).startswith(_site_roots()) or any(
        part in SITE_DIR_NAMES for part in path.parts[:-1])


def _top_module(path: Path, bases: tuple[Path, ...]) -> str:
    """The top-level module ``path`` belongs to under the innermost base (a ``sys.path``
    entry or a site directory) holding it; '' under none."""
    best: tuple[str, ...] | None = None
    for base in (*bases, *(Path(r) for r in _site_roots())):
        try:
            parts = path.relative_to(base).parts
        except ValueError:
            continue
        if best is None or len(parts) < len(best):
            best = parts
    if not best:
        return ""
    return best[0].removesuffix(".py") if len(best) == 1 else best[0]


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
    """Where source is imported from: the cwd first, then ``sys.path``."""
    return _resolved_bases(os.getcwd(), tuple(sys.path))


@lru_cache(maxsize=4096)
def _foreign(filename: str, bases: tuple[Path, ...]) -> bool:
    if filename.startswith("<"):  # <frozen importlib._bootstrap>, <string> and the like
        return True
    try:
        path = Path(filename).resolve()
    except OSError:
        return True
    text = str(path)
    if _generated(path) or text.startswith(_harness_roots()):
        return True
    if _top_module(path, bases) in framework_modules() or text.startswith(_framework_roots()):
        return True
    return text.startswith(_stdlib_roots()) and not _in_site_dir(path)


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
    bases = _bases()  # once for every frame: it asks the OS for the current directory
    own = [f for f in frames if not _foreign(f[0], bases)]
    filename, line, function = (own or frames)[-1]
    where = f"{_display(filename, bases)}:{line} in {function}"
    return where if own else f"{where} (no impl frame)"
