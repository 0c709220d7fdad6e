"""A single-file framework module (``typing_extensions.py``) beside a library in one
site-packages directory makes that file foreign, not the directory: the library's frames
stay the impl's own (with its directory foreign, a non-editable install lost its raise
sites to the adapter's line)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from diagfuzz.core import origin


def test_a_single_file_framework_module_leaves_its_directory_to_the_library(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "lib" / "python3.11" / "site-packages"
    (site / "mylib").mkdir(parents=True)
    library = site / "mylib" / "__init__.py"
    library.write_text("def f():\n    raise ValueError('mine')\n")
    single = site / "frameworkmod_single.py"
    single.write_text("X = 1\n")
    spec = importlib.util.spec_from_file_location("frameworkmod_single", single)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setitem(sys.modules, "frameworkmod_single", module)
    monkeypatch.setattr(origin, "framework_modules",
                        lambda: frozenset({"frameworkmod_single", "torch"}))
    monkeypatch.syspath_prepend(str(site))
    assert origin.is_foreign(str(single))
    assert not origin.is_foreign(str(library))
