"""Raise sites in a library however it is installed: site-packages of a virtual environment,
a ``pip install --target`` directory, a ``.pth`` path, an editable install's finder, the
current directory. Each layout is built in a temporary directory (a real ``venv``, made
without pip in a few milliseconds) and run in a fresh interpreter, where a library with two
``assert`` lines must give two findings, keyed on the library's own lines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

from diagfuzz.core.case import Case, Layout, Values
from diagfuzz.core.verdict import Verdict
from diagfuzz.harness.findings import merge_findings

LIBRARY = textwrap.dedent("""\
    def diag_embed(flag):
        assert flag != 1, "first check"
        assert flag != 2, "second check"
""")
ADAPTER = textwrap.dedent("""\
    import json
    from diagfuzz.core.origin import raise_origin
    from tinylib import diag_embed

    origins = []
    for flag in (1, 2):
        try:
            diag_embed(flag)
        except AssertionError as exc:
            origins.append(raise_origin(exc))
    print(json.dumps(origins))
""")
FINDER = textwrap.dedent("""\
    import importlib.machinery
    import sys

    SOURCE = {source!r}

    class Finder:
        @staticmethod
        def find_spec(name, path=None, target=None):
            if name != "tinylib":
                return None
            return importlib.machinery.PathFinder.find_spec(name, [SOURCE])

    def install():
        sys.meta_path.append(Finder)
""")


def _library(where: Path) -> Path:
    package = where / "tinylib"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(LIBRARY)
    return package


def _venv(tmp_path: Path) -> tuple[Path, Path]:
    """A virtual environment whose own site-packages comes first and that sees this
    environment's packages (torch, diagfuzz) through a ``.pth`` line."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site_packages = Path(subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True).stdout.strip())
    ours = sysconfig.get_paths()["purelib"]
    (site_packages / "zz_outer_env.pth").write_text(
        f"import site; site.addsitedir({ours!r})\n")
    return python, site_packages


def _origins(python: Path, cwd: Path, pythonpath: str = "") -> list[str]:
    cwd.mkdir(exist_ok=True)
    (cwd / "adapter.py").write_text(ADAPTER)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    done = subprocess.run([str(python), "adapter.py"], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout))


def _findings(origins: list[str]) -> list[str]:
    case = Case("diag_embed", (3,), 0, -2, -1, "float32", Layout.contiguous((3,)),
                Values(0, "normal"))
    found = [Verdict("error-parity", "error-parity", "", case,
                     {"actual": {"type": "AssertionError", "origin": o}}) for o in origins]
    from diagfuzz.harness.findings import Finding

    return [f.signature.origin for f in merge_findings([Finding.of(v) for v in found])]


def _how_installed(tmp_path: Path, how: str) -> list[str]:
    python, site_packages = _venv(tmp_path)
    work = tmp_path / "work"
    if how == "site-packages":
        _library(site_packages)
        return _origins(python, work)
    if how == "target":
        _library(tmp_path / "target")
        return _origins(python, work, pythonpath=str(tmp_path / "target"))
    if how == "pth":
        _library(tmp_path / "elsewhere")
        (site_packages / "tinylib_path.pth").write_text(f"{tmp_path / 'elsewhere'}\n")
        return _origins(python, work)
    if how == "editable":
        _library(tmp_path / "src")
        (site_packages / "__editable___tinylib_finder.py").write_text(
            FINDER.format(source=str(tmp_path / "src")))
        (site_packages / "__editable__.tinylib.pth").write_text(
            "import __editable___tinylib_finder; __editable___tinylib_finder.install()\n")
        return _origins(python, work)
    assert how == "cwd"
    _library(work)
    return _origins(python, work)


@pytest.mark.parametrize("how", ["site-packages", "target", "pth", "editable", "cwd"])
def test_two_asserts_of_an_installed_library_are_two_findings_at_its_lines(
        tmp_path: Path, how: str) -> None:
    origins = _findings(_how_installed(tmp_path, how))
    assert len(origins) == 2, origins
    first, second = origins
    assert first.endswith("tinylib/__init__.py:2 in diag_embed"), origins
    assert second.endswith("tinylib/__init__.py:3 in diag_embed"), origins
    assert "(no impl frame)" not in first + second


def test_the_standard_library_and_the_framework_stay_foreign() -> None:
    import json as stdlib_module

    import hypothesis
    import torch

    from diagfuzz.core import origin

    for module in (stdlib_module, torch, hypothesis, origin):
        assert module.__file__ is not None
        assert origin.is_foreign(module.__file__), module.__name__
    # torch's requirements (sympy, filelock ...) are framework wherever installed.
    assert {"sympy", "filelock", "jinja2"} <= origin.framework_modules()
