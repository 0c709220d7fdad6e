"""Coverage over the combinations that apply to an impl: levels met only in Cases it
declares unsupported (a dtype family it does not list, ``.out`` without an ``.out``
method) leave the shares, named as not applicable, instead of counting as never reached."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from diagfuzz.core.covering import coverage
from diagfuzz.impl import aten
from diagfuzz.specs import factors, spec_of
from diagfuzz.strategies.covering import covering_rows, refused_levels

REPO = Path(__file__).resolve().parent.parent


class _Float32Only:
    """aten's diag (no ``.out``), declaring float32 alone."""

    uses_triton_registration = False
    dtypes = ("float32",)

    def diag(self, x: Any, diagonal: int = 0) -> Any:
        return aten.diag(x, diagonal)


impl = _Float32Only()


def test_refused_levels_are_those_never_judged() -> None:
    judged = [{"dtype": "float32", "call": "functional"}]
    refused = [{"dtype": "bool", "call": "out"}, {"dtype": "float32", "call": "out"}]
    assert refused_levels(judged, refused) == {"dtype": {"bool"}, "call": {"out"}}


def test_a_narrowed_model_counts_only_what_applies() -> None:
    model = factors.model_of(spec_of("diag_1d"))
    rows = [r for r in covering_rows("diag_1d") if r["call"] == "functional"]
    partial = coverage(model, rows, 2)
    assert partial.share < 1.0
    whole = coverage(model.narrowed({"call": {"out"}}), rows, 2)
    assert whole.share == 1.0 and whole.total < partial.total


def test_the_gate_names_what_does_not_apply_and_counts_the_rest(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    command = [sys.executable, "-m", "diagfuzz", "gate", "--impl",
               "tests.test_coverage_applicable:impl", "--ops", "diag_1d", "--no-suite",
               "--no-opinfo", "--no-sequences", "--no-compile", "--no-save", "--quiet", "--out",
               str(tmp_path / "gate"), "--report", str(report), "--summary",
               str(tmp_path / "summary.md")]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    data = json.loads(report.read_text())
    gone = data["combinations"]["not_applicable"]["diag_1d"]
    assert "out" in gone["call"] and "float32" not in gone["dtype"] and "bool" in gone["dtype"]
    assert data["combinations"]["all stages"]["diag_1d"]["3"]["share"] == 1.0
    assert "Not applicable" in (tmp_path / "summary.md").read_text()
