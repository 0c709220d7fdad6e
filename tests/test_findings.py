"""Failure signatures, findings and the compact block a person reads."""

from __future__ import annotations

import torch

from diagfuzz.core.bits import differing, symptom
from diagfuzz.core.case import Case, Layout, Values
from diagfuzz.core.origin import raise_origin
from diagfuzz.core.signature import Signature, cause_axes, check_class, signature_of
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


def test_signatures_group_by_cause_not_by_dtype_class_or_aten_wording() -> None:
    assert check_class("bitwise:aten") == check_class("bitwise:autograd") == "bitwise"
    assert check_class("compile:grad:bitwise:eager-grad") == "compile:grad:bitwise"
    assert check_class("metadata:strides") == "metadata:strides"
    # Two references, any dtypes, any symptom: one cause, what a fix changes.
    a = signature_of(_mismatch(_case("float16")))
    b = signature_of(Verdict("mismatch", "bitwise:aten", "", _case("float32"),
                             {"symptom": "values"}))
    assert a == b == Signature("diagonal", "mismatch", "bitwise", "wrong values")
    assert signature_of(_mismatch(_case("int8"))) == a
    for shown in ("signed-zero", "nan-payload", "zeroed"):
        assert signature_of(_mismatch(_case(), shown)) == a
    strides = signature_of(Verdict("mismatch", "metadata:strides", "", _case()))
    assert strides == Signature("diagonal", "mismatch", "metadata:strides", "wrong metadata")
    unwritten = signature_of(Verdict("unwritten", "sentinel", "", _case(),
                                     {"symptom": "zeroed"}))
    assert unwritten == Signature("diagonal", "unwritten", "sentinel")
    # A raise: its type and its origin, whatever the invalid class and aten's type.
    site = "mylib/diag.py:12 in diagonal"
    raised = signature_of(Verdict("error-parity", "error-parity", "", _case("complex64"),
                                  {"actual": {"type": "KeyError", "origin": site}}))
    assert raised.describe() == f"error-parity · raised KeyError · at {site}"
    wrong = signature_of(Verdict(
        "error-parity", "error-parity", "", _case(invalid="same_dims"),
        {"actual": {"type": "KeyError", "origin": site}, "expected": {"type": "RuntimeError"}}))
    assert wrong == raised
    elsewhere = signature_of(Verdict(
        "error-parity", "error-parity", "", _case(),
        {"actual": {"type": "KeyError", "origin": "mylib/diag.py:40 in diagonal"}}))
    assert elsewhere != raised
    lenient = signature_of(Verdict("error-parity", "error-parity", "", _case(
        invalid="non_tensor"), {"expected": {"type": "TypeError"}}))
    other_class = signature_of(Verdict("error-parity", "error-parity", "", _case(
        "int8", invalid="same_dims"), {"expected": {"type": "RuntimeError"}}))
    assert lenient == other_class
    assert lenient.trigger == "returned a result where aten raises"
    # One raise site is one fix whichever op reached it (a library's zeros that two ops
    # call); the finding counts the ops. Without an impl frame the op stays in the key.
    embed = _case().replace(op="diag_embed")
    other_op = signature_of(Verdict("error-parity", "error-parity", "", embed,
                                    {"actual": {"type": "KeyError", "origin": site}}))
    assert other_op == raised
    assert cause_axes(embed.to_dict(), {"actual": {"type": "KeyError", "origin": site}}
                      )["op"] == "diag_embed"
    torch_site = {"actual": {"type": "RuntimeError", "origin": "x.py:1 in f (no impl frame)"}}
    assert (signature_of(Verdict("error-parity", "error-parity", "", embed, torch_site))
            != signature_of(Verdict("error-parity", "error-parity", "", _case(), torch_site)))


def _raise_in_helper() -> None:
    raise ValueError("from the implementation")


def test_a_raise_site_is_the_innermost_frame_of_the_implementations_code() -> None:
    try:
        _raise_in_helper()
    except ValueError as exc:
        here = raise_origin(exc)
    assert here.startswith("tests/test_findings.py:") and here.endswith(" in _raise_in_helper")
    try:
        torch.zeros(2).view(3)  # raised inside torch, called from this frame
    except RuntimeError as exc:
        origin = raise_origin(exc)
    assert origin.startswith("tests/test_findings.py:") and "(no impl frame)" not in origin
    assert origin.endswith(" in test_a_raise_site_is_the_innermost_frame_of_the_implementations_"
                           "code")


def test_merging_adds_counts_and_keeps_the_best_representative() -> None:
    big = Finding.of(_mismatch(Case("diagonal", (5, 6), 0, 0, 1, "float32",
                                    Layout.contiguous((5, 6)))), "t[shard0]", count=4)
    small = Finding.of(_mismatch(_case("float16")), "t[shard1]", count=3)
    small.shrunk = True
    (merged,) = merge_findings([big, small])
    assert merged.count == 7 and merged.dtypes == {"float32": 4, "float16": 3}
    assert merged.case == small.case and merged.shrunk
    assert merged.test_ids == ["t[shard0]", "t[shard1]"]


def test_generated_code_is_not_a_raise_site(tmp_path) -> None:
    # A library that generates a module per variant (inductor, a code cache) and runs it:
    # the site is the library's call into it, whichever generated file raised.
    import importlib.util

    origins = set()
    for variant in ("a1b2", "c3d4"):
        path = tmp_path / "code_cache" / f"kernel_{variant}.py"
        path.parent.mkdir(exist_ok=True)
        path.write_text("def run(x):\n    assert x > 0, 'operand shapes mismatch'\n")
        spec = importlib.util.spec_from_file_location(f"kernel_{variant}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        try:
            module.run(-1)  # the call site: this line, for both variants
        except AssertionError as exc:
            origins.add(raise_origin(exc))
    (origin,) = origins
    assert origin.startswith("tests/test_findings.py:")
    assert origin.endswith(" in test_generated_code_is_not_a_raise_site")


def test_one_raise_site_is_one_finding_that_counts_its_classes() -> None:
    site = {"type": "KeyError", "origin": "mylib/diag.py:12 in diagonal"}
    complex_raise = Finding.of(Verdict("error-parity", "error-parity", "", _case("complex64"),
                                       {"actual": site}), count=10)
    invalid_raise = Finding.of(Verdict(
        "error-parity", "error-parity", "", _case("float32", invalid="dim_above_range"),
        {"actual": site, "expected": {"type": "IndexError"}}), count=2)
    same_dims = Finding.of(Verdict(
        "error-parity", "error-parity", "", _case("int8", invalid="same_dims"),
        {"actual": site, "expected": {"type": "RuntimeError"}}), count=3)
    other = Finding.of(Verdict(
        "error-parity", "error-parity", "", _case("float32", invalid="same_dims"),
        {"actual": {"type": "ValueError", "origin": "mylib/diag.py:30 in diagonal"},
         "expected": {"type": "RuntimeError"}}))
    merged = merge_findings([invalid_raise, complex_raise, same_dims, other])
    assert len(merged) == 2
    (one,) = [f for f in merged if f.signature.trigger == "raised KeyError"]
    assert one.count == 15
    assert one.dtypes == {"complex64": 10, "float32": 2, "int8": 3}
    assert one.classes == {"invalid class": {"valid": 10, "dim_above_range": 2, "same_dims": 3},
                           "aten raises": {"IndexError": 2, "RuntimeError": 3},
                           "op": {"diagonal": 15}}
    text = "\n".join(block(one, 1, 2))
    assert "covers   aten raises: RuntimeError 3, IndexError 2" in text
    assert "covers   Case class: valid 10, same_dims 3, dim_above_range 2" in text


def test_the_block_shows_the_whole_case_the_evidence_and_the_command() -> None:
    case = _case("float32", specials=((5, 0x80000000),))
    verdict = Verdict("mismatch", "bitwise:aten", "1 of 3 elements differ", case, {
        "symptom": "signed-zero", "differing": 1, "numel": 3,
        "first": [{"index": [1], "expected": "-0.0", "actual": "0.0",
                   "expected_bits": "0x80000000", "actual_bits": "0x00000000"}]})
    finding = Finding.of(verdict, "t[shard0]", count=5, dtypes={"float32": 3, "float16": 2})
    text = "\n".join(block(finding, 2, 3, "python repro_x.py"))
    assert text.startswith("[2/3] diagonal · mismatch · bitwise · wrong values  "
                           "(5 failing Cases drawn: float32 3, float16 2)")
    assert "\n  symptom  signed-zero: 5 Cases, first diagonal(input=[3, 4]" in text
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


def test_a_crash_shows_where_the_implementation_died() -> None:
    """faulthandler's dump ends in torch's module list; the finding shows the error line
    and the crashing thread's innermost frames instead (the implementation's first)."""
    from diagfuzz.harness.findings import stderr_lines

    tail = """Fatal Python error: Aborted

Thread 0x00007fa93e3ff6c0 (most recent call first):
  File "/x/diagfuzz/execution/child.py", line 55 in _watch_parent
  File "/usr/lib/python3.11/threading.py", line 982 in run

Current thread 0x00007fa95ca59b80 (most recent call first):
  File "/tmp/proj/mylib.py", line 15 in diagonal_backward
  File "/x/diagfuzz/specs/diagonal_backward.py", line 28 in call
  File "/x/oracles/reference.py", line 25 in call_op
  File "/x/oracles/checks.py", line 373 in call_impl
  File "/x/oracles/checks.py", line 347 in device_side
  File "<string>", line 1 in <module>

Extension modules: numpy._core._multiarray_umath, torch._C (total: 2)
"""
    lines = stderr_lines(tail)
    assert lines[0] == "Fatal Python error: Aborted"
    assert lines[1] == 'File "/tmp/proj/mylib.py", line 15 in diagonal_backward'
    assert len(lines) == 5 and not any("Extension" in line for line in lines)
    assert stderr_lines("a\nb\nRuntimeError: boom\n") == ["a", "b", "RuntimeError: boom"]


def test_one_value_bug_is_one_finding_that_lists_each_symptom_with_its_case() -> None:
    # One wrong element read: the values drawn decide the symptom, not the bug.
    shrunk = Finding.of(_mismatch(_case("float32"), "signed-zero"), "t[shard0]", count=14)
    shrunk.shrunk = True
    payload = Finding.of(_mismatch(_case("float16", offset=1), "nan-payload"), "t[shard1]",
                         count=3)
    bigger = Finding.of(_mismatch(_case("float64", storage_offset=4), "signed-zero"),
                        "t[shard1]", count=2)
    (one,) = merge_findings([payload, bigger, shrunk])
    assert one.count == 19 and one.signature.trigger == "wrong values"
    assert one.classes["symptom"] == {"signed-zero": 16, "nan-payload": 3}
    assert set(one.examples) == {"signed-zero", "nan-payload"}
    assert one.examples["signed-zero"]["shrunk"]  # the better Case of its symptom
    assert one.examples["signed-zero"]["case"] == shrunk.verdict["case"]
    assert one.examples["nan-payload"]["case"] == payload.verdict["case"]
    again = Finding.from_dict(one.to_dict())
    assert again.examples == one.examples
    text = "\n".join(block(one, 1, 1))
    assert text.count("\n  symptom  ") == 2
    assert "symptom  signed-zero: 16 Cases, shrunk diagonal(input=[3, 4], offset=0" in text
    assert "symptom  nan-payload: 3 Cases, first diagonal(input=[3, 4], offset=1" in text
    assert "covers   symptom" not in text


def test_the_one_line_case_names_the_sizes_of_the_tensor_the_op_reads() -> None:
    # JUnit names, reproducer titles, symptom lines: diag_embed's input is [3], not [3, 3].
    embed = Case("diag_embed", (3, 3), 0, 0, 1, "float32", Layout.contiguous((3,)))
    assert embed.describe() == "diag_embed(input=[3], offset=0, dim1=0, dim2=1, float32, " \
                               "contiguous)"
    backward = Case("diagonal_backward", (3, 4), 1, 0, 1, "float16", Layout.contiguous((3,)))
    assert backward.describe().startswith(
        "diagonal_backward(grad_output=[3], input_sizes=[3, 4], offset=1,")
    raw = _case(invalid="non_tensor", raw_args=(("input", 1.5),))
    assert raw.describe().startswith("diagonal(input=1.5, offset=0") and \
        raw.describe().endswith(" invalid=non_tensor")
