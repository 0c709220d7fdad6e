"""Write-ahead journal: a Case is on disk before it runs, so a dead process names its Case."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from diagfuzz.core import corpus
from diagfuzz.core.verdict import Verdict
from diagfuzz.execution.crash import attribute_crash
from diagfuzz.execution.journal import (
    Journal,
    JournaledRunner,
    header,
    journal_path,
    last_unfinished,
    read,
)
from diagfuzz.execution.runner import InProcessRunner
from tests.faulty.cases import square

ENV = {"torch": "t", "triton": "tr", "gpu": ""}  # skip version probing in unit tests


def test_case_is_durable_before_it_runs(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "gw0.jsonl", run_seed=42, worker_id="gw0", impl="m:a",
                      env=ENV)
    seq = journal.begin(square(1), "test_x[shard0]")
    # Another reader sees the Case now, before any verdict: what a crash leaves behind.
    assert last_unfinished(tmp_path / "gw0.jsonl") == (square(1), "test_x[shard0]")
    journal.end(seq, Verdict.passed(square(1)))
    assert last_unfinished(tmp_path / "gw0.jsonl") is None
    journal.close()
    records = read(tmp_path / "gw0.jsonl")
    assert [r["type"] for r in records] == ["header", "case", "verdict"]
    assert records[0]["run_seed"] == 42 and records[0]["impl"] == "m:a"
    with pytest.raises(ValueError, match="closed"):
        journal.begin(square(0))


def test_header_records_versions(tmp_path: Path) -> None:
    import torch
    import triton

    Journal(tmp_path / "main.jsonl", run_seed=1).close()
    head = header(tmp_path / "main.jsonl")
    assert head["torch"] == torch.__version__ and head["triton"] == triton.__version__
    assert "gpu" in head and head["worker"] == "main"


def test_only_the_latest_session_and_last_case_count(tmp_path: Path) -> None:
    path = tmp_path / "gw1.jsonl"
    with Journal(path, env=ENV) as first:
        first.begin(square(2), "old")  # died here in an earlier session
    with Journal(path, env=ENV) as second:
        seq = second.begin(square(0), "new")
        second.end(seq, Verdict.passed())
    assert last_unfinished(path) is None
    with path.open("a") as f:
        f.write('{"type": "case", "seq": 2, "test_id": "torn')  # died mid-write
    assert last_unfinished(path) is None
    assert last_unfinished(tmp_path / "absent.jsonl") is None


def test_journal_path_rejects_odd_worker_ids(tmp_path: Path) -> None:
    assert journal_path(tmp_path, "gw3") == tmp_path / "gw3.jsonl"
    with pytest.raises(ValueError, match="worker_id"):
        journal_path(tmp_path, "../gw3")


def test_journaled_runner_writes_case_then_verdict(tmp_path: Path) -> None:
    runner = JournaledRunner(InProcessRunner("diagfuzz.impl:aten", "cpu"),
                             Journal(tmp_path / "main.jsonl", env=ENV), "t1")
    assert runner.run(square(0)).ok
    runner.close()
    assert [r["type"] for r in read(tmp_path / "main.jsonl")] == ["header", "case", "verdict"]


def test_a_process_killed_by_its_case_is_attributed(tmp_path: Path) -> None:
    """In-process runner + abort: the process dies; the journal still names the Case."""
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(Path.cwd())!r})
        from diagfuzz.execution.journal import Journal, JournaledRunner, journal_path
        from diagfuzz.execution.runner import InProcessRunner
        from tests.faulty.cases import square
        journal = Journal(journal_path({str(tmp_path)!r}, "gw5"), run_seed=9,
                          worker_id="gw5", impl="tests.faulty.abort:impl")
        runner = JournaledRunner(InProcessRunner("tests.faulty.abort:impl", "cpu"), journal,
                                 "suite.py::test_diagonal[shard2]")
        for offset in (0, -1, 1, 0):
            runner.run(square(offset))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, check=False)
    assert proc.returncode == -6  # SIGABRT: the whole process is gone
    case, test_id = last_unfinished(journal_path(tmp_path, "gw5"))
    assert case == square(1) and test_id == "suite.py::test_diagonal[shard2]"
    text = attribute_crash(tmp_path, "gw5", "suite.py::test_diagonal[shard2]")
    assert "worker 'gw5' crashed" in text and case.describe() in text
    assert "run seed: 9" in text and "--impl tests.faulty.abort:impl" in text
    saved = tmp_path / "crashes" / corpus.file_name(case)
    assert f"diagfuzz repro {saved}" in text
    assert corpus.read_entry(saved).case == case
    assert json.loads(saved.read_text())["found"]["impl"] == "tests.faulty.abort:impl"


def test_crash_outside_a_case(tmp_path: Path) -> None:
    text = attribute_crash(tmp_path, "gw7", "suite.py::test_x")
    assert "no unfinished Case" in text and "gw7" in text
