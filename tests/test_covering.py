"""The covering-array generator, the factor models and the covering Cases.

The generator must hold every valid t-way combination of a model with constraints (and
none that breaks them), the same rows for the same seed, in a reasonable number of rows;
every row of every op's array must become a valid Case of exactly its levels; and the
measurement must count what the Cases hold.
"""

from __future__ import annotations

from itertools import combinations, product

import pytest

from diagfuzz.core.covering import Constraint, Factor, Model, coverage, covering_array
from diagfuzz.core.geometry import diagonal_of
from diagfuzz.specs import SPECS, spec_of
from diagfuzz.specs.factors import model_of
from diagfuzz.strategies.covering import (
    build,
    classify,
    coverage_lines,
    covering_rows,
    covering_set,
    measure,
)


def _toy() -> Model:
    """Five factors, mixed levels, three constraints (one over three factors)."""
    return Model("toy", (Factor("a", ("a0", "a1", "a2")), Factor("b", ("b0", "b1", "b2", "b3")),
                         Factor("c", ("c0", "c1")), Factor("d", ("d0", "d1", "d2")),
                         Factor("e", ("e0", "e1", "e2"))),
                 (Constraint(("a", "b"), lambda a, b: not (a == "a0" and b == "b3"), "x"),
                  Constraint(("c", "d"), lambda c, d: c == "c0" or d != "d2", "y"),
                  Constraint(("a", "d", "e"),
                             lambda a, d, e: not (a == "a2" and d == "d1" and e == "e2"),
                             "z")),
                 core=("a", "b", "d", "e"), strength=2, core_strength=4)


def _all_valid(model: Model) -> list[dict[str, str]]:
    """Every valid full assignment, by brute force (the generator's oracle)."""
    out = []
    for levels in product(*(f.levels for f in model.factors)):
        row = dict(zip(model.names, levels, strict=True))
        if all(c.allows(*(row[f] for f in c.factors)) for c in model.constraints):
            out.append(row)
    return out


def test_toy_array_covers_every_valid_combination_and_breaks_no_constraint() -> None:
    model = _toy()
    rows = covering_array(model, seed=3)
    valid = _all_valid(model)
    for row in rows:
        assert row in valid, f"row {row} breaks a constraint"
    for names, t in ((model.names, 2), (model.core, 4)):
        for chosen in combinations(names, t):
            wanted = {tuple(r[f] for f in chosen) for r in valid}
            held = {tuple(r[f] for f in chosen) for r in rows}
            assert wanted == held, f"{chosen}: missing {sorted(wanted - held)[:3]}"
    # The measurement agrees with the brute force: 100 %, and fewer rows miss some.
    assert coverage(model, rows, 2).share == 1.0
    assert coverage(model, rows, 4, model.core).share == 1.0
    short = coverage(model, rows[: len(rows) // 2], 4, model.core)
    assert short.share < 1.0 and short.missing
    # Reasonable: within twice the largest core product's valid combinations.
    core_product = len({tuple(r[f] for f in model.core) for r in valid})
    assert len(rows) <= core_product and len(rows) < len(valid)


def test_array_is_deterministic_per_seed() -> None:
    model = _toy()
    assert covering_array(model, 0) == covering_array(_toy(), 0)
    assert covering_array(model, 0) != covering_array(model, 1)


def test_coverage_counts_partial_rows_and_names_the_missing() -> None:
    model = _toy()
    rows = [{"a": "a0", "b": "b0", "c": "c0", "d": "d0", "e": "e0"}, {"a": "a1"}]
    found = coverage(model, rows, 2)
    # Row one holds C(5, 2) = 10 pairs; row two holds none (one factor only).
    assert found.covered == 10 and found.total > 10 and len(found.missing) == 3
    assert all(len(c) == 2 for c in found.missing)


@pytest.mark.parametrize("op", SPECS)
def test_every_row_builds_a_valid_case_of_exactly_its_levels(op: str) -> None:
    rows = covering_rows(op)
    model = model_of(spec_of(op))
    assert all(model.valid(r) for r in rows)
    cases = covering_set(op).cases
    assert len(cases) == len(rows)
    for row, case in zip(rows, cases, strict=True):
        assert classify(case) == row
        diagonal_of(case.sizes, case.offset, case.dim1, case.dim2)  # a valid geometry
        assert case.layout.storage_size < 2**20  # small: the gate judges them all
    assert build(op, rows[0], 0) == cases[0]  # deterministic


def test_covering_cases_reach_full_three_way_and_core_four_way() -> None:
    measured = measure([c for op in SPECS for c in covering_set(op).cases])
    assert set(measured) == set(SPECS)
    for op, found in measured.items():
        for name, cov in found.items():
            assert cov.share == 1.0, (op, name, cov.missing)
        assert "3" in found and any(k.startswith("core") for k in found)
    lines = coverage_lines(measured)
    assert lines[0].startswith("diagonal: 2-way 100.0%")


def test_classify_leaves_out_what_the_model_lacks() -> None:
    case = covering_set("diagonal").cases[0]
    assert classify(case.replace(invalid="dims_equal")) == {}
    rank5 = case.replace(sizes=(*case.sizes, 1, 1, 1, 1)[:5])
    assert "rank" not in classify(rank5) and "offset" in classify(rank5)


def test_random_draws_tie_sizes_as_the_model_relates_them() -> None:
    """Plain draws make the model's size relations at a useful rate (about 1 in 16 each
    before what the budget refuses), where independent size draws almost never do."""
    from collections import Counter

    from hypothesis import HealthCheck, given, settings

    from diagfuzz.strategies import cases
    from diagfuzz.strategies._cases import tie_sizes

    seen: Counter[str] = Counter()

    @settings(max_examples=1500, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(cases("diagonal", ranks=(3, 4), boundary=False))
    def draw(case) -> None:
        seen[classify(case).get("sizes", "?")] += 1

    draw()
    total = sum(seen.values())
    for relation in ("offset_equal", "batch_equal", "square"):
        assert seen[relation] >= total // 50, (relation, seen)
    assert tie_sizes((2, 3, 4), 0, 1, 5, 2, 4096) == (5, 3, 4)  # other dim = |offset|
    assert tie_sizes((2, 3, 4), 0, 1, 5, 0, 4096) == (2, 3, 4)  # 0: no tie
    assert tie_sizes((2, 3, 4), 0, 1, 5000, 2, 4096) == (2, 3, 4)  # past the budget
