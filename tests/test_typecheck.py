"""The package type-checks clean with mypy (``tools/typecheck.py``), as CI runs it."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None,
                    reason="mypy is not installed (tools/dev installs it with the dev extra; "
                           "an offline machine that already has every dependency skips it)")
def test_mypy_is_clean() -> None:
    proc = subprocess.run([sys.executable, str(REPO / "tools" / "typecheck.py")],
                          capture_output=True, text=True, check=False, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Success: no issues found" in proc.stdout
