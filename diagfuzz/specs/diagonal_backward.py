"""``diagonal_backward(grad_output, input_sizes, offset, dim1, dim2)``: diagonal's gradient.

A tensor of ``input_sizes`` (``Case.sizes``) holding zeros off the diagonal and
grad_output's bits on it; grad_output is shaped like the diagonal (aten broadcasts one that
broadcasts to it). The reference is what a user gets: ``torch.diagonal(x).backward(g)``'s
``x.grad`` (aten's op directly for dtypes autograd refuses); every grad_output element is
read, so specials go anywhere in it.
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
    positional = (args["grad_output"], args["input_sizes"], args["offset"], args["dim1"],
                  args["dim2"])
    if args.get("out") is not None:
        return impl.diagonal_backward_out(*positional, out=args["out"])
    return impl.diagonal_backward(*positional)


def _aten_op(grad: torch.Tensor, case: Case) -> torch.Tensor:
    with aten_only():
        return _aten.diagonal_backward(grad, list(case.sizes), case.offset, case.dim1,
                                       case.dim2)


def reference(case: Case, args: dict[str, Any]) -> tuple[torch.Tensor, str]:
    """``x.grad`` after ``torch.diagonal(x, ...).backward(grad_output)`` (registration
    off; the input's values do not enter a linear op's gradient); aten's op where autograd
    refuses the dtype (integers, bool, float8)."""
    grad = args["grad_output"]
    if common.differentiable(grad.dtype):
        with aten_only(), torch.enable_grad():
            try:
                x = torch.zeros(case.sizes, dtype=grad.dtype, device=grad.device,
                                requires_grad=True)
                torch.diagonal(x, case.offset, case.dim1, case.dim2).backward(grad)
                if x.grad is not None:
                    return x.grad, "autograd"
            except (RuntimeError, NotImplementedError):
                pass  # e.g. float8: autograd has no kernel; aten is the reference then
    return _aten_op(grad, case), "aten"


def others(case: Case, args: dict[str, Any], source: str) -> list[tuple[str, torch.Tensor]]:
    """Index arithmetic alone; and aten's op itself when autograd was the reference."""
    grad = args["grad_output"]
    found = [("index", index_reference.diagonal_backward(grad, case))]
    if source == "autograd":
        found.append(("aten", _aten_op(grad, case)))
    return found


def aten_kernel(case: Case, args: dict[str, Any]) -> torch.Tensor:
    """aten's own kernel (its CompositeExplicitAutograd registration)."""
    key = torch._C.DispatchKey.CompositeExplicitAutograd
    return _aten.diagonal_backward.default._op_dk(key, args["grad_output"], list(case.sizes),
                                                   case.offset, case.dim1, case.dim2)


def round_trip(case: Case, tensors: dict[str, torch.Tensor],
               result: torch.Tensor) -> tuple[str, dict[str, Any]] | None:
    """``diagonal(diagonal_backward(g)) == g`` (g broadcast to the diagonal's shape)."""
    back = common.diagonal_view(case, result)
    return common.same_bits("diagonal elements of the result differ from grad_output",
                            tensors["grad_output"].expand(back.shape), back)


def off_diagonal_zero(case: Case, tensors: dict[str, torch.Tensor],
                      result: torch.Tensor) -> tuple[str, dict[str, Any]] | None:
    """Every element off the diagonal has all bits zero (+0.0, never -0.0; a 0 byte)."""
    return common.off_diagonal_zero(case, result)


def compile_function(case: Case, args: dict[str, Any]) -> tuple[Any, torch.Tensor, Any]:
    """``torch.diagonal(x).clone()`` of zeros of ``input_sizes``, back-propagated with
    grad_output: its gradient is diagonal_backward."""
    grad = args["grad_output"]
    x = torch.zeros(case.sizes, dtype=grad.dtype, device=grad.device)
    return common.diagonal_clone(case), x, grad


def break_case(draw: Any, kind: str, case: Case, tools: Any) -> Case | None:
    """The classes only this op has: a grad_output that does not broadcast to the
    diagonal, and negative input_sizes."""
    if kind == "grad_output_shape":
        return tools.wrong_diagonal_operand(draw, case)
    if kind == "negative_size":
        return tools.negative_size(draw, case)
    return None


def error_cases() -> list[Case]:
    """One invalid call per invalid class of diagonal_backward."""
    def case(sizes: tuple[int, ...], invalid: str, grad: tuple[int, ...] = (3,),
             offset: int = 0, dim1: int = 0, dim2: int = 1, **kw: Any) -> Case:
        layout = kw.pop("layout", None) or Layout.contiguous(grad)
        return Case("diagonal_backward", sizes, offset, dim1, dim2, "float32", layout,
                    invalid=invalid, **kw)

    return [
        case((), "rank0", grad=(), layout=Layout((), (), 0)),
        case((4,), "rank1", grad=(4,)),
        case((3, 4), "dim_above_range", dim1=5, dim2=1),
        case((3, 4), "dim_below_range", dim2=-3),
        case((3, 4), "same_dims", dim2=0),
        case((3, 4), "grad_output_shape", grad=(2,)),
        case((3, -2), "negative_size"),
        case((3, 4), "out_dtype", out_dtype="int32"),
        case((3, 4), "out_device", out_device="meta"),
        case((3, 4), "non_integer", raw_args=(("input_sizes", [3, 1.5]),)),
        case((3, 4), "int_overflow", raw_args=(("offset", -2**63 - 1),)),
        case((3, 4), "non_tensor", raw_args=(("grad_output", 1.5),)),
    ]


def compile_cases() -> list[Case]:
    return [Case("diagonal_backward", (3, 4), 1, 0, 1, "float32", Layout.contiguous((3,)))]


def warm_up_cases() -> list[Case]:
    return [Case("diagonal_backward", common.WARM_SIZES, 1, 0, 1, dtype, layout, values)
            for dtype in common.warm_dtypes()
            for layout, values in common.warm_layouts(common.WARM_DIAGONAL)]


SPEC = OpSpec(
    order=1,
    name="diagonal_backward",
    full="result",
    operands=(Operand("grad_output", "diagonal", specials="anywhere"),),
    arguments=("input_sizes", "offset", "dim1", "dim2"),
    aten=("diagonal_backward", "diagonal_backward.out"),
    invalid=("rank0", "rank1", "dim_above_range", "dim_below_range", "same_dims",
             "grad_output_shape", "negative_size", "out_dtype", "out_device", "non_integer",
             "int_overflow", "non_tensor"),
    kernel="diagonal_backward",
    entry_points=("diagfuzz.ops.diagonal_backward:diagonal_backward",
                  "diagfuzz.ops.diagonal_backward:diagonal_backward_out"),
    call=call,
    reference=reference,
    others=others,
    aten_kernel=aten_kernel,
    relations=(Relation("metamorphic:off-diagonal-zero", off_diagonal_zero),
               Relation("metamorphic:diagonal(diagonal_backward(g))==g", round_trip)),
    compile_function=compile_function,
    break_case=break_case,
    error_cases=error_cases,
    compile_cases=compile_cases,
    warm_up_cases=warm_up_cases,
)
