"""The per-Case shortcuts of the oracle-speed work change no outcome and lose no evidence.

* ``checks._twin_arguments``: the implementation's arguments of an invalid Case are a copy
  of the reference's (no second seeded materialisation), bit for bit and view for view,
  sharing no buffer with them.
* The executor's reply omits a Case the runner holds already (``Verdict.from_json(...,
  case=)``); the journal writes its records around the Case's cached JSON. Both must give
  what encoding the whole record gives.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from diagfuzz.case import call_arguments
from diagfuzz.core.case import Case, Layout, Values
from diagfuzz.core.verdict import Verdict
from diagfuzz.execution.journal import Journal, read, verdict_text
from diagfuzz.oracles import check_error_parity
from diagfuzz.oracles.checks import _twin_arguments
from diagfuzz.specs import spec_of


def _case(op: str = "diagonal", **changes: object) -> Case:
    layout = Layout((3, 4), (1, 3), 2, ("permuted", "offset"))
    base = Case(op=op, sizes=(3, 4) if op == "diagonal" else (4, 4, 3), offset=1, dim1=0,
                dim2=1, dtype="float32", layout=layout,
                values=Values(seed=5, mode="bits", specials=((2, 0x80000000),)))
    return base.replace(**changes)


CASES = [
    _case(),
    _case(dtype="complex128"),
    _case(dtype="bool", invalid="dim_above_range", dim1=7),
    _case(out_dtype="int32", invalid="out_dtype"),
    _case(out_device="meta", invalid="out_device"),
    _case("diagonal_backward", invalid="grad_output_shape"),
    _case(invalid="non_tensor", raw_args=(("input", (1, 2)),)),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.describe())
def test_twin_arguments_are_call_arguments_again_in_buffers_of_their_own(case: Case) -> None:
    first = call_arguments(case, "cpu")
    again = call_arguments(case, "cpu")
    twin = _twin_arguments(case, first)
    assert twin.keys() == again.keys()
    for name, want in again.items():
        got = twin[name]
        if not isinstance(want, torch.Tensor):
            assert got == want
            continue
        assert type(got) is torch.Tensor
        assert (got.dtype, got.device, got.shape, got.stride(), got.storage_offset()) == (
            want.dtype, want.device, want.shape, want.stride(), want.storage_offset())
        if want.device.type == "meta":
            continue
        assert bytes(got.untyped_storage()) == bytes(want.untyped_storage())
        mine = first[name].untyped_storage()
        assert mine.nbytes() == 0 or got.untyped_storage().data_ptr() != mine.data_ptr()
    name = spec_of(case.op).first.name
    if isinstance(first[name], torch.Tensor):  # the twin is a copy, not a view of first's
        first[name].untyped_storage()[0] = 1 + first[name].untyped_storage()[0] % 255
        assert bytes(twin[name].untyped_storage()) == bytes(again[name].untyped_storage())


class RaisesValueError:
    """An impl that refuses every call with the wrong exception type."""

    def diagonal(self, x: torch.Tensor, offset: int = 0, dim1: int = 0,
                 dim2: int = 1) -> torch.Tensor:
        raise ValueError("refused")

    def diagonal_backward(self, g: torch.Tensor, sizes: list[int], offset: int, dim1: int,
                          dim2: int) -> torch.Tensor:
        raise ValueError("refused")


def test_error_parity_still_tells_a_wrong_exception_type() -> None:
    case = _case(invalid="dim_above_range", dim1=7)  # aten raises IndexError
    verdict = check_error_parity(case, RaisesValueError(), "cpu")
    assert verdict.kind == "error-parity" and "ValueError" in verdict.message
    assert "IndexError" in verdict.message


@pytest.mark.parametrize("verdict", [
    Verdict("pass", "all", "", _case(), {"reference": "aten", "sentinel": "0xa5"}),
    Verdict("mismatch", "bitwise:aten", 'a "quoted" message', _case(dtype="float64"),
            {"first": [{"index": [0], "expected": "nan"}], 7: (1, 2)}),
    Verdict("pass"),
])
def test_verdict_text_without_case_and_journal_text_encode_the_same_values(
        verdict: Verdict, tmp_path: Path) -> None:
    whole = json.loads(verdict.to_json())
    assert json.loads(verdict_text(verdict)) == whole
    assert list(json.loads(verdict_text(verdict))) == sorted(whole)
    bare = json.loads(verdict.to_json_without_case())
    assert bare == {**whole, "case": None}
    if verdict.case is not None:  # (evidence comes back as JSON has it, either way)
        assert (Verdict.from_json(verdict.to_json_without_case(), verdict.case)
                == Verdict.from_json(verdict.to_json()))
    journal = Journal(tmp_path / "j.jsonl", run_seed=1, env={})
    seq = journal.begin(verdict.case or _case(), 'shard["0"]')
    journal.end(seq, verdict)
    journal.close()
    _, begun, ended = read(tmp_path / "j.jsonl")
    assert begun == {"type": "case", "seq": seq, "test_id": 'shard["0"]',
                     "case": json.loads((verdict.case or _case()).to_json())}
    assert ended == {"type": "verdict", "seq": seq, "kind": verdict.kind, "verdict": whole}
