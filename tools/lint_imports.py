"""Check the import contracts of pyproject.toml: ``python tools/lint_imports.py``.

The contracts ([tool.importlinter]) declare the rooms' layering (docs/internals.md, "Layers").
import-linter reads a package from its directory, and diagfuzz's packages live in four
(``diagfuzz/``, and ``ops/``, ``oracles/`` and ``strategies/``, which install as
``diagfuzz.ops`` ...). So this runs ``lint-imports`` on the package as it installs: the tree of
symbolic links tools/typecheck.py builds, in a temporary directory. Arguments are passed to
lint-imports (``--contract layers``, ``--verbose``...). Exit status: lint-imports' (0: every
contract kept, 1: one is broken).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from typecheck import REPO, build_tree

#: lint-imports' command line, run by this interpreter (its venv's import-linter).
LINT_IMPORTS = [sys.executable, "-c", "from importlinter.cli import lint_imports_command; "
                "lint_imports_command(prog_name='lint-imports')"]


def lint(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """lint-imports with pyproject.toml's contracts on the package under ``root`` (as
    ``build_tree`` makes it), without a cache."""
    command = [*LINT_IMPORTS, str(REPO / "pyproject.toml"), "--no-cache", *args]
    env = {**os.environ, "COLUMNS": "200"}  # one line per contract and per import
    return subprocess.run(command, cwd=root, env=env, capture_output=True, text=True,
                          check=False)


def main(argv: list[str] | None = None) -> int:
    with tempfile.TemporaryDirectory(prefix="diagfuzz-imports-") as tmp:
        build_tree(Path(tmp))
        proc = lint(Path(tmp), *(argv if argv is not None else sys.argv[1:]))
        print(proc.stdout + proc.stderr, end="")
        return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
