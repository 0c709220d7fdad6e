"""``diag(input, diagonal=0)`` of a vector: a square matrix with input on that diagonal.

The other direction of ``aten::diag`` (``diagfuzz.specs.diag`` says why two specs): the
implementation's method is ``diag`` all the same. ``Case.sizes`` is the result's shape, a
square of ``len(input) + |diagonal|`` (``OpSpec.square``), dims (0, 1); input is shaped
like its diagonal. The op is ``diag_embed(input, diagonal)`` by another name, and aten
calls exactly that: diag_embed's launch counter is the dispatch proof, its index
arithmetic a reference, its relations this op's.
"""

from __future__ import annotations

from typing import Any

import torch

from diagfuzz.core.case import Case, Layout
from diagfuzz.specs import common, diag, diag_embed
from diagfuzz.specs.base import Operand, OpSpec, Relation

_aten = torch.ops.aten


def others(case: Case, args: dict[str, Any], source: str) -> list[tuple[str, torch.Tensor]]:
    """diag_embed's index arithmetic (no diagonal op involved)."""
    return [("index", diag_embed.index(args["input"], case))]


def aten_kernel(case: Case, args: dict[str, Any]) -> torch.Tensor:
    """What aten::diag runs for a vector: diag_embed's own kernel, dims (0, 1)."""
    key = torch._C.DispatchKey.CompositeExplicitAutogradNonFunctional
    return _aten.diag_embed.default._op_dk(key, args["input"], case.offset, 0, 1)


def compile_function(case: Case, args: dict[str, Any]) -> tuple[Any, torch.Tensor, Any]:
    """``torch.diag(x, diagonal)`` of the vector, back-propagated with ones of the
    result's shape."""
    offset = case.offset

    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.diag(x, offset)

    x = args["input"]
    return fn, x, torch.ones(case.sizes, dtype=x.dtype, device=x.device)


def error_cases() -> list[Case]:
    """One invalid call per invalid class of diag of a vector (its rank classes are
    diag's)."""
    def case(invalid: str, offset: int = 0, **kw: Any) -> Case:
        return Case("diag_1d", (3, 3), offset, 0, 1, "float32", Layout.contiguous((3,)),
                    invalid=invalid, **kw)

    return [
        case("huge_offset", offset=-2**63),
        case("out_dtype", out_dtype="int32"),
        case("out_device", out_device="meta"),
        case("non_integer", raw_args=(("diagonal", "1"),)),
        case("int_overflow", raw_args=(("diagonal", -2**63 - 1),)),
        case("non_tensor", raw_args=(("input", None),)),
    ]


def compile_cases() -> list[Case]:
    """The main diagonal, and one above it read through a strided view."""
    return [
        Case("diag_1d", (4, 4), 0, 0, 1, "float32", Layout.contiguous((4,))),
        Case("diag_1d", (5, 5), 2, 0, 1, "float32", Layout((3,), (2,), 1, ("sliced",))),
    ]


def warm_up_cases() -> list[Case]:
    """Per dtype this torch has: a vector of 3 with a special, on diagonal 1 of a 4 x 4
    (the kernel is diag_embed's, warmed by its Cases; this loads diag's own path)."""
    layout, values = common.warm_layouts(common.WARM_DIAGONAL)[0]
    return [Case("diag_1d", (4, 4), 1, 0, 1, dtype, layout, values)
            for dtype in common.warm_dtypes()]


SPEC = OpSpec(
    order=5,
    name="diag_1d",
    method="diag",
    ranks=(2, 2),
    max_rank=2,
    dims=(0, 1),
    full="result",
    square=True,
    operands=(Operand("input", "diagonal", specials="anywhere"),),
    arguments=("diagonal",),
    fields={"diagonal": "offset"},
    aten=("diag", "diag.out"),
    invalid=("huge_offset", "out_dtype", "out_device", "non_integer", "int_overflow",
             "non_tensor"),
    counters=("diag_embed",),
    decomposes_into=("diag_embed",),
    call=diag.call,
    reference=diag.reference,
    others=others,
    aten_kernel=aten_kernel,
    relations=(Relation("metamorphic:off-diagonal-zero", diag_embed.off_diagonal_zero),
               Relation("metamorphic:diagonal(diag(v))==v", diag_embed.round_trip)),
    compile_function=compile_function,
    break_case=diag_embed.break_case,
    error_cases=error_cases,
    compile_cases=compile_cases,
    warm_up_cases=warm_up_cases,
)
