"""The example implementations (``examples/``) import and return what aten returns.

Valid plain Cases only: invalid Cases and 1x1 results are left to the fuzz runs, since how
the oracle judges those (error parity, strides of size-1 dims) is its own policy.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

import pytest
import torch

import diagfuzz.ops as ops
from diagfuzz import oracles
from diagfuzz.case import call_arguments
from diagfuzz.core.case import Case, Layout, Values
from diagfuzz.gate import compile_cases
from diagfuzz.impl import load_impl
from diagfuzz.oracles import reference
from diagfuzz.specs import index_reference
from tests.bitwise import bitwise_difference

F32_NEG_ZERO, F32_NAN_PAYLOAD, F32_SIGNALLING_NAN = 0x80000000, 0x7FC00001, 0x7F800001


def fwd(sizes: tuple[int, ...], offset: int = 0, dim1: int = 0, dim2: int = 1,
        dtype: str = "float32", layout: Layout | None = None, **kw: Any) -> Case:
    """A diagonal Case (contiguous input unless ``layout``)."""
    values = kw.pop("values", Values(seed=7))
    return Case("diagonal", sizes, offset, dim1, dim2, dtype,
                layout or Layout.contiguous(sizes), values, **kw)


def bwd(sizes: tuple[int, ...], offset: int = 0, dim1: int = 0, dim2: int = 1,
        dtype: str = "float32", layout: Layout | None = None, **kw: Any) -> Case:
    """A diagonal_backward Case (contiguous grad_output unless ``layout``)."""
    values = kw.pop("values", Values(seed=11))
    shape = index_reference.geometry(sizes, offset, dim1, dim2).shape
    return Case("diagonal_backward", sizes, offset, dim1, dim2, dtype,
                layout or Layout.contiguous(shape), values, **kw)




def with_specials(case: Case) -> Case:
    """``case`` with float32 -0.0, a quiet NaN with a payload and a signalling NaN in the
    first three elements the op reads (diagonal: of the diagonal; backward: grad_output)."""
    layout = case.layout
    where = torch.arange(layout.storage_size).as_strided(layout.shape, layout.strides,
                                                         layout.storage_offset)
    if case.op == "diagonal":
        where = torch.diagonal(where, case.offset, case.dim1, case.dim2)
    first = where.flatten()[:3].tolist()
    assert len(first) == 3, case
    bits = (F32_NEG_ZERO, F32_NAN_PAYLOAD, F32_SIGNALLING_NAN)
    return dataclasses.replace(case, values=Values(seed=3, specials=tuple(zip(first, bits,
                                                                              strict=True))))

#: Valid Cases every correct implementation passes: layouts, offsets, dtypes, bit patterns.
PLAIN_CASES = [
    *compile_cases(),
    fwd((4, 6), offset=2, dtype="bfloat16", values=Values(seed=5, mode="bits")),
    fwd((2, 3, 5, 4), offset=-2, dim1=3, dim2=1, dtype="int64"),
    with_specials(fwd((5, 8), offset=1,
                      layout=Layout((5, 8), (16, 2), 3, ("sliced", "offset")))),
    fwd((3, 4, 4), dim1=1, dim2=2, dtype="complex64"),
    bwd((4, 5, 2), offset=1, dim1=2, dim2=0, dtype="bfloat16"),
    bwd((3, 6), offset=2, dtype="bool", values=Values(seed=9, mode="bits")),
    with_specials(bwd((5, 5), layout=Layout((5,), (3,), 2, ("sliced", "offset")))),
    bwd((2, 3, 4), offset=1, dim1=-1, dim2=-2, dtype="float16",
        layout=Layout((2, 2), (1, 0), 0, ("expanded",))),
]

#: ``.out`` Cases with an ``out`` of the right dtype and device (valid).
OUT_CASES = [
    fwd((3, 5), offset=1, out_dtype="float32"),
    bwd((4, 3), offset=-1, dtype="int32", out_dtype="int32"),
]


def _assert_passes(case: Case, impl: Any, device: str = ops.DEVICE) -> None:
    verdict = oracles.check(case, impl, device)
    assert verdict.ok and not verdict.details.get("skipped"), (
        f"{verdict}\n{verdict.details}")


@pytest.mark.parametrize("name", ["plain_torch", "compiled"])
def test_adapters_load_as_impls(name: str) -> None:
    impl = load_impl(f"examples.{name}:impl")
    assert impl is importlib.import_module(f"examples.{name}")
    assert not impl.uses_triton_registration


@pytest.mark.parametrize("case", PLAIN_CASES + OUT_CASES, ids=Case.describe)
def test_plain_torch_passes_the_oracle(case: Case) -> None:
    from examples import plain_torch

    _assert_passes(case, plain_torch.impl)


#: Compiling is slow (seconds a Case): one Case an op.
COMPILED_CASES = [
    with_specials(fwd((3, 4, 5), offset=-1, dim1=2, dim2=0)),
    with_specials(bwd((3, 4), offset=1, layout=Layout((3,), (2,), 1, ("sliced", "offset")))),
]


@pytest.mark.compile
@pytest.mark.parametrize("case", COMPILED_CASES, ids=Case.describe)
def test_compiled_returns_atens_bits(case: Case) -> None:
    """The compiled ops called directly: aten's dtype, shape, strides and bits."""
    from examples import compiled

    expected = reference.call_op(reference.ATEN, case, call_arguments(case, ops.DEVICE))
    actual = reference.call_op(compiled.impl, case, call_arguments(case, ops.DEVICE))
    assert not bitwise_difference(actual, expected), bitwise_difference(actual, expected)


@pytest.mark.compile
@pytest.mark.parametrize("case", COMPILED_CASES, ids=Case.describe)
def test_compiled_passes_the_oracle(case: Case) -> None:
    """Compiling inside the oracle, as every new Case of a fuzz run does: the sentinel
    allocations must leave torch.compile's own allocations (fake tensors' meta storage,
    RNG states it saves and restores) alone and still guard what compiled code allocates."""
    from examples import compiled

    torch._dynamo.reset()  # compile here, inside the oracle's sentinel allocations
    _assert_passes(case, compiled.impl)


@pytest.mark.flaggems
@pytest.mark.parametrize("case", [
    bwd((3, 4), offset=1),
    with_specials(bwd((4, 5, 2), offset=1, dim1=2, dim2=0)),
    bwd((5, 5), layout=Layout((5,), (3,), 2, ("sliced", "offset"))),
    bwd((2, 3, 4), offset=1, dim1=-1, dim2=-2,
        layout=Layout((2, 2), (1, 2), 0, ("permuted",))),
], ids=Case.describe)
def test_flaggems_diagonal_backward_passes_the_oracle(case: Case) -> None:
    """FlagGems' diagonal_backward on float32 (skipped where FlagGems cannot be imported)."""
    flaggems = pytest.importorskip("examples.flaggems", exc_type=ImportError)
    assert "float32" in flaggems.dtypes["diagonal_backward"]
    _assert_passes(case, flaggems.impl)


@pytest.mark.flaggems
@pytest.mark.parametrize("case", [
    Case("diag_embed", (2, 4, 4), 1, -2, -1, "float32", Layout.contiguous((2, 3))),
    Case("diag_embed", (5, 3, 5), -2, 2, 0, "int32", Layout((3, 3), (1, 3), 0, ("permuted",))),
    Case("diag", (4, 6), 2, 0, 1, "float16", Layout((4, 6), (12, 2), 1, ("sliced", "offset"))),
    Case("diag_1d", (5, 5), -2, 0, 1, "bool", Layout.contiguous((3,))),
], ids=Case.describe)
def test_flaggems_diag_and_diag_embed_pass_the_oracle(case: Case) -> None:
    """FlagGems' diag (both directions) and diag_embed, on dtypes its tests use (skipped
    where FlagGems cannot be imported)."""
    flaggems = pytest.importorskip("examples.flaggems", exc_type=ImportError)
    assert case.dtype in flaggems.dtypes["diag"]
    _assert_passes(case, flaggems.impl)
