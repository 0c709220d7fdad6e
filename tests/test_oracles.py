"""Each oracle passes a correct result and FAILS on a hand-made wrong one, with evidence."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

import pytest
import torch

import diagfuzz.ops as ops
from diagfuzz import oracles
from diagfuzz.core.case import Case, Layout, Values, materialise
from diagfuzz.core.verdict import Verdict
from diagfuzz.core.words import as_words
from diagfuzz.impl import aten, triton_aten
from diagfuzz.oracles.checks import _relations
from diagfuzz.oracles.sentinel import SentinelAllocations, choose_sentinel
from diagfuzz.specs import diagonal as diagonal_spec
from diagfuzz.specs import diagonal_backward as backward_spec
from diagfuzz.specs import index_reference

DEVICE = ops.DEVICE
F32_NEG_ZERO, F32_NAN_PAYLOAD = 0x80000000, 0x7FC00001


def fwd(sizes=(3, 4), offset=0, dim1=0, dim2=1, dtype="float32", layout=None,
        **values: Any) -> Case:
    """A diagonal Case (contiguous input unless ``layout``)."""
    return Case("diagonal", tuple(sizes), offset, dim1, dim2, dtype,
                layout or Layout.contiguous(tuple(sizes)), Values(**values))


def bwd(sizes=(3, 4), offset=0, dim1=0, dim2=1, dtype="float32", layout=None,
        **values: Any) -> Case:
    """A diagonal_backward Case (contiguous grad_output unless ``layout``)."""
    geo = index_reference.geometry(tuple(sizes), offset, dim1, dim2)
    return Case("diagonal_backward", tuple(sizes), offset, dim1, dim2, dtype,
                layout or Layout.contiguous(geo.shape), Values(**values))


class Hand:
    """aten's result passed through ``fault`` (the hand-made wrong result)."""

    uses_triton_registration = False

    def __init__(self, fault: Callable[..., Any]) -> None:
        self.fault = fault

    def diagonal(self, x, offset=0, dim1=0, dim2=1):
        return self.fault(aten.diagonal(x, offset, dim1, dim2), x)

    def diagonal_backward(self, g, sizes, offset, dim1, dim2):
        return self.fault(aten.diagonal_backward(g, sizes, offset, dim1, dim2), g)


def flip(flat_index: int, mask: int = 1) -> Callable[..., torch.Tensor]:
    """A fault that XORs ``mask`` into the lowest word of one element."""
    def fault(result: torch.Tensor, _: torch.Tensor) -> torch.Tensor:
        out = result.clone()
        as_words(out).reshape(out.numel(), -1)[flat_index, 0] ^= mask
        return out
    return fault


def assert_fails(verdict: Verdict, kind: str, check_prefix: str) -> None:
    assert verdict.kind == kind, str(verdict)
    assert verdict.check.startswith(check_prefix), str(verdict)
    assert verdict.case is not None
    json.dumps(verdict.details)  # evidence is JSON
    assert Verdict.from_json(verdict.to_json()) == verdict
    assert verdict.to_json() == _asdict_json(verdict)  # the direct build changes no byte


def _asdict_json(verdict: Verdict) -> str:
    """Verdict.to_json as it was written first, through dataclasses.asdict."""
    data = dataclasses.asdict(verdict)
    data["case"] = json.loads(verdict.case.to_json()) if verdict.case else None
    return json.dumps(data, sort_keys=True, default=repr)


def test_verdict_json_converts_a_dataclass_in_its_evidence_like_asdict() -> None:
    verdict = Verdict("mismatch", "values", "m", fwd(), {"found": [Layout.contiguous((2,))],
                                                          "n": (1, 2)})
    assert verdict.to_json() == _asdict_json(verdict)
    assert json.loads(verdict.to_json())["details"]["found"][0]["shape"] == [2]


# --- passes ------------------------------------------------------------------------------

CORRECT_CASES = [
    fwd(),
    fwd((2, 3, 4), -1, 2, 0, "complex128", mode="bits"),
    fwd((4, 4), 1, 1, 0, "bool"),
    fwd((5, 3), 7, 0, 1),  # empty diagonal
    bwd((3, 4, 5), 1, 0, 2, "float16", mode="bits"),
    bwd((4, 3), -2, -1, -2, "int64"),
    bwd((3, 3), 0, 0, 1, "float8_e4m3fn", mode="bits"),
    bwd((3, 4), 0, 0, 1, layout=Layout((3,), (3,), 1, ("sliced",))),  # strided grad
]


@pytest.mark.parametrize("impl", [aten, triton_aten], ids=["aten", "triton_aten"])
@pytest.mark.parametrize("case", CORRECT_CASES, ids=Case.describe)
def test_correct_results_pass(impl: Any, case: Case) -> None:
    verdict = oracles.check(case, impl, DEVICE)
    assert verdict.ok, f"{verdict}\n{verdict.details}"


# --- (3) bitwise -------------------------------------------------------------------------

def test_one_flipped_bit_is_named_with_index_values_and_hex() -> None:
    case = fwd((3, 4), 0, 0, 1, "float32")
    verdict = oracles.check(case, Hand(flip(2)), DEVICE)
    assert_fails(verdict, "mismatch", "bitwise")
    assert verdict.details["differing"] == 1
    first = verdict.details["first"][0]
    assert first["index"] == [2]
    expected = materialise(case)[2, 2].view(torch.int32).item() & 0xFFFFFFFF
    assert first["expected_bits"] == f"0x{expected:08x}"
    assert first["actual_bits"] == f"0x{expected ^ 1:08x}"


@pytest.mark.parametrize("special,replacement", [
    (F32_NEG_ZERO, 0.0),                   # -0.0 written as +0.0
    (F32_NAN_PAYLOAD, float("nan")),       # NaN payload canonicalised
])
def test_signed_zero_and_nan_payload_count(special: int, replacement: float) -> None:
    case = bwd((3, 3), 0, 0, 1, "float32", specials=((1, special),))

    def fault(result: torch.Tensor, _: torch.Tensor) -> torch.Tensor:
        out = result.clone()
        out[1, 1] = replacement
        return out

    verdict = oracles.check(case, Hand(fault), DEVICE)
    assert_fails(verdict, "mismatch", "bitwise")
    assert verdict.details["first"][0]["expected_bits"] == f"0x{special:08x}"


def test_bool_byte_value_counts() -> None:
    case = fwd((3, 3), 0, 0, 1, "bool", specials=((0, 1), (4, 1), (8, 1)))

    def fault(result: torch.Tensor, _: torch.Tensor) -> torch.Tensor:
        out = result.clone()
        out.view(torch.uint8)[0] = 2  # a "True" byte that is not 0x01
        return out

    verdict = oracles.check(case, Hand(fault), DEVICE)
    assert_fails(verdict, "mismatch", "bitwise")
    assert verdict.details["first"][0]["actual_bits"] == "0x02"


def test_complex128_compares_both_words() -> None:
    case = fwd((2, 2), 0, 0, 1, "complex128")

    def fault(result: torch.Tensor, _: torch.Tensor) -> torch.Tensor:
        out = result.clone()
        torch.view_as_real(out).view(torch.int64)[1, 1] ^= 1  # imaginary part of element 1
        return out

    verdict = oracles.check(case, Hand(fault), DEVICE)
    assert_fails(verdict, "mismatch", "bitwise")
    assert verdict.details["first"][0]["index"] == [1]
    assert "|" in verdict.details["first"][0]["actual_bits"]


@pytest.mark.parametrize("fault,field", [
    (lambda r, _: r.to(torch.float64), "dtype"),
    (lambda r, _: r.reshape(-1)[:-1] if r.numel() else r, "shape"),
    (lambda r, _: r.t().contiguous().t(), "strides"),
    (lambda r, _: torch.empty_like(r, device="meta"), "device"),
    (lambda r, _: r.tolist(), None),
])
def test_metadata(fault: Callable[..., Any], field: str | None) -> None:
    verdict = oracles.check(bwd((3, 4), 0, 0, 1), Hand(fault), DEVICE)
    assert_fails(verdict, "mismatch", "metadata")
    if field:
        assert verdict.details["field"] == field


def test_alias_with_the_input() -> None:
    class View(Hand):
        def diagonal(self, x, offset=0, dim1=0, dim2=1):
            return torch.diagonal(x, offset, dim1, dim2)

    assert_fails(oracles.check(fwd((3, 3)), View(None), DEVICE), "alias", "alias")


def test_input_must_not_change() -> None:
    def fault(result: torch.Tensor, source: torch.Tensor) -> torch.Tensor:
        source.view(-1)[0] = 7
        return result

    verdict = oracles.check(fwd((3, 3)), Hand(fault), DEVICE)
    assert_fails(verdict, "mismatch", "input-unchanged")


# --- (4) unwritten and out-of-bounds -----------------------------------------------------

class LeavesOneUnwritten:
    """Allocates with torch.empty and writes every element but ``skip`` (flat)."""

    uses_triton_registration = False

    def __init__(self, skip: int = -1) -> None:
        self.skip = skip

    def _fill(self, ref: torch.Tensor) -> torch.Tensor:
        out = torch.empty(ref.shape, dtype=ref.dtype, device=ref.device)
        keep = torch.ones(ref.numel(), dtype=torch.bool)
        keep[self.skip] = False
        out.view(-1)[keep] = ref.reshape(-1)[keep]
        return out

    def diagonal(self, x, offset=0, dim1=0, dim2=1):
        return self._fill(aten.diagonal(x, offset, dim1, dim2))

    def diagonal_backward(self, g, sizes, offset, dim1, dim2):
        return self._fill(aten.diagonal_backward(g, sizes, offset, dim1, dim2))


def test_one_unwritten_element_fails_even_off_the_diagonal() -> None:
    # Off a backward's diagonal the right value is +0.0, what fresh malloc pages hold.
    verdict = oracles.check(bwd((4, 4)), LeavesOneUnwritten(1), DEVICE)
    assert_fails(verdict, "unwritten", "sentinel")
    assert verdict.details["sentinel_elements"] == 1


def test_unwritten_fails_when_the_reference_holds_the_preferred_sentinel() -> None:
    # The expected last element is 0xa5a5a5a5: the oracle must pick another sentinel.
    case = fwd((3, 3), 0, 0, 1, "int32", specials=((8, 0xA5A5A5A5),))
    verdict = oracles.check(case, LeavesOneUnwritten(-1), DEVICE)
    assert_fails(verdict, "unwritten", "sentinel")
    assert verdict.details["sentinel"] != "0xa5"


def test_unwritten_fails_when_every_byte_value_occurs() -> None:
    # A uint8 diagonal holding all 256 values: no free sentinel, so two runs.
    specials = tuple((i * 257, i) for i in range(256))
    case = fwd((256, 256), 0, 0, 1, "uint8", specials=specials)
    assert choose_sentinel(materialise(case).diagonal()) is None
    for skip in (0, 0xA5, 0x5A):  # whatever the unwritten element should have held
        verdict = oracles.check(case, LeavesOneUnwritten(skip), DEVICE)
        assert verdict.kind == "unwritten", str(verdict)
        assert verdict.details["differing"] == 1


def test_choose_sentinel_avoids_every_uniform_reference_element() -> None:
    ref = torch.tensor([0xA5A5A5A5 - 2**32, 0x5A5A5A5A], dtype=torch.int32)
    assert choose_sentinel(ref) == 0xC3
    assert choose_sentinel(torch.tensor([1, 2], dtype=torch.int64)) == 0xA5


def test_sentinel_fills_every_factory_and_guards_both_ends() -> None:
    with SentinelAllocations(0x3C) as alloc:
        made = [torch.empty(5, dtype=torch.int16), torch.empty_like(torch.zeros(2, 3)),
                torch.zeros(4).new_empty(3, dtype=torch.float64),
                torch.empty_strided((2, 2), (1, 2))]
        assert alloc.guard_violations() == []
        past_end = made[0].as_strided((6,), (1,))
        past_end[5] = 0
    for t in made:
        assert (t.contiguous().view(torch.uint8) == 0x3C).all()
    found = alloc.guard_violations()
    assert len(found) == 1 and found[0]["bytes_after_end"] == [0, 1]


def test_write_past_the_end_of_the_result_fails() -> None:
    def fault(result: torch.Tensor, _: torch.Tensor) -> torch.Tensor:
        out = torch.empty(result.shape, dtype=result.dtype, device=result.device)
        out.copy_(result)
        out.as_strided((out.numel() + 1,), (1,))[-1] = 0
        return out

    assert_fails(oracles.check(bwd((3, 3)), Hand(fault), DEVICE), "mismatch", "out-of-bounds")


# --- (5) error parity --------------------------------------------------------------------

INVALID = fwd((3, 4), 0, 0, 5).replace(invalid="dim_above_range")


def test_error_parity_passes_the_same_exception_type() -> None:
    assert oracles.check(INVALID, aten, DEVICE).ok
    assert oracles.check(INVALID, triton_aten, DEVICE).ok


def test_returning_a_result_where_aten_raises_fails() -> None:
    class Lenient(Hand):
        def diagonal(self, x, offset=0, dim1=0, dim2=1):
            return aten.diagonal(x, offset, dim1 % x.dim(), dim2 % x.dim())

    verdict = oracles.check(INVALID, Lenient(None), DEVICE)
    assert_fails(verdict, "error-parity", "error-parity")
    assert verdict.details["expected"]["type"] == "IndexError"


def test_raising_another_exception_type_fails() -> None:
    class Wrong(Hand):
        def diagonal(self, x, offset=0, dim1=0, dim2=1):
            raise ValueError("dim out of range")

    verdict = oracles.check(INVALID, Wrong(None), DEVICE)
    assert_fails(verdict, "error-parity", "error-parity")
    assert verdict.details["actual"]["type"] == "ValueError"


def test_raising_on_a_valid_case_fails() -> None:
    def fault(result: torch.Tensor, _: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("kernel refused")

    assert_fails(oracles.check(fwd(), Hand(fault), DEVICE), "error-parity", "error-parity")


# --- (6) dispatch proof ------------------------------------------------------------------

def test_dispatch_fails_when_the_kernel_did_not_run() -> None:
    class Fallback(Hand):
        uses_triton_registration = True

    verdict = oracles.check(fwd(), Fallback(lambda r, _: r), DEVICE)
    assert_fails(verdict, "dispatch", "dispatch")
    assert oracles.check(fwd(), triton_aten, DEVICE).ok


# --- (2) references and metamorphic relations --------------------------------------------

def test_reference_disagreement_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    real = index_reference.diagonal
    monkeypatch.setattr(index_reference, "diagonal",
                        lambda x, case: flip(0)(real(x, case), x))
    verdict = oracles.check(fwd(), aten, DEVICE)
    assert_fails(verdict, "mismatch", "reference:index-vs-aten")


def test_off_diagonal_must_be_zero_bits() -> None:
    case = bwd((3, 3))
    grad = materialise(case)
    result = aten.diagonal_backward(grad, [3, 3], 0, 0, 1)
    result[0, 1] = -0.0
    found = _relations(case, {"grad_output": grad}, result)
    assert found and found[0] == "metamorphic:off-diagonal-zero"
    assert found[2]["first"][0]["index"] == [0, 1]


def test_round_trip_must_give_grad_back() -> None:
    case = bwd((3, 3))
    grad = materialise(case)
    result = aten.diagonal_backward(grad, [3, 3], 0, 0, 1)
    assert _relations(case, {"grad_output": grad}, result) is None
    result[2, 2] = 5.0
    found = backward_spec.round_trip(case, {"grad_output": grad}, result)
    assert found and found[1]["first"][0]["index"] == [2]


def test_copy_must_equal_the_view() -> None:
    case = fwd((3, 3))
    x = materialise(case)
    found = _relations(case, {"input": x}, torch.zeros(3))
    assert found and found[0].startswith("metamorphic:diagonal_copy")
    assert diagonal_spec.copy_equals_view(case, {"input": x}, torch.zeros(3))


# --- .out overloads ----------------------------------------------------------------------

def test_out_overload_is_judged_like_the_functional_one() -> None:
    case = fwd((3, 4), 1, 0, 1).replace(out_dtype="float32")
    assert oracles.check(case, triton_aten, DEVICE).ok

    class OutLeavesAll(Hand):
        def diagonal_out(self, x, offset=0, dim1=0, dim2=1, *, out):
            return out  # never writes: out still holds the sentinel

    verdict = oracles.check(case, OutLeavesAll(None), DEVICE)
    assert_fails(verdict, "unwritten", "sentinel")


def test_out_of_another_dtype_needs_aten_error() -> None:
    case = fwd((3, 4)).replace(out_dtype="float64", invalid="out_dtype")
    assert oracles.check(case, triton_aten, DEVICE).ok

    class IgnoresOutDtype(Hand):
        def diagonal_out(self, x, offset=0, dim1=0, dim2=1, *, out):
            return out.resize_(0)

    assert_fails(oracles.check(case, IgnoresOutDtype(None), DEVICE), "error-parity",
                 "error-parity")


def test_verdict_evidence_is_written_as_json_has_it() -> None:
    """Namedtuples become lists and integer keys strings (sorted as text), in to_json and in
    the journal's copy alike: both are the bytes a JSON round trip of the evidence gives."""
    from collections import namedtuple

    Pair = namedtuple("Pair", "a b")
    verdict = Verdict("mismatch", "values", "m", fwd(),
                      {"pair": Pair(1, 2), "by_index": {10: "x", 9: "y"}})
    data = json.loads(verdict.to_json())
    assert data["details"] == {"pair": [1, 2], "by_index": {"10": "x", "9": "y"}}
    assert list(data["details"]["by_index"]) == ["10", "9"]
    assert json.dumps(verdict.to_dict(), sort_keys=True, default=repr) == verdict.to_json()


def test_choose_sentinel_reads_words_whose_size_one_dim_has_stride_zero() -> None:
    # A result of shape [n, 1] with stride 0 on its last dim (aten keeps an expanded size-1
    # dim's stride) holding the preferred sentinel: its words must still view as bytes.
    ref = torch.full((5, 1), 0xA5A5 - 2**16, dtype=torch.int16).as_strided((5, 1), (1, 0))
    assert choose_sentinel(ref) == 0x5A
    assert choose_sentinel(ref.view(torch.float16)) == 0x5A


@pytest.mark.parametrize("impl", [aten, triton_aten], ids=["aten", "triton"])
def test_scatter_into_an_expanded_size_one_dim_holding_the_sentinel_passes(impl: Any) -> None:
    # Drawn by the nightly profile on an H200 (shape [356973, 1], strides [1, 0]), where
    # the oracle itself raised; here small, the input holding 0xa5a5 so the slow path runs.
    case = Case.from_json({
        "op": "diagonal_scatter", "dtype": "float16", "sizes": [8, 1], "offset": 7,
        "dim1": 1, "dim2": 0, "invalid": "", "out_device": "", "out_dtype": "",
        "raw_args": [], "version": 2,
        "layout": {"kinds": ["expanded"], "shape": [8, 1], "storage_offset": 0,
                   "strides": [1, 0]},
        "values": {"mode": "bits", "seed": 3, "specials": [[2, 0xA5A5]]},
        "others": [{"name": "src", "layout": {"kinds": ["sliced"], "shape": [1],
                                             "storage_offset": 0, "strides": [3]},
                    "values": {"mode": "normal", "seed": 5, "specials": []}}]})
    verdict = oracles.check(case, impl, DEVICE)
    assert verdict.kind == "pass", str(verdict)
    assert verdict.details["sentinel"] != "0xa5"
