"""``diagonal_scatter(input, src, offset=0, dim1=0, dim2=1)``: input, src on its diagonal.

Two tensors, each with its own layout and values: ``input`` shaped like ``Case.sizes``
(``Case.layout``/``values``) and ``src`` shaped like its diagonal (``Case.others``), of the
Case's one dtype (aten converts a src of another dtype, so a mismatch is no error).

The result's layout is aten's: ``clone_preserve_strides(input)``. For an input with no zero
stride on a dim of more than one element, that is a clone of input's *whole storage*,
viewed with input's sizes, strides and storage offset, so the oracle demands input's
strides (where they address anything) and storage offset (past where the allocation
starts); for an expanded input it is ``input.clone()``, dense in the stride order aten
infers. Either way src's bits then sit on the diagonal and input's everywhere else.

The reference is aten's op with aten's own kernels; index arithmetic (``index``,
in this module) must agree with it, layout and all. Both tensors are read anywhere: input
off the diagonal, src whole.
"""

from __future__ import annotations

from typing import Any

import torch

from diagfuzz.core.bits import _words, diff
from diagfuzz.core.case import Case, Layout, Values
from diagfuzz.core.dispatch import aten_only
from diagfuzz.core.geometry import diagonal_of
from diagfuzz.specs import common, index_reference
from diagfuzz.specs.base import Operand, OpSpec, Relation

_aten = torch.ops.aten


def call(impl: Any, case: Case, args: dict[str, Any]) -> Any:
    positional = (args["input"], args["src"], args["offset"], args["dim1"], args["dim2"])
    if args.get("out") is not None:
        return impl.diagonal_scatter_out(*positional, out=args["out"])
    return impl.diagonal_scatter(*positional)


def reference(case: Case, args: dict[str, Any]) -> tuple[torch.Tensor, str]:
    """aten's diagonal_scatter with aten's own kernels."""
    x, src = args["input"], args["src"]
    with aten_only():
        return _aten.diagonal_scatter(x, src, case.offset, case.dim1, case.dim2), "aten"


def _overlaps(x: torch.Tensor) -> bool:
    """aten's ``has_internal_overlap(x) == Yes`` (what makes ``clone_preserve_strides`` a
    plain ``clone``): a zero stride on a dim of more than one element, in a non-empty
    tensor (an empty one counts as contiguous, whatever its strides)."""
    return x.numel() > 0 and any(stride == 0 and n > 1
                                 for n, stride in zip(x.shape, x.stride(), strict=True))


def index(x: torch.Tensor, src: torch.Tensor, case: Case) -> torch.Tensor:
    """diagonal_scatter by index arithmetic: the result's layout as aten makes it (input's
    storage cloned and viewed alike; for an expanded input a dense tensor laid out as
    ``empty_like`` lays it out, filled element by element), then src's words moved to the
    result's diagonal positions."""
    shape = tuple(x.shape)
    words = common.storage_words(x)
    if _overlaps(x):
        out = torch.empty_like(x)  # the layout only: every element is written below
        out_words = common.storage_words(out)
        dest = common.word_positions(shape, tuple(out.stride()), int(out.storage_offset()),
                                     x.dtype, x.device)
        source = common.word_positions(shape, tuple(x.stride()), int(x.storage_offset()),
                                       x.dtype, x.device)
        out_words[dest] = words[source]
    else:
        out_words = words.clone()
        out = torch.empty(0, dtype=x.dtype, device=x.device).set_(
            out_words.untyped_storage(), x.storage_offset(), shape, x.stride())
    rank = len(shape)
    d1, d2 = case.dim1 % rank, case.dim2 % rank
    diag = tuple(src.shape)  # the diagonal's: the other dims, then its length
    if diag[-1]:
        strides = out.stride()
        row0, col0 = (0, case.offset) if case.offset >= 0 else (-case.offset, 0)
        steps = (*(strides[d] for d in range(rank) if d not in (d1, d2)),
                 strides[d1] + strides[d2])
        start = int(out.storage_offset()) + row0 * strides[d1] + col0 * strides[d2]
        dest = common.word_positions(diag, steps, start, x.dtype, x.device)
        source = common.word_positions(diag, tuple(src.stride()), int(src.storage_offset()),
                                       x.dtype, x.device)
        out_words[dest] = common.storage_words(src)[source]
    return out


def others(case: Case, args: dict[str, Any], source: str) -> list[tuple[str, torch.Tensor]]:
    """The index-arithmetic reference (no diagonal op involved)."""
    return [("index", index(args["input"], args["src"], case))]


def aten_kernel(case: Case, args: dict[str, Any]) -> torch.Tensor:
    """aten's own kernel (its CompositeExplicitAutogradNonFunctional registration)."""
    key = torch._C.DispatchKey.CompositeExplicitAutogradNonFunctional
    return _aten.diagonal_scatter.default._op_dk(key, args["input"], args["src"],
                                                  case.offset, case.dim1, case.dim2)


def src_on_diagonal(case: Case, tensors: dict[str, torch.Tensor],
                    result: torch.Tensor) -> tuple[str, dict[str, Any]] | None:
    """``diagonal(diagonal_scatter(x, src)) == src``, bit for bit."""
    back = common.diagonal_view(case, result)
    return common.same_bits("diagonal elements of the result differ from src",
                            tensors["src"], back)


def input_off_diagonal(case: Case, tensors: dict[str, torch.Tensor],
                       result: torch.Tensor) -> tuple[str, dict[str, Any]] | None:
    """Every element off the diagonal holds input's bits there (so ``diagonal_scatter(x,
    diagonal(x)) == x``)."""
    x = tensors["input"]
    on = index_reference.diagonal_mask_shaped(case, result.device, result.dtype)
    changed = (_words(result) != _words(x)).masked_fill(on, False)
    if not bool(changed.any()):
        return None
    flat = changed.reshape(result.numel(), -1).any(dim=1)
    bad = flat.nonzero().reshape(-1).cpu()
    return (f"{len(bad)} elements off the diagonal differ from input",
            diff(x, result, bad))


def compile_function(case: Case, args: dict[str, Any]) -> tuple[Any, torch.Tensor, Any]:
    """``torch.diagonal_scatter(x, src, ...)`` of the input (src held fixed),
    back-propagated with ones: input's gradient is ``diagonal_scatter(grad,
    zeros_like(src))``, the op again."""
    src = args["src"]
    offset, dim1, dim2 = case.offset, case.dim1, case.dim2

    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.diagonal_scatter(x, src, offset, dim1, dim2)

    x = args["input"]
    return fn, x, torch.ones(case.sizes, dtype=x.dtype, device=x.device)


def break_case(draw: Any, kind: str, case: Case, tools: Any) -> Case | None:
    """The class only this op has: a src not of the diagonal's shape, one that does not
    broadcast to it or one that does (aten refuses both: src is copied into the diagonal
    view only when the shapes are equal)."""
    if kind != "src_shape":
        return None
    if draw(tools.BOOLS):
        return tools.wrong_diagonal_operand(draw, case, "src")
    diag = diagonal_of(case.sizes, case.offset, case.dim1, case.dim2).shape
    wider = [i for i, size in enumerate(diag) if size != 1]
    if wider and draw(tools.BOOLS):  # a dim of 1 where the diagonal has another size
        i = wider[draw(tools.ints(0, len(wider) - 1))]
        shape = (*diag[:i], 1, *diag[i + 1:])
    else:  # fewer leading dims
        shape = diag[draw(tools.ints(1, len(diag))):]
    layout, values = tools.tensor(draw, shape, case.dtype)
    return case.replace(others=(("src", layout, values),))


def error_cases() -> list[Case]:
    """One invalid call per invalid class of diagonal_scatter."""
    def case(sizes: tuple[int, ...], invalid: str, src: tuple[int, ...] = (3,),
             offset: int = 0, dim1: int = 0, dim2: int = 1, **kw: Any) -> Case:
        layout = kw.pop("layout", None) or Layout.contiguous(sizes)
        others = (("src", Layout.contiguous(src), Values(1)),)
        return Case("diagonal_scatter", sizes, offset, dim1, dim2, "float32", layout,
                    invalid=invalid, others=others, **kw)

    return [
        case((), "rank0", layout=Layout((), (), 0)),
        case((3,), "rank1"),
        case((3, 4), "dim_above_range", dim2=2),
        case((3, 4), "dim_below_range", dim1=-3),
        case((3, 4), "same_dims", dim1=1, dim2=-1),
        case((3, 4), "src_shape", src=(2,)),
        case((3, 4), "out_dtype", out_dtype="int32"),
        case((3, 4), "out_device", out_device="meta"),
        case((3, 4), "non_integer", raw_args=(("offset", 1.5),)),
        case((3, 4), "int_overflow", raw_args=(("dim2", -2**63 - 1),)),
        case((3, 4), "non_tensor", raw_args=(("src", None),)),
    ]


def compile_cases() -> list[Case]:
    """Contiguous, and an offset with swapped dims on a sliced input."""
    def src(length: int) -> tuple[tuple[str, Layout, Values], ...]:
        return (("src", Layout.contiguous((length,)), Values(1)),)

    return [
        Case("diagonal_scatter", (3, 4), 0, 0, 1, "float32", Layout.contiguous((3, 4)),
             others=src(3)),
        Case("diagonal_scatter", (4, 3), -1, 1, 0, "float32",
             Layout((4, 3), (6, 2), 1, ("sliced", "offset")), others=src(2)),
    ]


def warm_up_cases() -> list[Case]:
    """Per dtype this torch has: both tensors contiguous with a special, then both strided
    with random bits."""
    return [Case("diagonal_scatter", common.WARM_SIZES, 1, 0, 1, dtype, layout, values,
                 others=(("src", src_layout, src_values),))
            for dtype in common.warm_dtypes()
            for (layout, values), (src_layout, src_values) in zip(
                common.warm_layouts(common.WARM_SIZES),
                common.warm_layouts(common.WARM_DIAGONAL), strict=True)]


SPEC = OpSpec(
    order=3,
    name="diagonal_scatter",
    full="result",
    operands=(Operand("input", "full", specials="anywhere"),
              Operand("src", "diagonal", specials="anywhere")),
    arguments=("offset", "dim1", "dim2"),
    aten=("diagonal_scatter", "diagonal_scatter.out"),
    invalid=("rank0", "rank1", "dim_above_range", "dim_below_range", "same_dims",
             "src_shape", "out_dtype", "out_device", "non_integer", "int_overflow",
             "non_tensor"),
    kernel="diagonal_scatter",
    entry_points=("diagfuzz.ops.diagonal_scatter:diagonal_scatter",
                  "diagfuzz.ops.diagonal_scatter:diagonal_scatter_out"),
    call=call,
    reference=reference,
    others=others,
    aten_kernel=aten_kernel,
    relations=(Relation("metamorphic:diagonal(diagonal_scatter(x, src))==src",
                        src_on_diagonal),
               Relation("metamorphic:off-diagonal==input", input_off_diagonal)),
    compile_function=compile_function,
    break_case=break_case,
    error_cases=error_cases,
    compile_cases=compile_cases,
    warm_up_cases=warm_up_cases,
)
