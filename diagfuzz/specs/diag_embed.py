"""``diag_embed(input, offset=0, dim1=-2, dim2=-1)``: ``input`` on the diagonal of zeros.

The result has one dim more than ``input``: ``input.shape[:-1]`` with ``|offset| +
input.shape[-1]`` inserted at the smaller and then the larger of the two dims (wrapped for
the result's rank), zeros off the diagonal and input's bits on it. ``Case.sizes`` is the
result's shape (the op makes it from input alone: ``OpSpec.square``), dims are checked
against its rank, and input is shaped like its diagonal. Note the default dims, (-2, -1),
not diagonal's (0, 1): a Case always passes both.

The reference is what a user gets from autograd: ``torch.diagonal(z).backward(input)``'s
``z.grad`` for zeros ``z`` of the result's shape (aten's own kernels); aten's op itself where
autograd refuses the dtype. Index arithmetic (``index``, in this module) and aten's op must
agree with it. Every input element is read, so specials go anywhere in it.
"""

from __future__ import annotations

from math import prod
from typing import Any

import torch

from diagfuzz.core.case import Case, Layout, contiguous_strides
from diagfuzz.core.dispatch import aten_only
from diagfuzz.specs import common
from diagfuzz.specs.base import Operand, OpSpec, Relation

_aten = torch.ops.aten
INT64_MAX = 2**63 - 1
#: Offsets whose result cannot exist: ``|offset| + length`` overflows int64 or the
#: result's storage size does (aten: RuntimeError, whatever the batch dims).
HUGE_OFFSETS = (-INT64_MAX - 1, INT64_MAX, -INT64_MAX, 2**32, -(2**32), 2**62)


def call(impl: Any, case: Case, args: dict[str, Any]) -> Any:
    positional = (args["input"], args["offset"], args["dim1"], args["dim2"])
    if args.get("out") is not None:
        return impl.diag_embed_out(*positional, out=args["out"])
    return impl.diag_embed(*positional)


def _aten_op(x: torch.Tensor, case: Case) -> torch.Tensor:
    with aten_only():
        return _aten.diag_embed(x, case.offset, case.dim1, case.dim2)


def reference(case: Case, args: dict[str, Any]) -> tuple[torch.Tensor, str]:
    """``z.grad`` after ``torch.diagonal(z, ...).backward(input)`` for zeros ``z`` of the
    result's shape (aten's own kernels); aten's op where autograd refuses the dtype."""
    x = args["input"]
    if common.differentiable(x.dtype):
        with aten_only(), torch.enable_grad():
            try:
                z = torch.zeros(case.sizes, dtype=x.dtype, device=x.device,
                                requires_grad=True)
                torch.diagonal(z, case.offset, case.dim1, case.dim2).backward(x)
                if z.grad is not None:
                    return z.grad, "autograd"
            except (RuntimeError, NotImplementedError):
                pass  # e.g. float8: autograd has no kernel; aten is the reference then
    return _aten_op(x, case), "aten"


def index(x: torch.Tensor, case: Case) -> torch.Tensor:
    """diag_embed by index arithmetic alone: zero words of the result's contiguous layout,
    then every input element's words moved to its diagonal position."""
    sizes = tuple(case.sizes)
    rank = len(sizes)
    d1, d2 = case.dim1 % rank, case.dim2 % rank
    row0, col0 = (0, case.offset) if case.offset >= 0 else (-case.offset, 0)
    strides = contiguous_strides(sizes)
    others = [d for d in range(rank) if d not in (d1, d2)]
    shape = tuple(x.shape)  # the diagonal's: the other dims, then its length
    steps = (*(strides[d] for d in others), strides[d1] + strides[d2])
    start = (row0 * strides[d1] + col0 * strides[d2]) if shape[-1] else 0
    dest = common.word_positions(shape, steps, start, x.dtype, x.device)
    source = common.word_positions(shape, tuple(x.stride()), int(x.storage_offset()), x.dtype,
                                   x.device)
    words = common.storage_words(x)
    per = 2 if x.dtype.itemsize == 16 else 1
    out = torch.zeros(prod(sizes) * per, dtype=words.dtype, device=x.device)
    out[dest] = words[source]
    return common.from_words(out, x.dtype, sizes)


def others(case: Case, args: dict[str, Any], source: str) -> list[tuple[str, torch.Tensor]]:
    """Index arithmetic alone; and aten's op itself when autograd was the reference."""
    x = args["input"]
    found = [("index", index(x, case))]
    if source == "autograd":
        found.append(("aten", _aten_op(x, case)))
    return found


def aten_kernel(case: Case, args: dict[str, Any]) -> torch.Tensor:
    """aten's own kernel (its CompositeExplicitAutogradNonFunctional registration)."""
    key = torch._C.DispatchKey.CompositeExplicitAutogradNonFunctional
    return _aten.diag_embed.default._op_dk(key, args["input"], case.offset, case.dim1,
                                            case.dim2)


def round_trip(case: Case, tensors: dict[str, torch.Tensor],
               result: torch.Tensor) -> tuple[str, dict[str, Any]] | None:
    """``diagonal(diag_embed(x, o, d1, d2), o, d1, d2) == x``, bit for bit."""
    back = common.diagonal_view(case, result)
    return common.same_bits("diagonal elements of the result differ from input",
                            tensors["input"], back)


def off_diagonal_zero(case: Case, tensors: dict[str, torch.Tensor],
                      result: torch.Tensor) -> tuple[str, dict[str, Any]] | None:
    """Every element off the diagonal has all bits zero (+0.0, never -0.0; a 0 byte)."""
    return common.off_diagonal_zero(case, result)


def compile_function(case: Case, args: dict[str, Any]) -> tuple[Any, torch.Tensor, Any]:
    """``torch.diag_embed(x, ...)``, back-propagated with ones of the result's shape (its
    backward is a diagonal view of them)."""
    offset, dim1, dim2 = case.offset, case.dim1, case.dim2

    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.diag_embed(x, offset, dim1, dim2)

    x = args["input"]
    return fn, x, torch.ones(case.sizes, dtype=x.dtype, device=x.device)


def break_case(draw: Any, kind: str, case: Case, tools: Any) -> Case | None:
    """The class only this op (and diag of a vector) has: an offset whose result cannot
    exist (``HUGE_OFFSETS``)."""
    if kind == "huge_offset":
        return case.replace(offset=draw(tools.choice(HUGE_OFFSETS)))
    return None


def error_cases() -> list[Case]:
    """One invalid call per invalid class of diag_embed."""
    def case(sizes: tuple[int, ...], invalid: str, x: tuple[int, ...] = (3,),
             offset: int = 0, dim1: int = -2, dim2: int = -1, **kw: Any) -> Case:
        layout = kw.pop("layout", None) or Layout.contiguous(x)
        return Case("diag_embed", sizes, offset, dim1, dim2, "float32", layout,
                    invalid=invalid, **kw)

    return [
        case((1,), "rank1", x=(), layout=Layout((), (), 0)),
        case((3, 3), "dim_above_range", dim1=2),
        case((3, 3), "dim_below_range", dim2=-3),
        case((3, 3), "same_dims", dim1=1, dim2=-1),
        case((3, 3), "huge_offset", offset=INT64_MAX),
        case((3, 3), "out_dtype", out_dtype="int32"),
        case((3, 3), "out_device", out_device="meta"),
        case((3, 3), "non_integer", raw_args=(("offset", 1.5),)),
        case((3, 3), "int_overflow", raw_args=(("dim1", 2**63),)),
        case((3, 3), "non_tensor", raw_args=(("input", "x"),)),
    ]


def compile_cases() -> list[Case]:
    """The default dims, and an offset with the dims swapped across a batch dim."""
    return [
        Case("diag_embed", (2, 4, 4), 0, -2, -1, "float32", Layout.contiguous((2, 4))),
        Case("diag_embed", (5, 2, 5), -2, 2, 0, "float32", Layout.contiguous((2, 3))),
    ]


def warm_up_cases() -> list[Case]:
    """Per dtype this torch has: a 4 x 4 result with a diagonal of 3 at offset 1."""
    return [Case("diag_embed", (4, 4), 1, 0, 1, dtype, layout, values)
            for dtype in common.warm_dtypes()
            for layout, values in common.warm_layouts(common.WARM_DIAGONAL)]


SPEC = OpSpec(
    order=2,
    name="diag_embed",
    full="result",
    square=True,
    operands=(Operand("input", "diagonal", specials="anywhere"),),
    arguments=("offset", "dim1", "dim2"),
    aten=("diag_embed", "diag_embed.out"),
    invalid=("rank1", "dim_above_range", "dim_below_range", "same_dims", "huge_offset",
             "out_dtype", "out_device", "non_integer", "int_overflow", "non_tensor"),
    kernel="diag_embed",
    entry_points=("diagfuzz.ops.diag_embed:diag_embed",
                  "diagfuzz.ops.diag_embed:diag_embed_out"),
    call=call,
    reference=reference,
    others=others,
    aten_kernel=aten_kernel,
    relations=(Relation("metamorphic:off-diagonal-zero", off_diagonal_zero),
               Relation("metamorphic:diagonal(diag_embed(x))==x", round_trip)),
    compile_function=compile_function,
    break_case=break_case,
    error_cases=error_cases,
    compile_cases=compile_cases,
    warm_up_cases=warm_up_cases,
)
