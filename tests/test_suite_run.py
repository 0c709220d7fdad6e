"""The fuzz suite end to end, in pytest subprocesses with a tiny budget.

What a user of ``pytest -p diagfuzz --pyargs diagfuzz.suite`` relies on: counts aggregated
over xdist workers, a failing impl reported with its shrunk Case (the same on a rerun with
the same seed), a dead worker attributed to its Case, and a bad ``--impl`` being a usage
error. Each run takes seconds.
"""

from __future__ import annotations

import json
import math
import os
import pstats
import subprocess
import sys
from pathlib import Path
from typing import Any

from diagfuzz.core.case import Case
from diagfuzz.execution import journal, timeline
from diagfuzz.impl import load_impl
from diagfuzz.specs import SPECS
from tests.worker_exit import EXITS_ENV

REPO = Path(__file__).resolve().parents[1]
SMALL = ["--hypothesis-profile", "ci", "--diagfuzz-max-elements", "256"]


def fuzz(tmp_path: Path, *args: str, plugin: bool = True, root: str = "root",
         one_executor: bool = True) -> tuple[int, str, dict[str, Any]]:
    """Run the suite from the repository root (so ``tests.faulty`` imports); parse the report.

    ``root`` (under tmp_path) holds the run directories, the example databases among them.
    ``one_executor``: unless ``args`` say otherwise, one executor a worker on every machine
    (the default depends on the CPUs: 1 on CI's 2, 2 on a GPU machine's 16).
    """
    if one_executor and plugin and not any(a.startswith("--diagfuzz-executors") for a in args):
        args = (*args, "--diagfuzz-executors=1")
    report = tmp_path / "report.json"
    report.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_XDIST", "PYTEST_ADDOPTS", "TRITON_CACHE_DIR"))}
    command = [sys.executable, "-m", "pytest", *(["-p", "diagfuzz"] if plugin else []),
               "--pyargs", "diagfuzz.suite", "-p", "no:cacheprovider",
               # PATH options as --opt=PATH: pytest picks its rootdir before plugin options
               # are known, so a separate existing PATH would be taken for a test path.
               f"--diagfuzz-root={tmp_path / root}", f"--diagfuzz-report={report}",
               *args]
    proc = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=600, check=False)
    data = json.loads(report.read_text()) if report.exists() else {}
    return proc.returncode, proc.stdout + proc.stderr, data


def test_two_workers_aggregate_every_case(tmp_path: Path, monkeypatch) -> None:
    # (With DIAGFUZZ_PROFILE, as bench_throughput.py suite --profile sets it: it must not
    # change a verdict or a count, and each worker and executor writes its profile.)
    # (And with DIAGFUZZ_TIMELINE, as benchmarks/startup.py sets it: each worker launches
    # its executors at configure, before it collects, and closes them at the end.)
    monkeypatch.setenv("DIAGFUZZ_PROFILE", str(tmp_path / "profiles"))
    monkeypatch.setenv("DIAGFUZZ_TIMELINE", str(tmp_path / "timeline"))
    # (And with tests.worker_exit: a finished worker ends without the interpreter's
    # finalisation, its atexit functions run, those registered before diagfuzz's too.)
    monkeypatch.setenv(EXITS_ENV, str(tmp_path / "exits"))
    code, out, report = fuzz(tmp_path, "-n", "2", "--diagfuzz-seed", "5",
                             "--diagfuzz-budget", "60", *SMALL, "-p", "tests.worker_exit")
    assert code == 0, out
    assert {p.name: p.read_text() for p in (tmp_path / "exits").iterdir()} == {
        "gw0": "atexit\n", "gw1": "atexit\n"}
    marks = timeline.read(tmp_path / "timeline")
    for worker in ("gw0", "gw1"):
        events = [m["event"] for m in marks if m["role"] == worker]
        assert events.index("executors_launched") < events.index("collected"), events
        assert events[-1] == "runner_closed", events
    executors = {m["pid"] for m in marks if m["role"] == "executor"}
    assert len(executors) >= 2  # one a worker (replacements may add more)
    assert all(any(m["pid"] == pid and m["event"] == "ready" for m in marks)
               for pid in executors)
    # The worker's profile holds its shard items (``fuzz``); an executor's, its Case checks:
    # functions of the oracles package (Python 3.12's cProfile on the H200 recorded the
    # checks' callees but no entry named ``check`` itself).
    for role, wanted in (("worker", lambda file, name: name == "fuzz"),
                         ("executor", lambda file, name: f"{os.sep}oracles{os.sep}" in file)):
        files = sorted((tmp_path / "profiles").glob(f"{role}-*.pstats"))
        assert len(files) >= 2, (role, files)  # a process each (an executor may restart)
        stats = pstats.Stats(*map(str, files)).stats  # type: ignore[attr-defined]
        assert any(wanted(file, name) for (file, _, name) in stats), (
            role, [(f.name, f.stat().st_size) for f in files])
    assert report["seed"] == 5 and report["impl"] == "diagfuzz.impl:triton_aten"
    assert report["isolation"] == "process" and report["workers"] == 2
    assert report["findings"] == [] and report["diagfuzz_report"] == 2
    counts = report["counts"]
    assert set(counts) == {*SPECS, "invalid"}
    assert all(group["cases"] > 0 for group in counts.values())
    assert report["cases"] == sum(group["cases"] for group in counts.values())
    # Every Case a worker journaled is in the controller's total, from both workers.
    journaled = {
        w: sum(r["type"] == "case" for r in journal.read(
            journal.journal_path(Path(report["run_dir"]) / "journal", w)))
        for w in ("gw0", "gw1")}
    assert min(journaled.values()) > 0, journaled
    assert sum(journaled.values()) == report["cases"]
    # The pace counts each worker's Cases inside its shards, and they are the journal's.
    pace = report["pace"]
    assert {w: v["cases"] for w, v in pace["workers"].items()} == journaled
    assert all(v["shard_s"] > 0 and v["cases_per_s"] > 0 for v in pace["workers"].values())
    assert 0 <= pace["outside_shards_s"] < report["duration_s"]
    assert "Cases/s per worker inside shards (2 worker id(s))" in out
    assert "diagfuzz: seed 5 (rerun: --diagfuzz-seed 5)" in out
    assert f"diagfuzz: 0 findings (0 failing Cases of {report['cases']};" in out


def test_wrong_impl_fails_with_its_shrunk_case_the_same_on_every_run(tmp_path: Path) -> None:
    from diagfuzz import oracles

    impl = "tests.faulty.wrong:impl"  # flips a result bit when offset > 0
    # float32 alone: every dtype group is a symptom each shard shrinks, twice here (the
    # first run and the fresh one); one dtype still gives two symptoms in one shard
    # (values, nan-payload), each op's in both shards, and halves the runs (CPU-s 31 -> 12).
    args = ("--impl", impl, "--diagfuzz-isolation", "inprocess", "--diagfuzz-seed", "4",
            "--diagfuzz-budget", "300", "--diagfuzz-dtypes=float32", *SMALL)
    code, out, report = fuzz(tmp_path, *args)
    assert code == 1, out
    findings = report["findings"]
    assert {t.split("[")[0] for f in findings for t in f["test_ids"]} == {
        "diagfuzz/suite.py::test_diagonal", "diagfuzz/suite.py::test_diagonal_backward"}, out
    assert {f["signature"]["op"] for f in findings} == {"diagonal", "diagonal_backward"}
    for finding in findings:
        assert finding["kind"] == "mismatch" and finding["shrunk"], finding
        case = Case.from_json(finding["case"])
        assert case.offset > 0 and not case.invalid
        # Shrunk to a handful of elements (tests/test_strategies_shrink.py checks shrink
        # targets exactly; a signature's shrinking stops after MAX_SHRINK_CHECKS).
        assert math.prod(case.sizes) <= 8, case
        assert oracles.check(case, load_impl(impl), "cpu").kind == "mismatch"
        # Its reproducer is written beside the report, and fails while the bug is there.
        script = Path(finding["reproducer"])
        assert script.parent == tmp_path / "report-repro", script
        assert f"repro    python {script}" in out
    assert sum(f["count"] for f in findings) == report["failing_cases"] > len(findings)
    # The per-shard lines count findings before they merge by signature; the title says so.
    shard_counts = [int(line.split(" finding(s) in ")[0].rsplit(" ", 1)[-1])
                    for line in out.splitlines() if line.startswith("FAILED ")
                    and " finding(s) in " in line]
    assert sum(shard_counts) > len(findings), out  # each op's bug, found in several shards
    assert f"; {sum(shard_counts)} shard findings merged by signature; seed 4" in out, out
    # Every explored Case and every shrink check is in the journal; the report counts the
    # explored ones, and each failing one once.
    journaled = sum(r["type"] == "case" for r in journal.read(journal.journal_path(
        Path(report["run_dir"]) / "journal", "main")))
    assert journaled == report["cases"] + report["shrink_checks"]
    assert report["counts"]["diagonal"]["failures"] >= 1
    assert f"diagfuzz: {len(findings)} finding" in out and "[1/" in out
    # Same seed, fresh example database: the same Cases and the same shrunk findings.
    again = fuzz(tmp_path, *args, root="fresh")[2]
    assert again["counts"] == report["counts"]
    assert [f["case"] for f in again["findings"]] == [f["case"] for f in findings]
    # Same seed, same database: the shrunk examples replay first; the findings agree.
    replay = fuzz(tmp_path, *args)[2]
    assert [f["case"] for f in replay["findings"]] == [f["case"] for f in findings]


def test_dead_worker_is_attributed_to_its_case(tmp_path: Path) -> None:
    # In-process isolation: the abort takes the whole xdist worker down. One shard only.
    code, out, report = fuzz(tmp_path, "-n", "2", "--impl", "tests.faulty.abort:impl",
                             "--diagfuzz-isolation", "inprocess", "--diagfuzz-seed", "4",
                             "--diagfuzz-shards", "1", "--diagfuzz-budget", "300",
                             "-k", "test_diagonal and not backward", *SMALL)
    assert code == 1, out
    crashes = [f for f in report["findings"] if f["kind"] == "crash"]
    assert crashes, out
    (crash,) = crashes
    assert crash["test_ids"] == ["diagfuzz/suite.py::test_diagonal[shard0]"]
    assert Case.from_json(crash["case"]).offset == 1  # abort.py dies on offset == 1
    assert crash["verdict"]["kind"] == "crash"
    assert "died running this Case" in out


def test_unusable_impl_is_a_usage_error(tmp_path: Path) -> None:
    code, out, report = fuzz(tmp_path, "--impl", "no_such_module_xyz:impl")
    assert code == 4, out  # pytest's usage-error exit code, not a test failure
    assert "cannot import 'no_such_module_xyz'" in out and report == {}


def test_suite_without_the_plugin_says_how_to_run_it(tmp_path: Path) -> None:
    code, out, _ = fuzz(tmp_path, plugin=False)
    assert code != 0
    assert "pytest -p diagfuzz --pyargs diagfuzz.suite" in out, out


def test_an_oracle_error_stops_its_shard_and_no_other(tmp_path: Path) -> None:
    # The oracle raises on some Cases (offset 1) while others are in flight in the worker's
    # pipelined runner. Each such shard ends with a harness finding; the Cases it left in
    # flight must not reach the worker's next shard (a shard that met another's verdict
    # failed with a KeyError on the ticket, seen on an H200).
    code, out, report = fuzz(tmp_path, "--impl", "tests.faulty.breaks_oracle:impl",
                             "--diagfuzz-ops=diagonal", "--diagfuzz-streams=valid",
                             "--diagfuzz-shards", "6", "--diagfuzz-seed", "11",
                             "--diagfuzz-budget", "300", *SMALL)
    assert code == 1, out
    assert "KeyError" not in out, out
    findings = report["findings"]
    assert findings and all("breaks_oracle" in json.dumps(f) for f in findings), out
    assert all(f["case"]["offset"] == 1 for f in findings if f.get("case")), findings
