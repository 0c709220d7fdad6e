"""Unit tests of the fuzz plugin's pieces: shard seeds, budgets, GPU pinning, the report."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import settings

from diagfuzz.core import streams
from diagfuzz.core.case import Case, Layout
from diagfuzz.core.verdict import Verdict
from diagfuzz.harness import profiles, sharding, workers
from diagfuzz.harness.findings import Finding, block
from diagfuzz.harness.report import (
    Tally,
    classify,
    diagonal_length,
    format_table,
    report_data,
    write_json,
)


def _case(sizes=(3, 4), offset=0, dim1=0, dim2=1, dtype="float32", invalid="",
          op="diagonal", kinds=("contiguous",)) -> Case:
    layout = Layout.contiguous(tuple(sizes))
    return Case(op, tuple(sizes), offset, dim1, dim2, dtype,
                Layout(layout.shape, layout.strides, 0, kinds), invalid=invalid)


# --- sharding ---------------------------------------------------------------------------

def test_shard_seeds_are_stable_and_distinct() -> None:
    seeds = {sharding.derive_seed(7, s, k) for s in sharding.STREAMS for k in range(16)}
    assert len(seeds) == len(sharding.STREAMS) * 16
    assert sharding.derive_seed(7, "test_diagonal", 3) == sharding.derive_seed(
        7, "test_diagonal", 3)
    assert sharding.derive_seed(7, "test_diagonal", 3) != sharding.derive_seed(
        8, "test_diagonal", 3)
    # The seed must not depend on the process (hash randomisation): pinned value.
    assert sharding.derive_seed(0, "test_diagonal", 0) == 0x5C8B71C92050A063


def test_shards_cover_every_worker_and_budget_is_split() -> None:
    assert streams.shard_count(4, workers=2) == 4
    assert streams.shard_count(4, workers=32, streams=3) == 11  # 33 items for 32 workers
    assert sharding.examples_per_shard(2400, 4, streams=3) == 200
    assert sharding.examples_per_shard(2400, 11, streams=3) == 73  # total kept (rounded up)
    assert sharding.examples_per_shard(1, 4) == 1
    # By default over every stream: one per op, and the invalid one.
    count = len(sharding.STREAMS)
    assert streams.shard_count(4, workers=64) == math.ceil(64 / count)
    assert sharding.examples_per_shard(100 * 4 * count, 4) == 100


def test_run_plan_round_trips_through_workerinput() -> None:
    plan = sharding.RunPlan(1, "m:a", "dev", 4, 10, 64, "inprocess", None, "/tmp/r", 2)
    assert sharding.RunPlan.from_dict(json.loads(json.dumps(plan.to_dict()))) == plan
    assert plan.worker_dir("gw1").as_posix() == "/tmp/r/gw1"
    assert plan.total == 4 * 10 * len(sharding.STREAMS)
    assert "--diagfuzz-seed 1" in plan.describe()
    narrowed = sharding.RunPlan(
        1, "m:a", "dev", 4, 10, 64, "process", 9.0, "/tmp/r", 2, ops=("diagonal_backward",),
        dtypes={"diagonal_backward": ("float32", "float16")}, ranks=(2, 3),
        layouts=("contiguous",), strict=True, deadline=123.5, max_seconds=60.0,
        impl_path=("/x",), skipped={
            stream: f"the impl provides no {op}" for stream, op in sharding.STREAM_OPS.items()
            if op != "diagonal_backward"})
    assert sharding.RunPlan.from_dict(json.loads(json.dumps(narrowed.to_dict()))) == narrowed
    assert narrowed.total == 4 * 10 * 2  # two streams run
    assert narrowed.strategy_args("test_invalid") == {
        "max_elements": 64, "max_members": 12, "ranks": (2, 3),
        "layout_kinds": ("contiguous",), "dtypes": ("float32", "float16"),
        "op": "diagonal_backward"}
    # Some ops but not one: the invalid Cases of those ops (each valid stream its own).
    some = sharding.RunPlan(1, "m:a", "dev", 4, 10, 64, "process", None, "/tmp/r", 2,
                            ops=("diagonal", "diag"))
    assert some.strategy_args("test_invalid")["op"] == ("diagonal", "diag")
    assert "op" not in some.strategy_args("test_diag")
    assert "op" not in plan.strategy_args("test_invalid")  # every op: the default
    text = narrowed.describe()
    assert "skipped diagonal: the impl provides no diagonal" in text
    assert "diagonal_backward dtypes float32, float16" in text


# --- GPU pinning ------------------------------------------------------------------------

def test_visible_gpus_follow_the_callers_list() -> None:
    assert workers.visible_gpus({}, 2) == ["0", "1"]
    assert workers.visible_gpus({"CUDA_VISIBLE_DEVICES": "3,5"}, 8) == ["3", "5"]
    assert workers.visible_gpus({"CUDA_VISIBLE_DEVICES": "GPU-ab, 2"}, 8) == ["GPU-ab", "2"]
    assert workers.visible_gpus({"CUDA_VISIBLE_DEVICES": "-1"}, 8) == []
    assert workers.visible_gpus({"CUDA_VISIBLE_DEVICES": "0,-1,2"}, 8) == ["0"]
    assert workers.visible_gpus({"CUDA_VISIBLE_DEVICES": ""}, 8) == []


def test_pin_specs_round_robin_over_local_workers_only() -> None:
    pinned = workers.pin_specs(["popen"] * 3 + ["ssh=host//python=python3", "2*popen"],
                               ["3", "5"])
    assert pinned == [
        "popen//env:CUDA_VISIBLE_DEVICES=3",
        "popen//env:CUDA_VISIBLE_DEVICES=5",
        "popen//env:CUDA_VISIBLE_DEVICES=3",
        "ssh=host//python=python3",
        "popen//env:CUDA_VISIBLE_DEVICES=5",
        "popen//env:CUDA_VISIBLE_DEVICES=3",
    ]
    assert workers.pin_specs(["2*popen"], []) == ["popen", "popen"]
    mine = "popen//env:CUDA_VISIBLE_DEVICES=7"
    assert workers.pin_specs([mine], ["0"]) == [mine]


def test_auto_workers_per_gpu() -> None:
    assert workers.auto_workers(1, cpus=16, per_gpu=None) == 4
    assert workers.auto_workers(8, cpus=16, per_gpu=None) == 16
    assert workers.auto_workers(4, cpus=2, per_gpu=None) == 4
    assert workers.auto_workers(2, cpus=64, per_gpu=3) == 6


def test_auto_executors_need_a_cpu_for_every_process() -> None:
    assert workers.FANOUT_EXECUTORS == 3
    assert workers.auto_executors(1, cpus=2) == 1  # CI: 2 CPUs
    assert workers.auto_executors(2, cpus=2) == 1
    assert workers.auto_executors(1, cpus=3) == 2
    assert workers.auto_executors(4, cpus=16) == 3  # an H200 machine, -n auto
    assert workers.auto_executors(4, cpus=12) == 2
    assert workers.auto_executors(6, cpus=16) == 1
    assert workers.auto_executors(1, cpus=64) == 3
    assert workers.auto_executors(0, cpus=3) == 2  # outside xdist: one worker


def test_isolate_gives_each_worker_its_database_and_the_runs_cache(tmp_path) -> None:
    env: dict[str, str] = {}
    db = workers.isolate(tmp_path / "run-7" / "gw3", env)
    assert env["TRITON_CACHE_DIR"] == str(tmp_path / "triton-cache")
    shared = {workers.TRITON_CACHE_ENV: str(tmp_path / "gate-cache")}
    workers.isolate(tmp_path / "run-7" / "gw4", shared)
    assert shared["TRITON_CACHE_DIR"] == str(tmp_path / "gate-cache")
    assert db == tmp_path / "run-7" / "gw3" / "hypothesis" and db.is_dir()
    assert workers.worker_id({"PYTEST_XDIST_WORKER": "gw5"}) == "gw5"
    assert workers.worker_id({}) == "main"


# --- profiles ---------------------------------------------------------------------------

def test_profiles_register_with_their_budgets() -> None:
    profiles.register()
    for name, budget in profiles.BUDGETS.items():
        prof = settings.get_profile(name)
        assert prof.max_examples == budget.examples
        assert prof.deadline is None
        assert prof.derandomize == budget.derandomize
    gate = profiles.shard_settings("gate", max_examples=5, database=object())
    assert gate.database is None and gate.derandomize and gate.max_examples == 5
    assert profiles.budget_for("default").examples == settings.get_profile(
        "default").max_examples


# --- report -----------------------------------------------------------------------------

def test_classify_and_diagonal_length() -> None:
    assert diagonal_length(_case((3, 4), offset=1)) == 3
    assert diagonal_length(_case((3, 4), offset=-3)) == 0
    assert diagonal_length(_case((3, 4), offset=9)) == 0
    assert diagonal_length(_case((3, 4), dim1=1, dim2=-1)) is None
    classes = classify(_case((2, 5, 4), offset=-1, dim1=2, dim2=0, kinds=("permuted", "offset")))
    assert classes["rank"] == ["3"] and classes["layout"] == ["permuted", "offset"]
    assert classes["diagonal"] == ["non-empty"] and classes["offset"] == ["-1"]
    bad = classify(_case((3,), dim1=0, dim2=0, invalid="rank1"))
    assert bad["invalid"] == ["rank1"] and bad["offset"] == ["n/a"]


def test_tally_merges_and_round_trips() -> None:
    a, b = Tally(), Tally()
    a.add(_case(), failed=False)
    b.add(_case(op="diagonal_backward", dtype="int8"), failed=True)
    b.add(_case((3,), invalid="rank1"), failed=False)
    b.add(_case(dtype="complex64"), failed=False, unsupported=True)
    a.merge(Tally.from_dict(json.loads(json.dumps(b.to_dict()))))
    assert a.total == 4 and a.failing == 1
    data = a.to_dict()
    assert list(data) == ["diagonal", "diagonal_backward", "invalid", "unsupported_dtypes"]
    assert data["diagonal_backward"]["failures"] == 1
    assert data["diagonal_backward"]["classes"]["dtype"] == {"int8": 1}
    assert data["diagonal"]["unsupported"] == 1 and data["unsupported_dtypes"] == {
        "complex64": 1}
    # An unsupported Case is counted, not classified: coverage is of judged Cases.
    assert a.coverage()["rank"] == {"1": 1, "2": 2}


def test_out_calls_the_impl_has_no_method_for_are_not_counted_as_dtypes() -> None:
    tally = Tally()
    tally.add(_case(dtype="float32"), failed=False, unsupported=True, no_out=True)
    tally.add(_case(dtype="complex64"), failed=False, unsupported=True)
    back = Tally.from_dict(json.loads(json.dumps(tally.to_dict())))
    assert back.unsupported_out == {"diagonal": 1}
    assert back.unsupported_dtypes == {"complex64": 1}
    lines = format_table(back)
    assert "unsupported by dtype: complex64 1" in lines
    assert "unsupported .out calls (the impl has no <op>_out): diagonal 1" in lines


def test_table_and_json_report(tmp_path) -> None:
    tally = Tally()
    case = _case((4, 4))
    tally.add(case, failed=True)
    finding = Finding.of(Verdict("mismatch", "bitwise:aten", "bits differ", case,
                                 {"symptom": "values"}), "suite.py::test_diagonal[shard0]")
    lines = format_table(tally)
    assert "diagonal" in lines[0] and any(line.startswith("dtype") for line in lines)
    assert any(line.startswith("failing") for line in lines)
    path = tmp_path / "r.json"
    write_json(path, report_data({"seed": 5}, tally, [finding]))
    data = json.loads(path.read_text())
    assert data["seed"] == 5 and data["cases"] == 1 and data["failing_cases"] == 1
    (entry,) = data["findings"]
    assert entry["kind"] == "mismatch" and entry["reproducer"] is None
    assert entry["describe"] == "diagonal · mismatch · bitwise · wrong values"
    assert Case.from_json(entry["case"]) == case
    assert Verdict.from_json(entry["verdict"]).case == case
    assert Finding.from_dict(entry).to_dict() == entry


@pytest.mark.parametrize("kind", ["crash", "harness-error"])
def test_finding_without_case_describes_itself(kind: str) -> None:
    from diagfuzz.core.signature import Signature

    finding = Finding(Signature("", kind, "worker"),
                      {"kind": kind, "check": "worker", "message": "it died", "case": None})
    text = "\n".join(block(finding, 1, 1))
    assert text.startswith(f"[1/1] {kind} · worker") and "it died" in text


def test_pace_is_cases_per_second_inside_shards_averaged_over_workers() -> None:
    from diagfuzz.harness.report import Pace

    pace = Pace()
    assert pace.per_worker() is None and pace.summary(3.0) == "pace: no shard ran"
    pace.add("gw0", 300, 1.0)
    pace.add("gw0", 100, 1.0)  # gw0: 400 Cases in 2 s
    pace.add("gw1", 100, 0.5)  # gw1: 200/s
    assert pace.per_worker() == 200.0  # 500 Cases in 2.5 s
    data = pace.to_dict(duration_s=5.0)
    assert data["workers"] == {"gw0": {"cases": 400, "shard_s": 2.0, "cases_per_s": 200.0},
                               "gw1": {"cases": 100, "shard_s": 0.5, "cases_per_s": 200.0}}
    assert data["cases_per_s_per_worker"] == 200.0
    assert data["outside_shards_s"] == 3.0  # the run's 5 s minus the busiest worker's 2 s
    assert pace.summary(5.0).startswith("pace: 200 Cases/s per worker inside shards (2 ")


def test_pace_weighs_each_shard_by_its_time() -> None:
    """A short shard counts for what it lasted: 1,000 Cases in 1 s and 10 in 1 s make 505/s,
    not the mean of two workers' rates; a replaced worker's new id changes nothing."""
    from diagfuzz.harness.report import Pace

    pace = Pace()
    pace.add("gw0", 1000, 1.0)
    pace.add("gw1", 10, 1.0)
    assert pace.per_worker() == 505.0
    pace.add("gw2", 0, 0.0)  # a replacement that ran nothing
    assert pace.per_worker() == 505.0


def test_pace_splits_per_gpu_where_workers_were_pinned() -> None:
    """Each worker's rate counts toward its GPU: the GPU's share of the run's pace."""
    from diagfuzz.harness.report import Pace

    pace = Pace()
    pace.add("gw0", 400, 2.0, "0")  # 200/s
    pace.add("gw1", 300, 1.0, "1")  # 300/s
    pace.add("gw2", 100, 1.0, "0")  # 100/s
    assert pace.per_gpu() == {"0": {"workers": 2, "cases": 500, "cases_per_s": 300.0},
                              "1": {"workers": 1, "cases": 300, "cases_per_s": 300.0}}
    data = pace.to_dict(4.0)
    assert data["gpus"] == pace.per_gpu() and data["worker_gpus"]["gw2"] == "0"
    assert pace.summary(4.0).endswith(
        "; per GPU: 0 500 Cases at 300/s (2 workers), 1 300 Cases at 300/s (1 worker)")
    unpinned = Pace()
    unpinned.add("gw0", 10, 1.0)
    assert unpinned.per_gpu() == {} and "per GPU" not in unpinned.summary(2.0)


def test_a_worker_names_its_gpu_only_when_pinned_to_one() -> None:
    from diagfuzz.harness.workers import pinned_gpu

    assert pinned_gpu({"CUDA_VISIBLE_DEVICES": "1"}) == "1"
    assert pinned_gpu({"CUDA_VISIBLE_DEVICES": "GPU-5f3c"}) == "GPU-5f3c"
    assert pinned_gpu({"CUDA_VISIBLE_DEVICES": "0,1"}) is None
    assert pinned_gpu({"CUDA_VISIBLE_DEVICES": "-1"}) is None
    assert pinned_gpu({}) is None


def test_a_shard_names_the_gpu_its_cases_ran_on_with_or_without_xdist() -> None:
    # A run without xdist on a GPU host runs on cuda:0, the first visible GPU: its coverage
    # names it as a pinned worker would, so partitions run with and without -n merge into
    # the whole run's counts (seen failing on an H200 when only pinned workers named it).
    from diagfuzz.harness.workers import shard_gpu

    assert shard_gpu({"CUDA_VISIBLE_DEVICES": "1"}, "cuda") == "1"
    assert shard_gpu({}, "cuda") == "0"
    assert shard_gpu({"CUDA_VISIBLE_DEVICES": "2,3"}, "cuda") == "2"
    assert shard_gpu({"CUDA_VISIBLE_DEVICES": "-1"}, "cuda") is None
    assert shard_gpu({}, "cpu") is None
    assert shard_gpu({"CUDA_VISIBLE_DEVICES": "0"}, "cpu") == "0"  # pinned: it says so


def test_the_coverage_table_counts_each_shards_cases_under_its_gpu() -> None:
    from diagfuzz.harness.report import Tally, format_table
    from tests.faulty.cases import square

    run = Tally()
    for gpu, offsets in (("0", [0, 1, 2]), ("1", [-1])):
        shard = Tally()
        for offset in offsets:
            shard.add(square(offset), failed=False)
        shard.on_gpu(gpu)
        run.merge(shard)
    assert run.coverage()["gpu"] == {"0": 3, "1": 1}
    rows = [line.split() for line in format_table(run)]
    assert ["gpu", "0", "3"] in rows and ["1", "1"] in rows


def test_only_local_workers_under_this_python_share_the_runs_fork_server() -> None:
    assert workers.share_this_interpreter(["popen", "popen"])
    assert workers.share_this_interpreter(["3*popen//env:CUDA_VISIBLE_DEVICES=1"])
    assert not workers.share_this_interpreter(["popen", "popen//python=/opt/py312/bin/python"])
    assert not workers.share_this_interpreter(["ssh=gpu-box//python=python3"])


def test_a_small_budget_gets_fewer_shards_not_shards_of_one_simplest_case() -> None:
    from diagfuzz.core.streams import MIN_CASES_PER_SHARD, shards_within_budget

    assert shards_within_budget(4, 100, 7) == 1  # 4 shards would each draw 4 Cases
    assert shards_within_budget(4, 2_800, 7) == 4  # the gate profile's default: as asked
    assert shards_within_budget(8, 14_000, 7) == 8
    assert shards_within_budget(4, 0, 7) == 1
    for budget in range(0, 5_000, 37):
        shards = shards_within_budget(4, budget, 7)
        assert 1 <= shards <= 4
        assert shards == 1 or budget / (7 * shards) >= MIN_CASES_PER_SHARD


def test_a_skip_for_a_missing_method_names_the_method() -> None:
    from diagfuzz.core.impl import no_method

    assert no_method("diag_1d") == "the impl provides no diag (the method of diag_1d)"
    assert no_method("diagonal") == "the impl provides no diagonal"
