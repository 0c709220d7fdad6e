"""``--diagfuzz-executors 2`` end to end: the pipelined suite finds and shrinks as with one.

Same seed, same families: verdicts are released in submission order, so phase 1 stops at
the family one executor would stop at, and phase 2 shrinks it to the same Case.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from diagfuzz.harness import workers
from tests.test_pipeline_suite import (
    ONE_SHARD,
    WRONG_ONE_SHARD,
    journal_records,
    pipelined_wrong_run,
)
from tests.test_suite_run import SMALL, fuzz


def test_two_executors_find_and_shrink_like_one(tmp_path: Path,
                                                tmp_path_factory: pytest.TempPathFactory
                                                ) -> None:
    code, out, two = fuzz(tmp_path, *WRONG_ONE_SHARD, "--diagfuzz-executors=2")
    assert code == 1, out
    assert "pipelined to 2 executors" in out
    # One executor: the run test_pipeline_suite.py compares with the synchronous mode.
    code, out, one = pipelined_wrong_run(tmp_path_factory)
    assert code == 1, out
    assert two["findings"] and len(two["findings"]) == len(one["findings"])
    assert [f["case"] for f in two["findings"]] == [f["case"] for f in one["findings"]]
    assert two["counts"] == one["counts"]
    failure = two["findings"][0]
    assert failure["kind"] == "mismatch"
    assert two["executors"] == 2 and one["executors"] == 1
    records = journal_records(two)
    cases = {r["seq"]: r["case"] for r in records if r["type"] == "case"}
    verdicts = {r["seq"]: r for r in records if r["type"] == "verdict"}
    assert set(verdicts) == set(cases)
    assert two["cases"] + two["shrink_checks"] == len(cases)
    for seq, record in verdicts.items():  # every verdict is its own Case's
        assert record["verdict"]["case"] == cases[seq]
    worker = Path(two["run_dir"]) / "main"
    assert {p.name for p in worker.glob("executor*.log")} == {"executor-0.log",
                                                              "executor-1.log"}


@pytest.mark.parametrize("cpus", ["this machine's", "16 (faked)"])
def test_executors_default_to_what_the_cpus_allow(tmp_path: Path, cpus: str) -> None:
    """Without --diagfuzz-executors a worker feeds as many executors as leave every process
    a CPU, up to FANOUT_EXECUTORS (3 on a 16-CPU GPU machine), else one (CI's 2 CPUs)."""
    fake = cpus.startswith("16")
    code, out, report = fuzz(tmp_path, "--diagfuzz-seed", "3", "--diagfuzz-budget", "60",
                             *ONE_SHARD, *SMALL, *(["-p", "tests.fake_cpus"] if fake else []),
                             one_executor=False)
    assert code == 0, out
    expected = workers.auto_executors(1, 16 if fake else workers.cpu_count())
    assert report["executors"] == expected == (3 if fake else expected)
    assert (f"pipelined to {expected} executors" in out) == (expected > 1), out
