"""The fuzz suite does not shrink a hang whose op has a confirmed hang: every shrink step
that fails again is that hang's later stall (past the short allowance, never confirmed),
which never represents the finding, and on a GPU each costs a killed executor and a fresh
one. The Case that was confirmed represents it."""

from __future__ import annotations

from pathlib import Path

from tests.suite_runs import run_suite

#: Every rank-4 tensor whose first dim is 3 hangs; the other Cases pass.
IMPL = "tests.faulty.shape_fault:hang"


def test_a_confirmed_hang_is_kept_as_found_not_shrunk_into_its_stalls(tmp_path: Path) -> None:
    code, output, report = run_suite(
        tmp_path, "--impl", IMPL, "-k", "test_diagonal", "--diagfuzz-ops=diagonal",
        "--diagfuzz-sequences=0", "--diagfuzz-shards=1", "--diagfuzz-budget=1500",
        "--diagfuzz-seed=1")
    assert code == 1, output
    hangs = [f for f in report["findings"] if f["kind"] == "hang"]
    assert len(hangs) == 1, report["findings"]
    hang = hangs[0]
    details = hang["verdict"]["details"]
    assert "known_hang" not in details, details  # the confirmed Case, not a later stall
    assert not hang["shrunk"] and hang["count"] > 1, hang
    assert report["shrink_checks"] == 0, report["shrink_checks"]
