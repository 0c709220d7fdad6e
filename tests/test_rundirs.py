"""Run directories: a new run never deletes an earlier run's evidence before it finishes."""

from __future__ import annotations

import os
import time
from pathlib import Path

from diagfuzz.core import rundirs


def test_each_run_gets_a_fresh_directory_and_latest_follows(tmp_path: Path) -> None:
    first = rundirs.new_run_dir(tmp_path)
    second = rundirs.new_run_dir(tmp_path)
    assert first != second and first.is_dir() and second.is_dir()
    rundirs.point_latest(first)
    assert (tmp_path / "latest").resolve() == first.resolve()
    rundirs.point_latest(second)
    assert (tmp_path / "latest").resolve() == second.resolve()
    assert os.readlink(tmp_path / "latest") == second.name  # relative: the tree can move


def test_prune_keeps_the_newest_the_current_and_latest(tmp_path: Path) -> None:
    runs = []
    for i in range(6):
        run = tmp_path / f"run-{i}"
        run.mkdir()
        (run / "evidence.txt").write_text(str(i))
        stamp = time.time() - 100 + i
        os.utime(run, (stamp, stamp))
        runs.append(run)
    rundirs.point_latest(runs[0])  # the oldest is what latest names: it stays
    removed = rundirs.prune(tmp_path, keep_runs=2, protect=runs[1])
    assert sorted(p.name for p in removed) == ["run-2", "run-3"]
    assert sorted(p.name for p in tmp_path.glob("run-*")) == ["run-0", "run-1", "run-4",
                                                              "run-5"]
    assert rundirs.prune(tmp_path, keep_runs=10) == []


def test_a_fuzz_run_prunes_the_oldest_runs_only_after_its_report(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from diagfuzz.harness.controller import Reporter

    old = []
    for i in range(6):
        run = tmp_path / f"run-{i}"
        run.mkdir()
        os.utime(run, (time.time() - 100 + i,) * 2)
        old.append(run)
    current = tmp_path / "run-77"
    current.mkdir()
    Reporter._keep_runs(SimpleNamespace(plan=SimpleNamespace(run_dir=str(current))))
    assert (tmp_path / "latest").resolve() == current.resolve()
    assert sorted(p.name for p in tmp_path.glob("run-*")) == [
        "run-2", "run-3", "run-4", "run-5", "run-77"]


def test_the_first_shard_to_claim_a_cause_shrinks_it(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from diagfuzz.core.signature import Signature
    from diagfuzz.harness.claims import claim

    plan = SimpleNamespace(run_dir=str(tmp_path / "run-3"), run_id="a1")
    cause = Signature("diagonal", "mismatch", "bitwise", "signed-zero")
    assert claim(plan, cause) and not claim(plan, cause)
    assert claim(plan, Signature("diagonal", "mismatch", "bitwise", "values"))
    rerun = SimpleNamespace(run_dir=plan.run_dir, run_id="b2")  # same seed, another run
    assert claim(rerun, cause)


def test_a_second_run_with_the_same_seed_gets_a_directory_of_its_own(tmp_path: Path) -> None:
    from diagfuzz.core.rundirs import fresh_dir

    first = fresh_dir(tmp_path / "root", "run-5")
    (first / "repro").mkdir()
    second = fresh_dir(tmp_path / "root", "run-5")
    third = fresh_dir(tmp_path / "root", "run-5")
    assert [p.name for p in (first, second, third)] == ["run-5", "run-5.2", "run-5.3"]
    assert (first / "repro").is_dir() and not any(second.iterdir())


def test_two_fuzz_runs_with_one_seed_keep_each_ones_reproducers(tmp_path: Path) -> None:
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    repros = []
    for impl in ("tests.faulty.plain_add_zero:impl", "tests.faulty.wrong:impl"):
        subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "diagfuzz", "--pyargs", "diagfuzz.suite",
             "-p", "no:cacheprovider", f"--diagfuzz-root={tmp_path / 'root'}", "-n", "0",
             f"--impl={impl}", "--diagfuzz-seed=9", "--diagfuzz-budget=60",
             "--diagfuzz-ops=diagonal", "--diagfuzz-dtypes=float32", "-k", "test_diagonal",
             "--hypothesis-profile=ci", "--diagfuzz-max-elements=64"],
            cwd=repo, env=env, capture_output=True, text=True, timeout=300, check=False)
        repros.append(sorted((tmp_path / "root").glob("run-9*/repro/*.py")))
    first, both = repros
    assert first and all(p.parent.parent.name == "run-9" for p in first)
    assert set(first) < set(both)  # the second run wrote beside the first, not over it
    assert all(p.exists() and "plain_add_zero" in p.read_text() for p in first)
    assert {p.parent.parent.name for p in both} == {"run-9", "run-9.2"}


def test_the_size_on_disk_leaves_out_the_runs_pruning_removes(tmp_path: Path) -> None:
    for i in range(4):
        run = tmp_path / f"run-{i}"
        run.mkdir()
        (run / "journal").write_bytes(b"x" * 1000)
        os.utime(run, (i, i))
    (tmp_path / "triton-cache").mkdir()
    (tmp_path / "triton-cache" / "kernel").write_bytes(b"k" * 500)
    going = rundirs.prunable(tmp_path, keep_runs=2, protect=tmp_path / "run-0")
    assert sorted(p.name for p in going) == ["run-1"]
    assert rundirs.disk_bytes(tmp_path) == 4500
    assert rundirs.disk_bytes(tmp_path, going) == 3500
    assert rundirs.prune(tmp_path, keep_runs=2, protect=tmp_path / "run-0") == going
    assert rundirs.disk_bytes(tmp_path) == 3500
