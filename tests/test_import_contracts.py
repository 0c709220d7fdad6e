"""The rooms' import contracts (pyproject.toml's [tool.importlinter], docs/internals.md's
"Layers") hold, and lint-imports really fails when a module imports across them."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("importlinter") is None,
    reason="import-linter is not installed (tools/dev installs it with the dev extra; an "
           "offline machine that already has every dependency skips it)")

#: The contracts' names (pyproject.toml), as lint-imports reports them.
LAYERS = "Each room imports only the rooms below it"
ACYCLIC = "No circles between the rooms, nor between the modules of one package"
TORCH_ONLY = "The core and the specs import torch, never Triton, Hypothesis or pytest"
HYPOTHESIS = ("Hypothesis' private API is reached only through the draws, the shard engine "
              "and replay")


@pytest.fixture
def tool(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """tools/lint_imports.py as a module (its tree builder and its lint-imports run)."""
    monkeypatch.syspath_prepend(str(REPO / "tools"))
    import lint_imports

    return lint_imports


def planted(tool: ModuleType, root: Path, room: str, files: dict[str, str]) -> Path:
    """The installed package's tree under ``root`` with ``files`` (path: source) added to
    ``room`` (the package itself for room ''): ``room`` becomes a directory of links to its
    files, so the repository is untouched."""
    link = tool.build_tree(root) / room
    if room:
        target = link.resolve()
        link.unlink()
        link.mkdir()
        for entry in target.iterdir():
            if entry.name != "__pycache__":
                (link / entry.name).symlink_to(entry)
    for module, source in files.items():
        path = link / module
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source, encoding="utf-8")
    return root


def test_the_import_contracts_are_kept() -> None:
    proc = subprocess.run([sys.executable, str(REPO / "tools" / "lint_imports.py"), "--no-logo"],
                          capture_output=True, text=True, check=False, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert f"{LAYERS} KEPT" in out and " kept, 0 broken." in out, out


def test_the_tree_holds_the_rooms_installed_from_the_repository_root(tool: ModuleType,
                                                                    tmp_path: Path) -> None:
    package = tool.build_tree(tmp_path)
    for room in ("ops", "oracles", "strategies", "core", "specs", "harness", "gate"):
        assert (package / room / "__init__.py").is_file(), room


def test_a_core_module_that_imports_a_spec_breaks_the_layers(tool: ModuleType,
                                                             tmp_path: Path) -> None:
    root = planted(tool, tmp_path, "core", {
        "planted.py": "from diagfuzz.specs import spec_of\n\nSPEC = spec_of('diagonal')\n"})
    proc = tool.lint(root, "--no-logo")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert f"{LAYERS} BROKEN" in out, out
    assert "diagfuzz.core is not allowed to import diagfuzz.specs" in out, out
    assert "diagfuzz.core.planted -> diagfuzz.specs (l.1)" in out, out


@pytest.mark.parametrize(("room", "files", "broken", "found"), [
    # An import inside a function, or under TYPE_CHECKING, is an import all the same.
    ("core", {"planted.py": "def later():\n    from diagfuzz.specs import SPECS\n"}, LAYERS,
     "diagfuzz.core.planted -> diagfuzz.specs (l.2)"),
    ("harness", {"planted.py": "from typing import TYPE_CHECKING\n"
                               "if TYPE_CHECKING:\n    from diagfuzz.gate import cli\n"},
     LAYERS, "diagfuzz.harness.planted -> diagfuzz.gate.cli (l.3)"),
    # The oracles and the strategies never reach the kernels, nor each other.
    ("oracles", {"planted.py": "import diagfuzz.ops\n"}, LAYERS,
     "diagfuzz.oracles is not allowed to import diagfuzz.ops"),
    ("strategies", {"_planted.py": "from diagfuzz.oracles import check\n"}, LAYERS,
     "diagfuzz.strategies is not allowed to import diagfuzz.oracles"),
    # A room that is in no layer.
    ("", {"lab/__init__.py": ""}, LAYERS, "diagfuzz.lab"),
    # Two modules of one room that import each other.
    ("harness", {"_one.py": "from diagfuzz.harness import _two\n",
                 "_two.py": "from diagfuzz.harness import _one\n"}, ACYCLIC,
     "No cycles are allowed in diagfuzz.harness."),
    ("specs", {"planted.py": "import triton\n"}, TORCH_ONLY,
     "diagfuzz.specs.planted -> triton (l.1)"),
    ("ops", {"planted.py": "from diagfuzz.adapters.hypothesis import fast\n"}, HYPOTHESIS,
     "diagfuzz.ops.planted -> diagfuzz.adapters.hypothesis"),
])
def test_a_module_that_imports_across_a_contract_breaks_it(
        tool: ModuleType, tmp_path: Path, room: str, files: dict[str, str], broken: str,
        found: str) -> None:
    proc = tool.lint(planted(tool, tmp_path, room, files), "--no-logo")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert f"{broken} BROKEN" in out, out
    assert found in out, out
