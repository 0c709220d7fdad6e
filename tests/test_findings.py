"""Failure signatures, findings and the compact block a person reads."""

from __future__ import annotations

import torch

from diagfuzz.core.bits import differing, symptom
from diagfuzz.core.case import Case, Layout, Values
from diagfuzz.core.signature import Signature, check_class, dtype_family, signature_of
from diagfuzz.core.verdict import Verdict
from diagfuzz.harness.findings import Finding, block, merge_findings


def _case(dtype="float32", offset=0, storage_offset=0, invalid="", raw_args=(),
          specials=()) -> Case:
    return Case("diagonal", (3, 4), offset, 0, 1, dtype,
                Layout((3, 4), (4, 1), storage_offset,
                       ("offset",) if storage_offset else ("contiguous",)),
                Values(0, "normal", specials), invalid=invalid, raw_args=raw_args)


def _mismatch(case: Case, sym: str = "values") -> Verdict:
    return Verdict("mismatch", "bitwise:autograd", "bits differ", case, {"symptom": sym})


def test_symptoms_name_what_the_wrong_elements_look_like() -> None:
    def of(expected: list[float], actual: list[float], dtype=torch.float32) -> str:
        e, a = torch.tensor(expected, dtype=dtype), torch.tensor(actual, dtype=dtype)
        return symptom(e, a, differing(e, a))

    assert of([-0.0, 1.0], [0.0, 1.0]) == "signed-zero"
    nan = torch.tensor([float("nan")]).view(torch.int32)
    payload = (nan | 1).view(torch.float32)
    assert symptom(torch.tensor([float("nan")]), payload,
                   differing(torch.tensor([float("nan")]), payload)) == "nan-payload"
    assert of([1.0, 2.0, 3.0], [0.0, 0.0, 3.5]) == "zeroed"
    assert of([1.0, 2.0], [5.0, 7.0]) == "values"
    assert of([1, 0], [0, 1], dtype=torch.bool) == "values"  # a bool has no "zeroed"
    assert of([5, 6], [0, 0], dtype=torch.int16) == "zeroed"


def test_signatures_group_by_what_a_user_calls_the_bug() -> None:
    assert dtype_family("bfloat16") == "float" and dtype_family("float8_e5m2") == "float8"
    assert dtype_family("uint8") == "integer" and dtype_family("complex128") == "complex"
    assert check_class("bitwise:aten") == check_class("bitwise:autograd") == "bitwise"
    assert check_class("compile:grad:bitwise:eager-grad") == "compile:grad:bitwise"
    assert check_class("metadata:strides") == "metadata:strides"
    # Two references, two dtypes of one family, one symptom: one bug.
    a = signature_of(_mismatch(_case("float16")))
    b = signature_of(Verdict("mismatch", "bitwise:aten", "", _case("float32"),
                             {"symptom": "values"}))
    assert a == b == Signature("diagonal", "mismatch", "bitwise", "values", "float")
    assert signature_of(_mismatch(_case(), "signed-zero")) != a
    assert signature_of(_mismatch(_case("int8"))) != a
    raised = signature_of(Verdict("error-parity", "error-parity", "", _case("complex64"),
                                  {"actual": {"type": "KeyError", "message": ""}}))
    assert raised.describe() == "diagonal · error-parity · error-parity · raised KeyError · complex"
    wrong = signature_of(Verdict(
        "error-parity", "error-parity", "", _case(invalid="same_dims"),
        {"actual": {"type": "ValueError"}, "expected": {"type": "RuntimeError"}}))
    assert wrong.trigger == "same_dims: raised ValueError, aten RuntimeError"
    lenient = signature_of(Verdict("error-parity", "error-parity", "", _case(
        invalid="non_tensor"), {"expected": {"type": "TypeError"}}))
    assert lenient.trigger == "non_tensor: returned a result, aten raises TypeError"
    assert lenient.family == ""


def test_merging_adds_counts_and_keeps_the_best_representative() -> None:
    big = Finding.of(_mismatch(Case("diagonal", (5, 6), 0, 0, 1, "float32",
                                    Layout.contiguous((5, 6)))), "t[shard0]", count=4)
    small = Finding.of(_mismatch(_case("float16")), "t[shard1]", count=3)
    small.shrunk = True
    (merged,) = merge_findings([big, small])
    assert merged.count == 7 and merged.dtypes == {"float32": 4, "float16": 3}
    assert merged.case == small.case and merged.shrunk
    assert merged.test_ids == ["t[shard0]", "t[shard1]"]


def test_a_valid_cases_exception_explains_the_same_exception_on_invalid_cases() -> None:
    complex_raise = Finding.of(Verdict("error-parity", "error-parity", "", _case("complex64"),
                                       {"actual": {"type": "KeyError"}}), count=10)
    invalid_raise = Finding.of(Verdict(
        "error-parity", "error-parity", "", _case("complex64", invalid="dim_above_range"),
        {"actual": {"type": "KeyError"}, "expected": {"type": "IndexError"}}), count=2)
    other = Finding.of(Verdict(
        "error-parity", "error-parity", "", _case("float32", invalid="same_dims"),
        {"actual": {"type": "ValueError"}, "expected": {"type": "RuntimeError"}}))
    merged = merge_findings([invalid_raise, complex_raise, other])
    assert [f.signature.trigger for f in merged] == [
        "raised KeyError", "same_dims: raised ValueError, aten RuntimeError"]
    assert merged[0].count == 12


def test_findings_that_shrank_to_one_geometry_merge_across_dtype_families() -> None:
    found = []
    for dtype in ("float32", "int8", "bool"):
        finding = Finding.of(_mismatch(_case(dtype, storage_offset=1)), count=2)
        finding.shrunk = True
        found.append(finding)
    other_geometry = Finding.of(_mismatch(_case("float8_e5m2", offset=1)))
    other_geometry.shrunk = True
    merged = merge_findings([*found, other_geometry])
    families = sorted(f.signature.family for f in merged)
    assert families == ["bool+float+integer", "float8"]
    joined = next(f for f in merged if "+" in f.signature.family)
    assert joined.count == 6 and joined.case.dtype == "float32"


def test_the_block_shows_the_whole_case_the_evidence_and_the_command() -> None:
    case = _case("float32", specials=((5, 0x80000000),))
    verdict = Verdict("mismatch", "bitwise:aten", "1 of 3 elements differ", case, {
        "symptom": "signed-zero", "differing": 1, "numel": 3,
        "first": [{"index": [1], "expected": "-0.0", "actual": "0.0",
                   "expected_bits": "0x80000000", "actual_bits": "0x00000000"}]})
    finding = Finding.of(verdict, "t[shard0]", count=5, dtypes={"float32": 3, "float16": 2})
    text = "\n".join(block(finding, 2, 3, "python repro_x.py"))
    assert text.startswith("[2/3] diagonal · mismatch · bitwise · signed-zero · float  "
                           "(5 failing Cases drawn: float32 3, float16 2)")
    assert "storage[5] = 0x80000000 (-0.0)" in text
    assert "[1]: expected -0.0 (0x80000000), actual 0.0 (0x00000000)" in text
    assert "repro    python repro_x.py" in text and "not shrunk" in text
    assert "\n  case     diagonal(" in text
    finding.shrunk = True  # the Case shown is Hypothesis' smallest: labelled so
    shrunk = "\n".join(block(finding, 2, 3))
    assert "\n  shrunk   diagonal(" in shrunk and "not shrunk" not in shrunk
    raw = _case(invalid="non_tensor", raw_args=(("input", 1.5),))
    invalid = Finding.of(Verdict("error-parity", "error-parity", "returned a result", raw,
                                 {"expected": {"type": "TypeError", "message": "bad"}}))
    text = "\n".join(block(invalid, 1, 1))
    assert "diagonal(input=1.5, offset=0, dim1=0, dim2=1)  [invalid: non_tensor]" in text
    assert "aten     TypeError: bad" in text
