"""``diagonal``, materialised: ``aten::diagonal_copy(input, offset, dim1, dim2)``.

aten's ``diagonal`` is a view; a kernel can only replace its materialised form,
``diagonal_copy``: a new contiguous tensor holding the diagonal. ``Case.sizes`` is the
input's shape; specials go mostly on the elements the op reads (the diagonal).
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
    positional = (args["input"], args["offset"], args["dim1"], args["dim2"])
    if args.get("out") is not None:
        return impl.diagonal_out(*positional, out=args["out"])
    return impl.diagonal(*positional)


def reference(case: Case, args: dict[str, Any]) -> tuple[torch.Tensor, str]:
    """aten's diagonal_copy with aten's own kernels."""
    with aten_only():
        return _aten.diagonal_copy(args["input"], case.offset, case.dim1, case.dim2), "aten"


def others(case: Case, args: dict[str, Any], source: str) -> list[tuple[str, torch.Tensor]]:
    """The index-arithmetic reference (no diagonal op involved)."""
    return [("index", index_reference.diagonal(args["input"], case))]


def aten_kernel(case: Case, args: dict[str, Any]) -> torch.Tensor:
    """aten's own kernel (its CompositeExplicitAutogradNonFunctional registration)."""
    key = torch._C.DispatchKey.CompositeExplicitAutogradNonFunctional
    return _aten.diagonal_copy.default._op_dk(key, args["input"], case.offset, case.dim1,
                                               case.dim2)


def copy_equals_view(case: Case, tensors: dict[str, torch.Tensor],
                     result: torch.Tensor) -> tuple[str, dict[str, Any]] | None:
    """The copy holds the values of aten's diagonal *view* of the input (no kernel)."""
    view = common.diagonal_view(case, tensors["input"])
    return common.same_bits("elements differ from the input's diagonal view", view, result)


def compile_function(case: Case, args: dict[str, Any]) -> tuple[Any, torch.Tensor, Any]:
    """``torch.diagonal(x).clone()`` of the input, back-propagated with ones."""
    x = args["input"]
    fn = common.diagonal_clone(case)
    with aten_only():
        grad = torch.ones_like(torch.diagonal(x, case.offset, case.dim1, case.dim2))
    return fn, x, grad


def error_cases() -> list[Case]:
    """One invalid call per invalid class of diagonal."""
    def case(sizes: tuple[int, ...], invalid: str, offset: int = 0, dim1: int = 0,
             dim2: int = 1, **kw: Any) -> Case:
        layout = kw.pop("layout", None) or Layout.contiguous(sizes)
        return Case("diagonal", sizes, offset, dim1, dim2, "float32", layout, invalid=invalid,
                    **kw)

    return [
        case((), "rank0", layout=Layout((), (), 0)),
        case((5,), "rank1"),
        case((3, 4), "dim_above_range", dim2=2),
        case((3, 4), "dim_below_range", dim1=-3, dim2=0),
        case((3, 4), "same_dims", dim1=1, dim2=-1),
        case((3, 4), "out_dtype", out_dtype="int32"),
        case((3, 4), "out_device", out_device="meta"),
        case((3, 4), "non_integer", raw_args=(("offset", 1.5),)),
        case((3, 4), "int_overflow", raw_args=(("dim1", 2**63),)),
        case((3, 4), "non_tensor", raw_args=(("input", "x"),)),
    ]


def compile_cases() -> list[Case]:
    """A small torch.compile sample: contiguous, offset and dims, permuted."""
    return [
        Case("diagonal", (4, 5), 0, 0, 1, "float32", Layout.contiguous((4, 5))),
        Case("diagonal", (3, 4, 5), -1, 2, 0, "float32", Layout.contiguous((3, 4, 5))),
        Case("diagonal", (6, 4), 1, 0, 1, "float32", Layout((6, 4), (1, 6), 0, ("permuted",))),
    ]


def warm_up_cases() -> list[Case]:
    """Per dtype this torch has: a contiguous Case with a special, a strided one of bits."""
    return [Case("diagonal", common.WARM_SIZES, 1, 0, 1, dtype, layout, values)
            for dtype in common.warm_dtypes()
            for layout, values in common.warm_layouts(common.WARM_SIZES)]


SPEC = OpSpec(
    order=0,
    name="diagonal",
    operands=(Operand("input", "full"),),
    arguments=("offset", "dim1", "dim2"),
    aten=("diagonal_copy", "diagonal_copy.out"),
    invalid=("rank0", "rank1", "dim_above_range", "dim_below_range", "same_dims",
             "out_dtype", "out_device", "non_integer", "int_overflow", "non_tensor"),
    kernel="diagonal_copy",
    entry_points=("diagfuzz.ops.diagonal_copy:diagonal_copy",
                  "diagfuzz.ops.diagonal_copy:diagonal_copy_out"),
    call=call,
    reference=reference,
    others=others,
    aten_kernel=aten_kernel,
    relations=(Relation("metamorphic:diagonal_copy==diagonal-view", copy_equals_view),),
    compile_function=compile_function,
    error_cases=error_cases,
    compile_cases=compile_cases,
    warm_up_cases=warm_up_cases,
)
