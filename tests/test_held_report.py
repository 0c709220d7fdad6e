"""A stopped fuzz run's held report (the stop bound's writer, ``Reporter._write_held``) is
written within its bound on a loaded machine: it imports the findings' modules (torch,
seconds on a loaded machine) only where it has findings to convert, and waits for them a
bounded time, writing the progress files' findings as the workers wrote them otherwise.
Each check runs in a fresh interpreter, where torch is not imported yet."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from diagfuzz.harness import progress
from tests.test_plugin_units import _case

WRITE = textwrap.dedent("""
    import json, sys, threading, time
    from pathlib import Path
    from diagfuzz.harness import controller
    from diagfuzz.harness.sharding import RunPlan

    run, report, block_import = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] == "1"
    if block_import:  # the findings' import still running when the writer starts
        controller._importing = threading.Thread(target=time.sleep, args=(30,), daemon=True)
        controller._importing.start()
    plan = RunPlan(1, "m:a", "ci", 1, 10, 64, "inprocess", None, str(run), 1)
    reporter = controller.Reporter(None, plan, report)
    start = time.monotonic()
    code = reporter._write_held()
    print(json.dumps({"code": code, "seconds": time.monotonic() - start,
                      "torch": "torch" in sys.modules}))
""")


def _write_held(tmp_path: Path, findings: list[dict], block_import: bool) -> dict:
    run = tmp_path / "run"
    (run / "gw0").mkdir(parents=True)
    (run / "gw0" / progress.FILE_NAME).write_text(json.dumps(
        {"cases": 12, "failing": len(findings), "unsupported": 0,
         "signatures": [f["describe"] for f in findings], "findings": findings}))
    out = subprocess.run([sys.executable, "-c", WRITE, str(run), str(tmp_path / "r.json"),
                          "1" if block_import else "0"],
                         capture_output=True, text=True, timeout=120, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _a_finding() -> dict:
    from diagfuzz.core.verdict import Verdict
    from diagfuzz.harness.findings import Finding

    verdict = Verdict("mismatch", "bitwise:aten", "bits differ", _case())
    return Finding.of(verdict, "test_diagonal[0]").to_dict()


def test_a_held_report_without_findings_imports_no_torch(tmp_path: Path) -> None:
    result = _write_held(tmp_path, [], block_import=False)
    assert result["code"] == 7 and not result["torch"]
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["stopped"] == "SIGINT" and data["findings"] == [] and data["cases_seen"] == 12


def test_a_held_report_whose_import_is_not_done_keeps_the_findings_as_written(
        tmp_path: Path) -> None:
    finding = _a_finding()
    result = _write_held(tmp_path, [finding], block_import=True)
    assert result["code"] == 1 and result["seconds"] < 1.9 and not result["torch"]
    assert json.loads((tmp_path / "r.json").read_text())["findings"] == [finding]


def test_a_held_report_converts_and_merges_findings_once_imported(tmp_path: Path) -> None:
    finding = _a_finding()
    result = _write_held(tmp_path, [finding, finding], block_import=False)
    assert result["code"] == 1 and result["torch"]
    written = json.loads((tmp_path / "r.json").read_text())["findings"]
    assert [f["signature"] for f in written] == [finding["signature"]]
