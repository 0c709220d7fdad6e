"""The huge tier: index_hash values, the Cases it draws, check_huge, and ``gate --huge``.

On a CPU the tier runs with a lowered threshold (``DIAGFUZZ_HUGE_THRESHOLD``, 2**16
elements): the same drawing, oracle and gate path on tensors of about 2**16 elements, and
the planted narrow-index kernel (``tests.faulty.int32_index``) wraps at 2**16 there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import examples.plain_torch as plain
from diagfuzz import oracles
from diagfuzz.core import huge
from diagfuzz.core.case import Case, Layout, Values, materialise
from diagfuzz.core.runtime import DEVICE
from diagfuzz.impl import triton_aten
from diagfuzz.specs import SPECS, spec_of
from diagfuzz.strategies import huge_cases
from oracles.huge import estimate_bytes

LOW = 2**16
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def lowered(monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setenv(huge.THRESHOLD_ENV, str(LOW))
    return LOW


@pytest.mark.parametrize("dtype", [torch.bool, torch.int8, torch.float16, torch.float32,
                                   torch.complex128])
def test_index_hash_is_the_same_bits_whatever_the_chunk(dtype: torch.dtype) -> None:
    whole = huge.word_view(huge.storage_of(dtype, 11, 3001))
    for chunk in (1, 7, 1000, 4096):
        assert torch.equal(huge.word_view(huge.storage_of(dtype, 11, 3001, chunk=chunk)), whole)
    assert not torch.equal(huge.word_view(huge.storage_of(dtype, 12, 3001)), whole)
    if dtype is torch.bool:
        assert set(whole.unique().tolist()) == {0, 1}  # real bools: 0 or 1 bytes


def test_a_case_of_index_hash_values_materialises_those_bits() -> None:
    case = Case("diagonal", (5, 6), 1, 0, 1, "int16", Layout((5, 6), (12, 2), 3, ("sliced",)),
                Values(9, "index_hash"))
    storage = huge.storage_of(torch.int16, 9, case.layout.storage_size)
    expected = storage.as_strided((5, 6), (12, 2), 3)
    assert torch.equal(materialise(case), expected)
    assert huge.first_change(storage, 9) == (-1, 0)
    storage[40] += 1
    assert huge.first_change(storage, 9, chunk=16) == (40, 1)


def test_every_op_gets_cases_past_the_threshold_within_the_memory_cap() -> None:
    cases = huge_cases(3, 4, threshold=huge.DEFAULT_THRESHOLD)
    assert cases == huge_cases(3, 4, threshold=huge.DEFAULT_THRESHOLD)  # seeded
    tiered = {op for op in SPECS if not spec_of(op).inplace}  # no in-place op has a tier
    assert {c.op for c in cases} == tiered and tiered & {"triu", "tril"}
    assert all(sum(c.op == op for c in cases) == 4 for op in tiered)
    t = huge.DEFAULT_THRESHOLD
    for case in cases:
        layouts = [case.layout, *(lay for _, lay, _ in case.others)]
        big = max(max(torch.Size(case.sizes).numel(), torch.Size(lay.shape).numel(),
                      lay.storage_size) for lay in layouts)
        assert big > t, case.describe()
        assert case.values.mode == "index_hash"
        assert estimate_bytes(case) <= huge.max_bytes(), case.describe()
    kinds = {k for c in cases for lay in [c.layout] for k in lay.kinds}
    assert {"expanded", "sliced", "offset", "contiguous"} <= kinds
    # Address ranges past 2**32 bytes, results past 2**31 elements, offsets at the edges.
    assert any(c.layout.storage_size * torch.empty(0, dtype=getattr(torch, c.dtype))
               .element_size() > 2**32 for c in cases)
    assert any(abs(c.offset) == c.sizes[0] - 1 for c in cases if len(c.sizes) == 2)


def test_a_declared_dtype_set_is_respected() -> None:
    cases = huge_cases(0, 2, threshold=LOW, ops=("diagonal_backward",),
                       dtypes=lambda op: ("float32", "float16"))
    assert [c.dtype for c in cases] == ["float16", "float16"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="the skip is for machines without CUDA")
def test_without_a_gpu_the_tier_is_skipped_with_its_reason(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(huge.THRESHOLD_ENV, raising=False)
    case = huge_cases(0, 1, ops=("diagonal",))[0]
    verdict = oracles.check_huge(case, plain, "cpu")
    assert verdict.ok and verdict.details["skipped"].startswith("needs a CUDA GPU")


def test_correct_impls_pass_every_lowered_case(lowered: int) -> None:
    # On the device diagfuzz's kernels are registered for (CUDA on a GPU machine).
    for case in huge_cases(0, 4):
        for impl in (plain, triton_aten):
            verdict = oracles.check_huge(case, impl, DEVICE)
            assert verdict.kind == "pass" and not verdict.details.get("skipped"), verdict


class _Broken:
    """plain PyTorch's diagonal_backward with one planted fault (``how``)."""

    uses_triton_registration = False

    def __init__(self, how: str) -> None:
        self.how = how

    def diagonal_backward(self, grad, sizes, offset, dim1, dim2):  # type: ignore[no-untyped-def]
        result = plain.diagonal_backward(grad, sizes, offset, dim1, dim2)
        if self.how == "bit":
            result.view(-1)[-1] = result.view(-1)[-1] ^ 1 if result.dtype != torch.bool \
                else ~result.view(-1)[-1]
        elif self.how == "layout":
            result = result.t().contiguous().t()
        elif self.how == "input":
            grad.view(-1)[0] = grad.view(-1)[0] ^ 1
        elif self.how == "alias":
            return grad
        return result


@pytest.mark.parametrize(("how", "check"), [("bit", "bitwise:aten"),
                                            ("layout", "metadata:strides"),
                                            ("input", "input-unchanged"),
                                            ("alias", "alias")])
def test_check_huge_catches_a_planted_fault(lowered: int, how: str, check: str) -> None:
    case = Case("diagonal_backward", (300, 300), -299, 0, 1, "int8",
                Layout.contiguous((1,)), Values(4, "index_hash"))
    verdict = oracles.check_huge(case, _Broken(how), "cpu")
    assert verdict.check == check, verdict
    if how == "bit":
        assert verdict.details["differing"] == 1
        assert verdict.details["first"][0]["index"] == [299, 299]


def test_the_memory_cap_skips_a_case(lowered: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(huge.MAX_GIB_ENV, "0.00001")
    case = huge_cases(0, 1, ops=("diag_embed",))[0]
    verdict = oracles.check_huge(case, plain, "cpu")
    assert verdict.ok and "exceeds the cap" in verdict.details["skipped"]


def test_gate_huge_finds_the_planted_narrow_index_with_reproducers(tmp_path: Path) -> None:
    env = {**os.environ, huge.THRESHOLD_ENV: str(LOW),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    (tmp_path / "corpus").mkdir()
    report = tmp_path / "gate.json"
    done = subprocess.run(
        [sys.executable, "-m", "diagfuzz", "gate", "--impl", "tests.faulty.int32_index:impl",
         "--huge", "--no-suite", "--no-compile", "--no-opinfo",
         "--no-sequences", "--no-covering", "--no-save",
         "--quiet",
         "--corpus", str(tmp_path / "corpus"), "--out", str(tmp_path / "out"),
         "--report", str(report)], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    data = json.loads(report.read_text())
    stage = next(s for s in data["stages"] if s["name"] == "huge tier")
    assert stage["cases"] == 8 and stage["failures"] >= 2, stage
    assert "huge-cases.jsonl" in stage["note"]
    found = {f["signature"]["op"] for f in data["findings"]}
    assert found == {"diagonal", "diagonal_backward"}, data["findings"]
    for finding in data["findings"]:
        assert finding["signature"]["check"] == "check_huge bitwise", finding
        assert finding["classification"]["label"] == "deterministic", finding
        repro = subprocess.run([sys.executable, finding["reproducer"]], cwd=ROOT, env=env,
                               capture_output=True, text=True, timeout=120)
        assert repro.returncode == 1, repro.stdout + repro.stderr


def _suite(tmp_path: Path, impl: str, *extra: str, threshold: int | None = LOW
           ) -> tuple[int, str, dict]:
    """The fuzz suite's huge item alone, as a user runs it, from ``tmp_path``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env.pop(huge.THRESHOLD_ENV, None)
    if threshold is not None:
        env[huge.THRESHOLD_ENV] = str(threshold)
    report = tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "diagfuzz", "--pyargs", "diagfuzz.suite",
         "--impl", impl, "-k", "huge", "-rs", "-p", "no:cacheprovider",
         f"--diagfuzz-root={tmp_path / 'runs'}", f"--diagfuzz-report={report}", *extra],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    data = json.loads(report.read_text()) if report.exists() else {}
    return done.returncode, done.stdout + done.stderr, data


def test_the_suite_runs_the_tier_on_request_and_reports_the_planted_bug(
        tmp_path: Path) -> None:
    code, output, report = _suite(tmp_path, "tests.faulty.int32_index:impl", "--diagfuzz-huge")
    assert code == 1, output
    found = report["findings"]
    assert found and all("test_huge" in f["test_ids"][0] for f in found), found
    repro = Path(found[0]["reproducer"])
    env = {**os.environ, huge.THRESHOLD_ENV: str(LOW),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    again = subprocess.run([sys.executable, str(repro)], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 1, again.stdout + again.stderr
    code, output, report = _suite(tmp_path, "examples.plain_torch:impl", "--diagfuzz-huge")
    assert code == 0 and report["findings"] == [], output


def test_the_tier_is_the_nightly_profiles_and_skips_without_a_gpu(tmp_path: Path) -> None:
    _, output, _ = _suite(tmp_path, "examples.plain_torch:impl")  # dev: deselected
    streams = len(SPECS) + 1  # each stream's shards, and test_huge and test_sequences
    assert f"{streams * 4 + 2} deselected" in output and "skipped" not in output, output
    code, output, _ = _suite(tmp_path, "examples.plain_torch:impl", "--hypothesis-profile",
                             "nightly", "--diagfuzz-budget", "10", threshold=None)
    if torch.cuda.is_available():  # the real tier: 24 Cases past 2**31 elements
        assert "1 passed" in output and code == 0, output
    else:
        assert "needs a CUDA GPU" in output and "1 skipped" in output and code == 0, output


@pytest.mark.skipif(torch.cuda.is_available(), reason="the skip is for machines without CUDA")
def test_a_skipped_tier_is_said_on_stderr_and_above_the_table(tmp_path: Path) -> None:
    """--huge without CUDA: the gate passes on what ran, and says twice what did not."""
    env = {k: v for k, v in os.environ.items() if k != huge.THRESHOLD_ENV}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])

    def gate(*options: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "diagfuzz", "gate", "--impl", "examples.plain_torch:impl",
             "--huge", "--no-compile", "--no-opinfo",
             "--no-sequences", "--no-covering", "--no-save", "-n", "0",
             *options],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)

    done = gate("--no-suite")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "huge tier: skipped: needs a CUDA GPU" in done.stderr
    assert "**Not run:** huge tier (needs a CUDA GPU" in done.stdout
    # Asked to, the gate refuses before anything runs: exit 3, with the reason.
    required = gate("--require-stages")
    assert required.returncode == 3, required.stdout + required.stderr
    assert "COULD NOT RUN" in required.stdout
    assert "--require-stages: huge tier: needs a CUDA GPU" in required.stdout
    assert "fuzz suite" not in required.stdout  # nothing ran, the suite included
