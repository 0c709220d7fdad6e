"""Partitions of a campaign (``--diagfuzz-partition=i/N``): disjoint, complete, the whole
run's shard seeds; the partitions' reports merged equal the whole run's report."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import cast

import pytest

from diagfuzz.campaign.partition import (
    Partition,
    PartitionError,
    check_size,
    dealing_order,
    items_of,
    parse,
)
from diagfuzz.core.streams import STREAMS, shard_count
from tests.campaign_runs import WRONG, comparable, merge, suite


@pytest.mark.parametrize(("shards", "active", "skipped"), [
    (1, STREAMS, ()), (2, STREAMS, ()), (4, STREAMS, ()), (11, STREAMS, ()),
    (3, STREAMS[:1], STREAMS[1:]), (5, STREAMS[::2], STREAMS[1::2]),
])
def test_partitions_are_disjoint_complete_and_balanced(shards, active, skipped) -> None:
    every = set(dealing_order(shards, active, skipped))
    assert every == {(s, i) for s in STREAMS for i in range(shards)}
    runs = shards * len(active)
    for count in range(1, runs + 1):
        parts = [items_of(Partition(i, count), shards, active, skipped)
                 for i in range(1, count + 1)]
        assert set().union(*parts) == every, count
        assert sum(map(len, parts)) == len(every), count  # disjoint
        running = [len({item for item in p if item[0] in active}) for p in parts]
        assert min(running) >= 1 and max(running) - min(running) <= 1, (count, running)


def test_partitions_mix_the_streams() -> None:
    # With as many partitions as streams, no partition runs one stream only: with a shard
    # per stream or more, each runs every stream.
    count = len(STREAMS)
    for i in range(1, count + 1):
        assert len({s for s, _ in items_of(Partition(i, count), 2, STREAMS)}) == 2, i
        streams = {s for s, _ in items_of(Partition(i, count), count, STREAMS)}
        assert streams == set(STREAMS), i


@pytest.mark.parametrize(("text", "message"), [
    ("0/4", "numbered from 1"), ("5/4", "i must be in 1..4"), ("1/0", "N must be at least 1"),
    ("two", "give i/N"), ("1/", "give i/N"),
])
def test_bad_partitions_say_why(text: str, message: str) -> None:
    with pytest.raises(PartitionError, match=message):
        parse(text)


def test_parse_and_size_check() -> None:
    assert parse(" 2 / 5 ") == Partition(2, 5)
    assert str(parse("1/1")) == "1/1"
    check_size(Partition(1, 6), shards=2, active=3, shards_given=False)
    with pytest.raises(PartitionError, match="at least 4"):
        check_size(Partition(1, 7), shards=2, active=2, shards_given=True)


class _Options:
    """The options a pytest config would hold."""

    def __init__(self, **options: object) -> None:
        self.options = options

    def getoption(self, name: str, default: object = None) -> object:
        return self.options.get(name, default)


def _config(**options: object) -> pytest.Config:
    return cast(pytest.Config, _Options(**options))


def test_option_checks_are_usage_errors() -> None:
    from diagfuzz.campaign import options

    assert options.partition(_config()) is None
    assert options.partition(_config(diagfuzz_partition="2/3")) == Partition(2, 3)
    with pytest.raises(pytest.UsageError, match="numbered from 1"):
        options.partition(_config(diagfuzz_partition="0/3"))
    with pytest.raises(pytest.UsageError, match="needs --diagfuzz-seed"):
        options.check_partition(Partition(1, 2), None, False, 4, 3, False)
    options.check_partition(Partition(1, 2), None, True, 4, 3, False)  # gate: seed 0
    with pytest.raises(pytest.UsageError, match="raise --diagfuzz-shards to at least 3"):
        options.check_partition(Partition(1, 9), 1, False, 2, 3, True)
    # A partition's shard count does not follow its host's workers; a whole run's does.
    assert options.shards_for(Partition(1, 2), 4, n_workers=32, active=3) == 4
    assert options.shards_for(Partition(1, 20), 4, n_workers=1, active=3) == 7
    assert options.shards_for(None, 4, n_workers=32, active=3) == shard_count(4, 32)
    assert options.run_dir_name(5, Partition(2, 3)) == "run-5-part2of3"
    assert options.run_dir_name(5, None) == "run-5"
    with pytest.raises(pytest.UsageError, match="give a Redis URL"):
        options.database(_config(diagfuzz_database="http://localhost/0"))
    assert options.database(_config()) is None


@pytest.mark.parametrize(("args", "message"), [
    (("--diagfuzz-partition=0/2", "--diagfuzz-seed=1"), "numbered from 1"),
    (("--diagfuzz-partition=1/2",), "needs --diagfuzz-seed"),
])
def test_a_bad_partition_is_a_usage_error(args: tuple[str, ...], message: str, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    code = pytest.main(["-p", "diagfuzz", "--pyargs", "diagfuzz.suite", "-p",
                        "no:cacheprovider", f"--diagfuzz-root={tmp_path}",
                        f"--diagfuzz-report={tmp_path / 'r.json'}", *args])
    err = capsys.readouterr().err
    assert code == 4 and message in err, err  # pytest's usage error, before any worker
    assert not (tmp_path / "r.json").exists()


def _without_gpu(value: object) -> object:
    """``value`` with every ``gpu`` entry of its dicts left out (a merge renames GPUs)."""
    if isinstance(value, dict):
        return {k: _without_gpu(v) for k, v in value.items() if k != "gpu"}
    if isinstance(value, list):
        return [_without_gpu(v) for v in value]
    return value


def _junit_ids(path: Path) -> set[str]:
    return {f"{c.get('classname')}::{c.get('name')}"
            for c in ET.parse(path).getroot().iter("testcase")}


def test_two_partitions_merge_into_the_whole_run(tmp_path: Path) -> None:
    args = (*WRONG, "--diagfuzz-seed=4", "--diagfuzz-budget=60")
    code, out, whole = suite(tmp_path / "whole.json", *args,
                             f"--junitxml={tmp_path / 'whole.xml'}")
    assert code == 1 and whole["findings"], out
    parts = []
    for index, extra in ((1, ("-n", "2")), (2, ())):  # xdist: the same collection on each
        code, out, report = suite(tmp_path / f"p{index}.json", *args, *extra,
                                  f"--diagfuzz-partition={index}/2",
                                  f"--junitxml={tmp_path / f'p{index}.xml'}")
        assert code in (0, 1), out
        assert report["partition"] == index and report["partitions"] == 2
        assert "shard_findings" in report and "shard_findings" not in whole
        assert f"partition: {index}/2 of a campaign" in out
        assert report["run_dir"].endswith(f"run-4-part{index}of2")
        parts.append(report)
    # Disjoint and complete: the partitions ran the whole run's items, each once, with the
    # whole run's test ids (and so its shard indices and seeds).
    ids = [_junit_ids(tmp_path / f"p{i}.xml") for i in (1, 2)]
    assert not ids[0] & ids[1] and ids[0] | ids[1] == _junit_ids(tmp_path / "whole.xml")
    assert parts[0]["cases"] + parts[1]["cases"] == whole["cases"]
    code, out = merge(str(tmp_path / "p1.json"), str(tmp_path / "p2.json"),
                      str(tmp_path / "p1.xml"), str(tmp_path / "p2.xml"),
                      f"--report={tmp_path / 'merged.json'}",
                      f"--junit={tmp_path / 'merged.xml'}")
    assert code == 1, out  # a finding fails, as it fails the whole run
    merged = json.loads((tmp_path / "merged.json").read_text())
    for key in ("cases", "failing_cases", "unsupported_cases", "counts", "coverage"):
        assert _without_gpu(merged[key]) == _without_gpu(whole[key]), key
    # On a GPU host each Case is also counted under its GPU, which a merge names after its
    # partition (p1/0, p2/0: two hosts' GPU 0 stay apart): the same Cases, split by host.
    for op, group in whole["counts"].items():
        if op == "unsupported_dtypes":  # a tally per dtype, not a group (the .out Cases)
            continue
        gpus = group["classes"].get("gpu", {})
        split = merged["counts"][op]["classes"].get("gpu", {})
        assert sum(split.values()) == sum(gpus.values()), op
        assert all(name.split("/", 1)[0] in ("p1", "p2") for name in split), split
    assert comparable(merged["findings"]) == comparable(whole["findings"])
    assert merged["exit_status"] == 1 and merged["partitions"] == 2
    assert merged["merged"]["missing"] == [] and merged["merged"]["errors"] == []
    assert set(merged["pace"]["workers"]) == {"p1/gw0", "p1/gw1", "p2/main"}
    assert f"diagfuzz: {len(whole['findings'])} finding" in out
    assert "merged: partition(s) 1, 2 of 2" in out and "verdict: exit 1" in out
    # The reproducers are this merge's, beside its report.
    for finding in merged["findings"]:
        assert Path(finding["reproducer"]).parent == tmp_path / "merged-repro"
    assert _junit_ids(tmp_path / "merged.xml") >= _junit_ids(tmp_path / "whole.xml")
    # One partition alone is not the campaign: exit 3, unless --allow-partial.
    code, out = merge(str(tmp_path / "p1.json"))
    assert code == 3 and "partition(s) 2/2 missing" in out, out
    code, out = merge(str(tmp_path / "p2.json"), "--allow-partial")
    assert code == (1 if parts[1]["findings"] else 0), out
    assert "missing 1" in out
    # The same partition twice: named, exit 3.
    code, out = merge(str(tmp_path / "p1.json"), str(tmp_path / "p1.json"),
                      str(tmp_path / "p2.json"))
    assert code == 3 and "partition 1/2 given 2 times" in out, out
