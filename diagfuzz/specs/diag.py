"""``diag(input, diagonal=0)`` of a matrix: its ``diagonal``-th diagonal, a new vector.

``aten::diag`` does two things: a 2-D input gives its diagonal (this spec), a 1-D input
gives a square matrix with the vector on that diagonal (``diag_1d``). A Case's geometry is
one diagonal of one tensor (``diagfuzz.specs.base``), and an operand is shaped either like
that tensor or like its diagonal; the two directions are the two roles of diag's one
operand, so they are two specs of one method (``OpSpec.method``: an implementation
provides ``diag`` once and both streams call it). Each then is an op the generic machinery
already draws: this one is ``diagonal`` of a matrix with dims (0, 1) (``Case.sizes`` is the
input's shape, rank 2 only), ``diag_1d`` is ``diag_embed`` making a matrix.

aten::diag has no kernel of its own (CompositeImplicitAutograd): it calls
``diagonal_copy`` here, whose kernel is registered, so that launch counter is the dispatch
proof (``OpSpec.counters``) and nothing is registered for diag itself. Invalid calls: an
input of rank 0 or of rank 3 and more (RuntimeError), a bad ``out`` and the binding-level
classes; dims are not diag's arguments.
"""

from __future__ import annotations

from typing import Any

import torch

from diagfuzz.core.case import Case, Layout
from diagfuzz.core.dispatch import aten_only
from diagfuzz.specs import common, index_reference
from diagfuzz.specs.base import Operand, OpSpec, Relation

_aten = torch.ops.aten


def call(impl: Any, case: Case, args: dict[str, Any]) -> Any:
    """``impl.diag(input, diagonal)`` (``impl.diag_out`` for a ``.out`` Case): both
    directions call it."""
    if args.get("out") is not None:
        return impl.diag_out(args["input"], args["diagonal"], out=args["out"])
    return impl.diag(args["input"], args["diagonal"])


def reference(case: Case, args: dict[str, Any]) -> tuple[torch.Tensor, str]:
    """aten's diag with aten's own kernels."""
    with aten_only():
        return _aten.diag(args["input"], case.offset), "aten"


def others(case: Case, args: dict[str, Any], source: str) -> list[tuple[str, torch.Tensor]]:
    """The index-arithmetic reference of a diagonal (no diagonal op involved)."""
    return [("index", index_reference.diagonal(args["input"], case))]


def aten_kernel(case: Case, args: dict[str, Any]) -> torch.Tensor:
    """What aten::diag runs for a matrix: diagonal_copy's own kernel, dims (0, 1)."""
    key = torch._C.DispatchKey.CompositeExplicitAutogradNonFunctional
    return _aten.diagonal_copy.default._op_dk(key, args["input"], case.offset, 0, 1)


def copy_equals_view(case: Case, tensors: dict[str, torch.Tensor],
                     result: torch.Tensor) -> tuple[str, dict[str, Any]] | None:
    """The result holds the values of aten's diagonal *view* of the input (no kernel)."""
    view = common.diagonal_view(case, tensors["input"])
    return common.same_bits("elements differ from the input's diagonal view", view, result)


def compile_function(case: Case, args: dict[str, Any]) -> tuple[Any, torch.Tensor, Any]:
    """``torch.diag(x, diagonal)``, back-propagated with ones of the result's shape: the
    forward runs diagonal_copy, the backward diagonal_backward."""
    offset = case.offset

    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.diag(x, offset)

    x = args["input"]
    with aten_only():
        grad = torch.ones_like(torch.diagonal(x, offset, 0, 1))
    return fn, x, grad


def break_case(draw: Any, kind: str, case: Case, tools: Any) -> Case | None:
    """The class only diag has: an input of rank 3 or 4 (``Case.sizes`` are its shape)."""
    if kind != "high_rank":
        return None
    sizes = tools.sizes(draw, (3, 4))
    layout, values = tools.tensor(draw, sizes, case.dtype)
    return case.replace(sizes=sizes, layout=layout, values=values)


def error_cases() -> list[Case]:
    """One invalid call per invalid class of diag of a matrix."""
    def case(sizes: tuple[int, ...], invalid: str, offset: int = 0, **kw: Any) -> Case:
        layout = kw.pop("layout", None) or Layout.contiguous(sizes)
        return Case("diag", sizes, offset, 0, 1, "float32", layout, invalid=invalid, **kw)

    return [
        case((), "rank0", layout=Layout((), (), 0)),
        case((2, 3, 4), "high_rank"),
        case((3, 4), "out_dtype", out_dtype="int32"),
        case((3, 4), "out_device", out_device="meta"),
        case((3, 4), "non_integer", raw_args=(("diagonal", 1.5),)),
        case((3, 4), "int_overflow", raw_args=(("diagonal", 2**63),)),
        case((3, 4), "non_tensor", raw_args=(("input", (1, 2)),)),
    ]


def compile_cases() -> list[Case]:
    """A square matrix, and a transposed one with a negative diagonal."""
    return [
        Case("diag", (4, 4), 0, 0, 1, "float32", Layout.contiguous((4, 4))),
        Case("diag", (5, 3), -1, 0, 1, "float32", Layout((5, 3), (1, 5), 0, ("permuted",))),
    ]


def warm_up_cases() -> list[Case]:
    """Per dtype this torch has: a contiguous matrix with a special (the kernels are
    diagonal's, warmed by its Cases; this loads diag's own path)."""
    layout, values = common.warm_layouts(common.WARM_SIZES)[0]
    return [Case("diag", common.WARM_SIZES, 1, 0, 1, dtype, layout, values)
            for dtype in common.warm_dtypes()]


SPEC = OpSpec(
    order=4,
    name="diag",
    ranks=(2, 2),
    max_rank=2,
    dims=(0, 1),
    operands=(Operand("input", "full"),),
    arguments=("diagonal",),
    fields={"diagonal": "offset"},
    aten=("diag", "diag.out"),
    invalid=("rank0", "high_rank", "out_dtype", "out_device", "non_integer", "int_overflow",
             "non_tensor"),
    counters=("diagonal_copy",),
    decomposes_into=("diagonal_copy",),
    call=call,
    reference=reference,
    others=others,
    aten_kernel=aten_kernel,
    relations=(Relation("metamorphic:diag==diagonal-view", copy_equals_view),),
    compile_function=compile_function,
    break_case=break_case,
    error_cases=error_cases,
    compile_cases=compile_cases,
    warm_up_cases=warm_up_cases,
)
