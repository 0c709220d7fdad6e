"""Type-check the diagfuzz package with mypy: ``python tools/typecheck.py``.

diagfuzz's packages live in four directories (``diagfuzz/``, and ``ops/``, ``oracles/`` and
``strategies/``, which install as ``diagfuzz.ops`` ...), a mapping mypy cannot follow
through an editable install. So this builds the package as mypy expects it, a tree of
symbolic links in a temporary directory, and checks that; errors name the files as they
are in the repository. Exit status: mypy's (0 clean).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: Import name under diagfuzz -> directory of the repository.
ROOMS = {"ops": "ops", "oracles": "oracles", "strategies": "strategies"}


def build_tree(root: Path) -> Path:
    """``root/diagfuzz``: the package's modules and subpackages as links to the repo."""
    package = root / "diagfuzz"
    package.mkdir()
    for entry in (REPO / "diagfuzz").iterdir():
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry)
    for name, directory in ROOMS.items():
        (package / name).symlink_to(REPO / directory)
    return package


def main(argv: list[str] | None = None) -> int:
    with tempfile.TemporaryDirectory(prefix="diagfuzz-typecheck-") as tmp:
        build_tree(Path(tmp))
        command = [sys.executable, "-m", "mypy", "--config-file", str(REPO / "pyproject.toml"),
                   "--cache-dir", str(REPO / ".mypy_cache"), "-p", "diagfuzz",
                   *(argv if argv is not None else sys.argv[1:])]
        env = {**os.environ, "MYPYPATH": tmp}
        proc = subprocess.run(command, cwd=tmp, env=env, capture_output=True, text=True,
                              check=False)
        out = (proc.stdout + proc.stderr).replace(f"{tmp}/", "")
        for name, directory in ROOMS.items():
            out = out.replace(f"diagfuzz/{name}/", f"{directory}/")
        print(out, end="")
        return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
