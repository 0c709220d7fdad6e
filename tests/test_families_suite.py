"""The suite draws Case families end to end: a bug one dtype shows is reported as the one
failing member, shrunk small, and the Case budget is about what the profile says.

The wrong impl lives here (``tests.test_families_suite:wrong_on_int8``), so the suite's
subprocess imports it as ``--impl``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch

from diagfuzz import oracles
from diagfuzz.core.case import Case
from diagfuzz.core.streams import shards_within_budget
from diagfuzz.execution import journal
from diagfuzz.harness.sharding import STREAMS
from diagfuzz.strategies import MAX_MEMBERS
from tests.faulty._base import Faulty, flip_first_bit
from tests.test_suite_run import SMALL, fuzz


class WrongOnInt8(Faulty):
    """aten, but an int8 result has one bit flipped: a bug only a sibling's dtype may show."""

    def fault(self, result: torch.Tensor, offset: int) -> torch.Tensor:
        return flip_first_bit(result) if result.dtype == torch.int8 else result


wrong_on_int8 = WrongOnInt8()
IMPL = "tests.test_families_suite:wrong_on_int8"


def test_an_int8_bug_is_reported_as_its_small_failing_member(tmp_path: Path) -> None:
    code, out, report = fuzz(tmp_path, "--impl", IMPL, "--diagfuzz-isolation", "inprocess",
                             "--diagfuzz-seed", "3", "--diagfuzz-shards", "1",
                             "--diagfuzz-budget", "600", "-k", "test_diagonal", *SMALL)
    assert code == 1, out
    failures = report["findings"]
    assert {t for f in failures for t in f["test_ids"]} == {
        "diagfuzz/suite.py::test_diagonal[shard0]",
        "diagfuzz/suite.py::test_diagonal_backward[shard0]"}, out
    records = [r for r in journal.read(journal.journal_path(
        Path(report["run_dir"]) / "journal", "main")) if r["type"] == "case"]
    for failure in failures:
        assert failure["kind"] == "mismatch", failure
        case = Case.from_json(failure["case"])  # one Case, not a family
        assert case.dtype == "int8" and not case.invalid, case
        assert len(case.sizes) <= 3 and math.prod(case.sizes) <= 4, case
        assert oracles.check(case, wrong_on_int8, "cpu").kind == "mismatch"
        # The item checked it: the failing member of Hypothesis' shrunk family.
        mine = [r["case"] for r in records if r["test_id"] in failure["test_ids"]]
        assert any(Case.from_json(c) == case for c in mine)
    assert "diagonal · mismatch · bitwise" in out


def test_the_case_budget_holds_with_families(tmp_path: Path) -> None:
    """--diagfuzz-budget counts Cases: the suite draws budget / MEAN_MEMBERS families, and
    their members come to about the budget (and one Case per example with max-members 1)."""
    args = ("--diagfuzz-isolation", "inprocess", "--diagfuzz-seed", "11",
            "--diagfuzz-budget", "240", *SMALL)
    code, out, report = fuzz(tmp_path, *args)
    assert code == 0, out
    assert 240 * 0.6 <= report["cases"] <= 240 * 1.5, report["counts"]
    # The ci profile's shards of every stream (one per op, and invalid; fewer where a
    # shard would get too few Cases) share the budget.
    assert report["max_members"] == MAX_MEMBERS
    shards = shards_within_budget(2, 240, len(STREAMS))
    assert report["cases_per_shard"] == math.ceil(240 / (shards * len(STREAMS)))
    code, out, report = fuzz(tmp_path, *args, "--diagfuzz-max-members", "1", root="one")
    assert code == 0, out
    # One Case an example: exactly the shards' Cases (240, rounded up to whole shards).
    assert report["cases"] == report["cases_per_shard"] * shards * len(STREAMS)
    assert report["max_members"] == 1


def test_a_small_dev_budget_draws_about_its_cases_not_each_shards_simplest_one(
        tmp_path: Path) -> None:
    """Hypothesis opens every shard with its simplest example; at a budget of 100 the dev
    profile's 4 shards a stream would each draw that one Case (28 Cases, 7 distinct). The
    run takes fewer shards instead (``diagfuzz.core.streams.shards_within_budget``)."""
    code, out, report = fuzz(tmp_path, "--impl", "diagfuzz.impl:aten", "--diagfuzz-isolation",
                             "inprocess", "--diagfuzz-seed", "3", "--diagfuzz-budget", "100",
                             "--diagfuzz-max-elements", "256")
    assert code == 0, out
    assert report["shards"] == 1, out
    assert report["cases"] >= 70, report["counts"]
    records = [r["case"] for r in journal.read(journal.journal_path(
        Path(report["run_dir"]) / "journal", "main")) if r["type"] == "case"]
    distinct = {json.dumps(c, sort_keys=True) for c in records}
    assert len(distinct) >= 50, len(distinct)
