"""PyTorch's OpInfo samples as Cases: exact, judged bitwise, in the gate and ``replay``.

The samples need ``torch.testing._internal`` (so ``expecttest``, in the dev extra); the last
tests hide expecttest from a subprocess and check the stage is skipped with that reason.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from diagfuzz import oracles
from diagfuzz.core.case import Case
from diagfuzz.gate.stages import OPINFO_STAGE
from diagfuzz.impl import load_impl
from diagfuzz.specs import arguments
from diagfuzz.strategies import opinfo

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(bool(opinfo.unavailable()), reason=opinfo.unavailable())


@pytest.fixture(scope="module")
def samples() -> opinfo.Samples:
    return opinfo.load("cpu")


def test_every_sample_of_a_dtype_diagfuzz_has_becomes_a_case(samples: opinfo.Samples) -> None:
    assert not samples.skipped
    # Only complex32 (no diagfuzz dtype) is left out: every other call is expressible.
    assert set(samples.dropped) == {"complex32 sample sets (a dtype diagfuzz does not draw)"}
    kinds = {key.rsplit(" ", 1)[-1] for key in samples.sources}
    assert kinds == {"sample", "noncontiguous", "backward", "error"}
    assert {c.op for c in samples.cases} == {"diagonal", "diagonal_backward", "diag_embed",
                                              "diagonal_scatter", "diag", "diag_1d", "triu",
                                              "tril", "triu_", "tril_"}
    # Each triu/tril sample is also a Case of the in-place variant, as OpInfo runs it.
    by_op = {op: {c.replace(op=op.rstrip("_")) for c in samples.cases if c.op == op}
             for op in ("triu", "triu_", "tril", "tril_")}
    assert by_op["triu"] == by_op["triu_"] and by_op["tril"] == by_op["tril_"]
    assert len(samples.cases) == len(set(samples.cases)) > 1000


def test_a_case_rebuilds_its_sample_bit_for_bit_from_its_json() -> None:
    entry = next(e for e in opinfo.op_db_entries() if e.name == "diagonal_scatter")
    kind, twin = list(opinfo.samples_of(entry, torch.complex128))[1]
    assert kind == "noncontiguous" and not twin.input.is_contiguous()
    case = Case.from_json(json.loads(json.dumps(opinfo._checked(entry.name, twin).to_dict())))
    args = arguments(case, "cpu")
    for name, want in (("input", twin.input), ("src", twin.args[0])):
        got = args[name]
        assert (got.shape, got.stride(), got.storage_offset()) == (
            want.shape, want.stride(), want.storage_offset())
        assert torch.equal(torch.view_as_real(got).view(torch.int64),
                           torch.view_as_real(want).view(torch.int64))


def test_a_mapping_that_changes_the_call_is_left_out(monkeypatch) -> None:
    real = opinfo._case_of

    def off_by_one(name, sample, error):
        case = real(name, sample, error)
        return None if case is None else case.replace(offset=case.offset + 1)

    monkeypatch.setattr(opinfo, "_case_of", off_by_one)
    found = opinfo.load("cpu", ops={"diagonal"})
    # diagonal's samples all fail the check; only its error inputs (the offset is not
    # theirs to check... it is: every argument is compared) and backward Cases remain.
    assert not any(c.op == "diagonal" and not c.invalid for c in found.cases)
    assert sum(n for why, n in found.dropped.items() if "cannot express" in why) > 100


def test_a_plain_implementation_passes_every_case(samples: opinfo.Samples) -> None:
    impl = load_impl("examples.plain_torch:impl")
    failing = [v for v in (oracles.check(c, impl, "cpu") for c in samples.cases) if not v.ok]
    assert failing == []


def test_bitwise_judging_finds_what_assert_close_passes(samples: opinfo.Samples) -> None:
    impl = load_impl("tests.mutants.noncontiguous_result:impl")
    case = next(c for c in samples.cases if c.op == "diagonal_backward"
                and len(c.sizes) == 2 and c.sizes[0] != c.sizes[1])
    verdict = oracles.check(case, impl, "cpu")
    assert verdict.check == "metadata:strides"
    args = arguments(case, "cpu")
    geometry = (case.offset, case.dim1, case.dim2)
    actual = impl.diagonal_backward(args["grad_output"], list(case.sizes), *geometry)
    torch.testing.assert_close(actual, torch.ops.aten.diagonal_backward(
        args["grad_output"], list(case.sizes), *geometry), equal_nan=True)


def test_error_inputs_are_judged_by_error_parity(samples: opinfo.Samples) -> None:
    errors = [c for c in samples.cases if c.invalid]
    assert {c.invalid for c in errors} >= {"dim_above_range", "same_dims", "rank0"}
    correct = load_impl("examples.plain_torch:impl")
    assert all(oracles.check(c, correct, "cpu").ok for c in errors)
    broken = load_impl("tests.mutants.missing_dim_error:impl")
    kinds = {oracles.check(c, broken, "cpu").kind for c in errors if c.op == "diagonal"}
    assert "error-parity" in kinds


def _environment(hide_expecttest: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    paths = [str(REPO), env.get("PYTHONPATH", "")]
    if hide_expecttest is not None:
        blocker = hide_expecttest / "expecttest"
        blocker.mkdir(parents=True)
        (blocker / "__init__.py").write_text(
            "raise ModuleNotFoundError(\"No module named 'expecttest'\", name='expecttest')\n")
        paths.insert(0, str(hide_expecttest))
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def _gate(tmp_path: Path, impl: str, env: dict[str, str]) -> tuple[int, dict, str]:
    """The gate's OpInfo stage, with the stages that judge other Cases off."""
    proc = subprocess.run(
        [sys.executable, "-m", "diagfuzz", "gate", "--impl", impl, "--no-suite",
         "--no-compile", "--no-covering", "--no-sequences", "--no-save", "-n", "0",
         "--repeats", "2", "--quiet", "--report", "report.json"], cwd=tmp_path, env=env,
        capture_output=True, text=True, check=False, timeout=600)
    return proc.returncode, json.loads((tmp_path / "report.json").read_text()), proc.stdout


def test_the_gate_stage_reports_a_finding_with_a_failing_reproducer(tmp_path: Path) -> None:
    env = _environment()
    code, report, output = _gate(tmp_path, "tests.mutants.noncontiguous_result:impl", env)
    assert code == 1, output
    stage = next(s for s in report["stages"] if s["name"] == OPINFO_STAGE)
    assert stage["cases"] > 1000 and stage["failures"] > 0
    found = [f for f in report["findings"] if OPINFO_STAGE in f["stages"]]
    assert found and all(f["verdict"]["check"] == "metadata:strides" for f in found)
    repro = tmp_path / found[0]["reproducer"]
    rerun = subprocess.run([sys.executable, str(repro)], cwd=tmp_path, env=env,
                           capture_output=True, text=True, check=False, timeout=300)
    assert rerun.returncode == 1, rerun.stdout + rerun.stderr


def test_without_expecttest_the_stage_is_skipped_and_replay_says_why(tmp_path: Path) -> None:
    env = _environment(tmp_path / "hidden")
    code, report, output = _gate(tmp_path, "examples.plain_torch:impl", env)
    assert code == 0, output
    stage = next(s for s in report["stages"] if s["name"] == OPINFO_STAGE)
    assert stage["cases"] == 0 and "expecttest" in stage["skipped"]
    replay = subprocess.run([sys.executable, "-m", "diagfuzz", "replay", "--opinfo"],
                            cwd=tmp_path, env=env, capture_output=True, text=True,
                            check=False, timeout=300)
    assert replay.returncode == 4 and "expecttest" in replay.stderr, replay.stderr


def test_the_summary_counts_each_distinct_case_once(samples: opinfo.Samples) -> None:
    assert sum(samples.sources.values()) == len(samples.cases)


def test_ops_the_impl_lacks_are_a_usage_error(tmp_path: Path) -> None:
    """--ops naming only ops the impl lacks judges nothing: exit 4, not a pass."""
    env = _environment()
    for command in (["replay", "--opinfo", "--ops", "diag_embed"],
                    ["gate", "--ops", "diag_embed", "--plan"]):
        done = subprocess.run([sys.executable, "-m", "diagfuzz", *command, "--impl",
                               "tests.faulty.int32_index:impl"], cwd=tmp_path, env=env,
                              capture_output=True, text=True, check=False, timeout=300)
        assert done.returncode == 4, done.stdout + done.stderr
        assert "provides none of them" in done.stderr, done.stderr
