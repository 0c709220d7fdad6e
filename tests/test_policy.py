"""The oracle's policy on other people's code: error parity at the layer users call, metadata
that matters, capability declarations.

Each rule is shown both ways: the plain PyTorch implementation (``examples.plain_torch``),
written the way a user writes it, passes; a broken one fails for the reason the rule names.
"""

from __future__ import annotations

import sys
import types
from typing import ClassVar

import pytest
import torch

import diagfuzz.ops as ops
from diagfuzz import oracles
from diagfuzz.core.case import Case, Layout, Values
from diagfuzz.gate import error_parity_cases
from diagfuzz.impl import ImplError, load_impl, unsupported
from diagfuzz.oracles.policy import BINDING_CLASSES, exception_chain, raised_as
from examples import plain_torch
from tests.mutants._base import Correct

DEVICE = ops.DEVICE


def _bwd(sizes=(3, 4), grad=(3,), **kw) -> Case:
    layout = kw.pop("layout", None) or Layout.contiguous(grad)
    return Case("diagonal_backward", tuple(sizes), kw.pop("offset", 0), kw.pop("dim1", 0),
                kw.pop("dim2", 1), kw.pop("dtype", "float32"), layout, **kw)


def _fwd(sizes=(3, 4), **kw) -> Case:
    layout = kw.pop("layout", None) or Layout.contiguous(tuple(sizes))
    return Case("diagonal", tuple(sizes), kw.pop("offset", 0), kw.pop("dim1", 0),
                kw.pop("dim2", 1), kw.pop("dtype", "float32"), layout, **kw)


# --- error parity -----------------------------------------------------------------------

@pytest.mark.parametrize("case", error_parity_cases(), ids=Case.describe)
def test_plain_pytorch_passes_every_error_parity_case(case: Case) -> None:
    verdict = oracles.check(case, plain_torch.impl, DEVICE)
    assert verdict.kind == "pass", verdict


def test_binding_level_classes_need_only_a_raise_and_strict_wants_the_bindings_types() -> None:
    case = _bwd(invalid="non_tensor", raw_args=(("grad_output", 1.5),))

    class RaisesAttributeError(Correct):
        def diagonal_backward(self, grad_output, *args):
            return grad_output.new_zeros(3)  # 1.5 has no new_zeros: AttributeError

    impl = RaisesAttributeError()
    plain = oracles.check(case, impl, DEVICE)
    assert plain.kind == "pass" and plain.details["actual"]["type"] == "AttributeError"
    strict = oracles.check(case, impl, DEVICE, strict=True)
    assert strict.kind == "error-parity" and "--diagfuzz-strict" in strict.message
    # torch.diagonal itself raises TypeError for a non-tensor: right in strict mode too.
    forward = _fwd(invalid="non_tensor", raw_args=(("input", 1.5),))
    assert oracles.check(forward, plain_torch.impl, DEVICE, strict=True).kind == "pass"
    assert {"non_tensor", "non_integer", "int_overflow"} == BINDING_CLASSES


def test_returning_a_result_for_a_non_tensor_is_a_finding() -> None:
    case = _bwd(invalid="non_tensor", raw_args=(("grad_output", 1.5),))

    class Lenient(Correct):
        def diagonal_backward(self, grad_output, input_sizes, offset, dim1, dim2):
            return torch.zeros(input_sizes)

    verdict = oracles.check(case, Lenient(), DEVICE)
    assert verdict.kind == "error-parity" and "returned a result" in verdict.message


@pytest.mark.parametrize(("invalid", "case_args", "raised"), [
    ("same_dims", {"dim1": 1, "dim2": -1}, ValueError("diagonal dimensions cannot be identical")),
    ("grad_output_shape", {"layout": Layout.contiguous((2,))}, AssertionError("shape")),
    ("dim_above_range", {"dim1": 5}, KeyError(5)),
])
def test_value_level_classes_keep_atens_exact_type(invalid: str, case_args: dict,
                                                   raised: BaseException) -> None:
    case = _bwd(invalid=invalid, **case_args)

    class WrongType(Correct):
        def diagonal_backward(self, *args):
            raise raised

    verdict = oracles.check(case, WrongType(), DEVICE)
    assert verdict.kind == "error-parity", verdict
    assert verdict.details["actual"]["type"] == type(raised).__name__
    assert verdict.details["level"] == "value"


def test_wrapped_exceptions_are_unwrapped_before_comparing() -> None:
    case = _fwd(dim1=2, invalid="dim_above_range")
    # A compiler's wrapper that re-raises "from None", as torch._dynamo's do.
    wrapper = type("TorchRuntimeError", (RuntimeError,), {"__module__": "torch._dynamo.exc"})

    class Wrapped(Correct):
        def __init__(self, how: str) -> None:
            self.how = how

        def diagonal(self, x, offset=0, dim1=0, dim2=1):
            try:
                return torch.diagonal(x, offset, dim1, dim2).clone()
            except IndexError as exc:
                if self.how == "cause":
                    raise RuntimeError("wrapped") from exc
                raise wrapper("wrapped") from None

    for how in ("cause", "dynamo"):
        verdict = oracles.check(case, Wrapped(how), DEVICE)
        assert verdict.kind == "pass", (how, verdict)
        assert verdict.details["unwrapped"] == "IndexError"
    # A plain context (raised while handling, no wrapper, no "from") is not unwrapped.
    try:
        try:
            raise IndexError("inner")
        except IndexError:
            raise AssertionError("outer") from None
    except AssertionError as exc:
        assert raised_as(exc, IndexError) is None
        assert [type(e) for e in exception_chain(exc)] == [AssertionError]


# --- metadata ---------------------------------------------------------------------------

def test_strides_that_address_nothing_are_not_compared() -> None:
    class OddStrides(Correct):
        def finish(self, result):
            # Size-1 dims and empty results: any stride addresses the same (no) elements.
            if result.numel() == 0 or all(n == 1 for n in result.shape):
                return result.as_strided(result.shape, [7] * result.dim())
            return result

    for case in (_fwd((1, 1)), _fwd((2, 3, 1), dim1=0, dim2=2), _fwd((3, 4), offset=9),
                 _bwd((1, 1), grad=(1,))):
        verdict = oracles.check(case, OddStrides(), DEVICE)
        assert verdict.kind == "pass", (case.describe(), verdict)


def test_a_stride_that_moves_an_address_and_a_storage_offset_are_compared() -> None:
    class Transposed(Correct):
        def finish(self, result):
            return result.t().contiguous().t() if result.dim() == 2 else result

    verdict = oracles.check(_fwd((3, 4, 5), dim1=0, dim2=1), Transposed(), DEVICE)
    assert verdict.kind == "mismatch" and verdict.check == "metadata:strides"

    class Shifted(Correct):
        def allocate(self, sizes, dtype, device):
            n = 1
            for s in sizes:
                n *= s
            return torch.empty(n + 1, dtype=dtype, device=device)[1:].view(tuple(sizes))

    verdict = oracles.check(_fwd((3, 4)), Shifted(), DEVICE)
    assert verdict.kind == "mismatch" and verdict.check == "metadata:storage_offset"


# --- capability declarations ------------------------------------------------------------

def _module(name: str, **attrs: object) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    sys.modules[name] = module
    return module


def test_declared_dtypes_make_other_cases_unsupported_and_strict_judges_them() -> None:
    class Floats(Correct):
        dtypes = ("float16", torch.bfloat16, "float32")

    impl = Floats()
    complex_case = _fwd(dtype="complex64")
    verdict = oracles.check(complex_case, impl, DEVICE)
    assert verdict.kind == "unsupported" and verdict.ok and verdict.unsupported
    assert "complex64" in verdict.message
    assert oracles.check(complex_case, impl, DEVICE, strict=True).kind == "pass"
    assert oracles.check(_fwd(dtype="bfloat16"), impl, DEVICE).kind == "pass"
    assert unsupported(impl, _fwd()) == ""


def test_per_op_declarations_and_the_supports_hook() -> None:
    class Picky(Correct):
        dtypes: ClassVar = {"diagonal": ("float32",)}

        def supports(self, case: Case) -> bool:
            return len(case.sizes) == 2

    impl = Picky()
    assert unsupported(impl, _fwd(dtype="int8")).startswith("dtype int8")
    assert unsupported(impl, _bwd(dtype="int8")) == ""  # no declaration for backward
    assert unsupported(impl, _fwd((2, 2, 2))) == "the impl's supports(case) is False"


def test_not_implemented_on_a_declared_case_is_a_failure() -> None:
    class Refuses(Correct):
        dtypes = ("float32",)

        def diagonal(self, x, offset=0, dim1=0, dim2=1):
            raise NotImplementedError("not yet")

    verdict = oracles.check(_fwd(), Refuses(), DEVICE)
    assert verdict.kind == "error-parity"
    assert verdict.details["actual"]["type"] == "NotImplementedError"


def test_an_impl_may_provide_a_subset_of_the_ops() -> None:
    _module("diagfuzz_test_only_backward", diagonal_backward=plain_torch.diagonal_backward)
    impl = load_impl("diagfuzz_test_only_backward")
    assert oracles.check(_bwd(), impl, DEVICE).kind == "pass"
    verdict = oracles.check(_fwd(), impl, DEVICE)
    assert verdict.kind == "unsupported" and "provides no diagonal" in verdict.message
    _module("diagfuzz_test_no_ops", helper=len)
    with pytest.raises(ImplError, match="provides none of the ops"):
        load_impl("diagfuzz_test_no_ops")
    _module("diagfuzz_test_bad_dtypes", diagonal=plain_torch.diagonal, dtypes=("float99",))
    with pytest.raises(ImplError, match="float99"):
        load_impl("diagfuzz_test_bad_dtypes")


def test_an_impl_by_file_path_and_a_clear_error_for_a_missing_module(tmp_path) -> None:
    (tmp_path / "mydiag_by_path.py").write_text(
        "from examples.plain_torch import diagonal, diagonal_backward\n")
    impl = load_impl(f"{tmp_path / 'mydiag_by_path.py'}")
    assert oracles.check(_fwd(values=Values(1, "bits")), impl, DEVICE).kind == "pass"
    with pytest.raises(ImplError, match="no such module on the path searched"):
        load_impl("no_such_module_anywhere_xyz:impl")
