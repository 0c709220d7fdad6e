"""Bugs behind several input properties at once: the covering Cases reach them by
construction, the gate's random draws (same seed, same budget) do not.

``tests.faulty.three_way`` gives wrong values only when the other diagonal dim equals
|offset|, the input is permuted and the dtype is two bytes wide: a 3-way trigger of the
factor model. ``tests.faulty.new_user_fast_path`` is the fast path of a library written
from the README alone (wrong values for a transposed or sliced 2-D input, dims (0, 1)).
Cases are judged in this process by the same oracle the executor runs, on the CPU.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from diagfuzz import oracles, strategies
from diagfuzz.core.case import Case, Layout, Values
from diagfuzz.core.verdict import Verdict
from diagfuzz.harness.profiles import budget_for
from diagfuzz.harness.sharding import derive_seed
from diagfuzz.strategies.covering import classify, covering_set
from tests.faulty import new_user_fast_path, three_way
from tests.test_boundary_bug import gate_shard

GATE = budget_for("gate")
REPO = Path(__file__).resolve().parents[1]


def judged(impl: Any, cases: list[Case] | tuple[Case, ...]) -> list[Verdict]:
    """The failing verdicts of ``cases``."""
    return [v for c in cases if not (v := oracles.check(c, impl, "cpu")).ok]


def random_draws(impl: Any, op: str, cases: int, run_seed: int = 0) -> tuple[Verdict | None,
                                                                             int]:
    """The suite's stream of ``op`` under the gate profile (its shard seeds of
    ``run_seed``, its family strategy and budget per shard), shard after shard until
    ``cases`` Cases were judged: (first failing verdict or None, Cases judged)."""
    strategy = strategies.case_families(op, max_elements=GATE.max_elements,
                                        max_members=GATE.max_members)
    ran, shard = 0, 0
    while ran < cases:
        verdict, checked = gate_shard(impl, strategy, derive_seed(run_seed, f"test_{op}", shard),
                                      limit=cases - ran, device="cpu")
        ran += checked
        if verdict is not None:
            return verdict, ran
        shard += 1
    return None, ran


def test_three_way_trigger_is_caught_by_the_covering_cases() -> None:
    cases = covering_set("diagonal").cases
    failing = judged(three_way.impl, cases)
    assert failing, f"none of {len(cases)} covering Cases caught the 3-way trigger"
    for verdict in failing:
        case = verdict.case
        assert case is not None and verdict.kind == "mismatch"
        assert three_way.triggered(*_diagonal_args(case))
        assert classify(case)["dtype"] == "reduced"
    assert any(classify(v.case)["sizes"] == "offset_equal"
               and classify(v.case)["layout_input"] == "transposed"
               for v in failing if v.case is not None)


def test_random_draws_of_the_gates_budget_and_seed_miss_it() -> None:
    """The gate's diagonal stream (its seed, 4 shards of 100 Cases) misses it. (Measured:
    these draws first meet it after 542 Cases, where the size ties of
    ``strategies._cases.tie_sizes`` make the other dim equal to |offset|.)"""
    budget = GATE.examples * GATE.shards
    verdict, ran = random_draws(three_way.impl, "diagonal", budget)
    assert verdict is None, f"random draws caught it after {ran} Cases: {verdict}"
    assert ran == budget


def test_the_trigger_needs_all_three() -> None:
    """Each of the three conditions alone (or two of them) leaves the result right: the
    impl is a 3-way bug, not a 1- or 2-way one."""
    base = covering_set("diagonal").cases
    hits = [v.case for v in judged(three_way.impl, base) if v.case is not None]
    case = next(c for c in hits if classify(c)["layout_input"] == "transposed")
    contiguous = case.replace(layout=Layout.contiguous(case.layout.shape))
    float32 = case.replace(dtype="float32", values=Values(case.values.seed))
    other_offset = case.replace(offset=case.offset + (1 if case.offset > 0 else -1))
    for variant in (contiguous, float32, other_offset):
        assert oracles.check(variant, three_way.impl, "cpu").ok, variant.describe()


def _diagonal_args(case: Case) -> tuple[Any, int, int, int]:
    from diagfuzz.core.case import materialise

    return materialise(case), case.offset, case.dim1, case.dim2


def test_new_user_fast_path_is_caught_with_wrong_values_on_transposed_and_sliced() -> None:
    failing = judged(new_user_fast_path.impl, covering_set("diagonal").cases)
    wrong = [v for v in failing if v.kind == "mismatch" and v.check.startswith("bitwise")]
    layouts = {classify(v.case)["layout_input"] for v in wrong if v.case is not None}
    assert {"transposed", "sliced"} <= layouts, layouts
    assert all(len(v.case.sizes) == 2 for v in wrong if v.case is not None)


def test_default_gate_catches_the_new_user_fast_path_deterministically(tmp_path: Path) -> None:
    """The gate's covering stage alone (the suite, OpInfo and compile stages off) fails
    the fast path, with wrong values, classified deterministic."""
    import json

    report = tmp_path / "report.json"
    command = [sys.executable, "-m", "diagfuzz", "gate", "--impl",
               "tests.faulty.new_user_fast_path:impl", "--ops", "diagonal", "--no-suite",
               "--no-opinfo", "--no-sequences", "--no-compile", "--no-save", "--quiet", "--out",
               str(tmp_path / "gate"), "--report", str(report), "--repeats", "2"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    data = json.loads(report.read_text())
    covering = [f for f in data["findings"] if "covering array" in f["stages"]]
    values = [f for f in covering if f["signature"]["kind"] == "mismatch"
              and f["classification"]["label"] == "deterministic"]
    assert values, [f["describe"] for f in data["findings"]]
    assert data["combinations"]["all stages"]["diagonal"]["3"]["share"] == 1.0


def test_suite_judges_the_covering_cases_before_drawing_with_the_option(
        tmp_path: Path) -> None:
    """``--diagfuzz-covering``: the diagonal stream's shards judge the covering Cases first
    and report the 3-way bug the draws of this tiny budget miss; without it, the same run
    passes. The report's factor-model rows count them."""
    from tests.test_suite_run import SMALL, fuzz

    # A fixed seed: 19 random draws meet the 3-way bug now and then (seed 4097095752
    # does), and "the same run passes without" must not depend on the luck of the draw.
    base = ["--impl", "tests.faulty.three_way:impl", "--diagfuzz-ops", "diagonal",
            "--diagfuzz-budget", "40", "-n", "0", "--diagfuzz-seed", "1", *SMALL]
    code, out, data = fuzz(tmp_path, *base, "--diagfuzz-covering", root="with")
    assert code == 1, out[-3000:]
    assert data["findings"] and all(f["kind"] == "mismatch" for f in data["findings"])
    judged = sum(data["counts"]["diagonal"]["levels"].values())
    # The impl has no diagonal_out: its .out Cases are unsupported, counted apart.
    assert judged >= len([c for c in covering_set("diagonal").cases if not c.out_dtype])
    code, out, data = fuzz(tmp_path, *base, root="without")
    assert code == 0, out[-3000:]


class _OutLikeFunctional:
    """diagonal_scatter whose ``.out`` overload hands back ``out`` re-viewed with the
    functional result's layout (strides, storage offset), which aten never does."""

    uses_triton_registration = False

    def diagonal_scatter(self, x, src, offset=0, dim1=0, dim2=1):
        from diagfuzz.impl import aten

        return aten.diagonal_scatter(x, src, offset, dim1, dim2)

    def diagonal_scatter_out(self, x, src, offset=0, dim1=0, dim2=1, *, out):
        return out.set_(self.diagonal_scatter(x, src, offset, dim1, dim2))


def test_an_out_result_has_outs_layout_not_the_functional_results() -> None:
    """The covering stage's diagonal_scatter.out Cases with a permuted input: aten's own
    .out passes (it writes into the contiguous out it is given); an .out that hands back
    the functional result's layout fails on strides."""
    from diagfuzz.impl import aten_with_out

    permuted = [c for c in covering_set("diagonal_scatter").cases
                if c.out_dtype and classify(c)["layout_input"] == "transposed"
                and classify(c)["diag_len"] != "empty"]
    assert permuted
    assert not judged(aten_with_out, permuted)
    failing = judged(_OutLikeFunctional(), permuted)
    assert failing and {v.check for v in failing} <= {"metadata:strides",
                                                      "metadata:storage_offset"}
