"""The gate on a bug that fails only after another op's call: one deterministic finding (exit
1), the polluter named under it, a reproducer that replays it and exits 1, and a corpus entry
that the next gate replays first."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

IMPL = "tests.faulty.history:polluted"


def gate(tmp_path: Path, *more: str,
         repeats: int = 2) -> tuple[subprocess.CompletedProcess[str], dict]:
    """The gate on ``IMPL``. 2 re-runs a finding (its sequence replayed 4 times) give its
    label as the default 5 do (tests/test_classify_history.py measures those), in half the
    fresh processes."""
    args = [sys.executable, "-m", "diagfuzz", "gate", "--impl", IMPL,
            "--ops", "diagonal,diagonal_backward", "--budget", "100", "-n", "1",
            "--repeats", str(repeats), "--no-compile", "--no-opinfo",
            "--report", "report.json", *more]
    proc = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, check=False,
                          env=environment(), timeout=900)
    return proc, json.loads((tmp_path / "report.json").read_text())


def environment() -> dict[str, str]:
    environ = dict(os.environ)
    environ["PYTHONPATH"] = os.pathsep.join([str(Path.cwd()), environ.get("PYTHONPATH", "")])
    return environ


def test_a_polluted_op_is_one_deterministic_finding_with_its_polluter(tmp_path: Path) -> None:
    proc, report = gate(tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    [finding] = report["findings"]
    c = finding["classification"]
    assert (c["label"], c["ratio"], c["history"]) == ("deterministic", "4/4",
                                                      "after earlier calls")
    [polluter] = c["sequence"]
    assert (polluter["case"]["op"], polluter["case"]["offset"]) == ("diagonal_backward", 2)
    assert "history  passes alone; fails after 1 earlier call" in proc.stdout
    assert "after    1. diagonal_backward(" in proc.stdout

    script = Path(finding["reproducer"])
    replayed = subprocess.run([sys.executable, str(script)], cwd=tmp_path,
                              capture_output=True, text=True, check=False, env=environment(),
                              timeout=300)
    assert replayed.returncode == 1 and "the bug is there" in replayed.stdout, replayed.stdout
    alone = subprocess.run([sys.executable, str(script), "--alone"], cwd=tmp_path,
                           capture_output=True, text=True, check=False, env=environment(),
                           timeout=300)
    assert alone.returncode == 0 and "needs the calls of SEQUENCE" in alone.stdout

    # The corpus keeps the sequence; the next gate replays it first, and finds the bug there
    # (its other stages off: the replay is what this run is for).
    [entry] = (tmp_path / "corpus").glob("*.json")
    assert json.loads(entry.read_text())["found"]["sequence"] == c["sequence"]
    again, report = gate(tmp_path, "--no-save", "--no-covering", "--no-suite",
                         "--no-sequences", repeats=1)
    assert again.returncode == 1, again.stdout + again.stderr
    [finding] = report["findings"]
    assert finding["stages"].get("corpus replay") == 1, finding["stages"]


def test_the_sequence_search_reaches_a_cache_keyed_on_addresses(tmp_path: Path) -> None:
    # No other stage: a Case's input must take a freed input's address, with other values,
    # which the sweep's new-values round makes on purpose (the allocator's reuse, not a
    # free list of the impl's own: deterministic on the CPU too).
    args = [sys.executable, "-m", "diagfuzz", "gate", "--impl",
            "tests.faulty.history:input_address", "--no-save", "--no-suite", "--no-covering",
            "--no-opinfo", "--no-compile", "--report", "report.json"]
    proc = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, check=False,
                          env=environment(), timeout=600)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    [finding] = report["findings"]
    assert set(finding["stages"]) == {"sequence search"}
    c = finding["classification"]
    assert (c["label"], c["history"]) == ("deterministic", "after earlier calls"), c
    assert c["sequence"] and all(call["case"]["op"] == "diagonal" for call in c["sequence"])


class _Runner:
    """A stand-in executor: launched, closed, alive until closed."""

    def __init__(self) -> None:
        self.launched = self.closed = False

    def launch(self) -> None:
        self.launched = True

    def close(self) -> None:
        self.closed = True

    @property
    def pid(self) -> int | None:
        return None if self.closed else 1


def test_fresh_executors_start_ahead_and_serve_as_many_sequences_as_asked() -> None:
    from diagfuzz.execution.messages import WARM_UP_ENV
    from diagfuzz.harness.sequences import Fresh

    made: list[_Runner] = []

    def make(environ: dict[str, str]) -> _Runner:
        assert environ == {WARM_UP_ENV: "0"}  # its start is all it pays
        made.append(_Runner())
        return made[-1]

    fresh = Fresh(make, ahead=2)  # type: ignore[arg-type]
    first = fresh.take()
    assert len(made) == 3 and all(r.launched for r in made)  # two more start meanwhile
    fresh.done(first)
    assert first.closed and fresh.take() is made[1]  # each sequence a fresh executor
    fresh.close()
    before = len(made)
    shared = Fresh(make, ahead=1, reuse=2)  # type: ignore[arg-type]
    one = shared.take()
    shared.done(one)
    assert not one.closed and shared.take() is one  # a second sequence, same executor
    shared.done(one)
    assert shared.take() is not one and one.closed
    shared.close()
    assert all(r.closed for r in made[before:])


def test_a_gpu_starts_one_executor_ahead_of_sequences_that_share_it() -> None:
    """On a GPU each executor serves GPU_REUSE sequences: one more starting meanwhile is
    enough, and more would import the impl beside the suite for nothing."""
    from diagfuzz.harness.sequences import GPU_AHEAD, GPU_REUSE, fresh_for

    made: list[_Runner] = []

    def make(environ: dict[str, str]) -> _Runner:
        made.append(_Runner())
        return made[-1]

    gpu = fresh_for(make, "cuda:0")  # type: ignore[arg-type]
    first = gpu.take()
    assert (GPU_AHEAD, GPU_REUSE) == (1, 8) and len(made) == 2
    for _ in range(GPU_REUSE - 1):
        gpu.done(first)
        assert gpu.take() is first
    gpu.close()
    cpu = fresh_for(make, "cpu")  # type: ignore[arg-type]
    one = cpu.take()
    cpu.done(one)
    assert one.closed and len(made) == 2 + 5  # one sequence each, four ahead
    cpu.close()
