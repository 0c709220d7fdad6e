"""What ``triu`` and ``tril`` share: one triangle of every matrix kept, zero bits elsewhere.

``triu(input, diagonal=0)`` keeps the elements whose column minus row is at least
``diagonal`` (``tril``: at most) in each matrix of ``input`` (its last two dims, whatever
the batch dims before them) and gives the others all-zero bits: +0.0, never -0.0, and no
NaN from an infinity, which a mask by multiplication would give. As a Case: ``Case.sizes``
is the input's shape (rank 2 and more), the dims are the last two (``OpSpec.dims``: -2, -1,
not arguments of the op), and the Case's diagonal, ``Case.offset``, is the edge of the
triangle, the op's ``diagonal``. Any int64 is a valid ``diagonal``: one past a matrix's edge
keeps all of it or nothing. The result is a new contiguous tensor of the input's shape.
Every element is read (kept or not: a kernel that reads a dropped one and multiplies it by
zero turns -0.0 and NaN into wrong bits), so specials go anywhere in the input.

The reference is aten's op with aten's own kernels; ``index`` (index comparisons and
``torch.where`` on the elements' words, no triangle op) must agree with it; the relations
check, with no reference, that kept elements hold the input's bits and the others zero bits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from diagfuzz.core import bits
from diagfuzz.core.case import Case, Layout
from diagfuzz.core.dispatch import aten_only
from diagfuzz.core.words import as_words
from diagfuzz.specs import common

_aten = torch.ops.aten
#: The dtypes aten's triu and tril kernels take (CPU and CUDA: all types and complex, and
#: ComplexHalf, Half, BFloat16, Bool). Of a Case of another (float8), aten raises
#: NotImplementedError, which the implementation must raise too (error parity); warm-up
#: Cases are of these only.
ATEN_DTYPES = frozenset({"bool", "uint8", "int8", "int16", "int32", "int64", "float16",
                         "bfloat16", "float32", "float64", "complex32", "complex64",
                         "complex128"})
#: The invalid classes of both ops: an input of rank 0 or 1 (aten: RuntimeError), a bad
#: ``out`` and the binding-level classes.
INVALID = ("rank0", "rank1", "out_dtype", "out_device", "non_integer", "int_overflow",
           "non_tensor")


def keep_mask(rows: int, cols: int, diagonal: int, upper: bool,
              device: torch.device | str) -> torch.Tensor:
    """A ``[rows, cols]`` bool tensor, True where the op keeps the element: column minus
    row at least ``diagonal`` (upper) or at most (lower), by comparing index tensors (an
    int64 ``diagonal`` is compared, never added, so none overflows)."""
    row = torch.arange(rows, dtype=torch.int64, device=device).view(rows, 1)
    col = torch.arange(cols, dtype=torch.int64, device=device).view(1, cols)
    return (col - row >= diagonal) if upper else (col - row <= diagonal)


@dataclass(frozen=True)
class Triangle:
    """The spec functions of one of the two ops (``name``: "triu" keeps the upper
    triangle, "tril" the lower)."""

    name: str
    upper: bool

    def call(self, impl: Any, case: Case, args: dict[str, Any]) -> Any:
        """``impl.<name>(input, diagonal)``, or ``impl.<name>_out(..., out=)``."""
        if args.get("out") is not None:
            return getattr(impl, f"{self.name}_out")(args["input"], args["diagonal"],
                                                      out=args["out"])
        return getattr(impl, self.name)(args["input"], args["diagonal"])

    def reference(self, case: Case, args: dict[str, Any]) -> tuple[torch.Tensor, str]:
        """aten's op with aten's own kernels."""
        with aten_only():
            return getattr(_aten, self.name)(args["input"], case.offset), "aten"

    def index(self, x: torch.Tensor, case: Case) -> torch.Tensor:
        """The op by index arithmetic alone: the input's words where ``keep_mask`` holds,
        zero words elsewhere (``torch.where`` selects words, so every bit is kept),
        laid out contiguous as aten's result."""
        keep = keep_mask(x.shape[-2], x.shape[-1], case.offset, self.upper, x.device)
        words = as_words(x)
        if words.dim() > x.dim():  # complex128: two int64 words an element
            keep = keep.unsqueeze(-1)
        picked = torch.where(keep, words, torch.zeros((), dtype=words.dtype,
                                                      device=x.device))
        return bits.from_words(picked.contiguous(), x.dtype, tuple(x.shape))

    def others(self, case: Case, args: dict[str, Any],
               source: str) -> list[tuple[str, torch.Tensor]]:
        """The index-arithmetic reference (no triu or tril involved)."""
        return [("index", self.index(args["input"], case))]

    def aten_kernel(self, case: Case, args: dict[str, Any]) -> torch.Tensor:
        """aten's own kernel (its CompositeExplicitAutogradNonFunctional registration)."""
        key = torch._C.DispatchKey.CompositeExplicitAutogradNonFunctional
        return getattr(_aten, self.name).default._op_dk(key, args["input"], case.offset)

    def _kept(self, case: Case, result: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(result's words, the keep mask broadcast over them)."""
        words = bits._words(result)
        keep = keep_mask(result.shape[-2], result.shape[-1], case.offset, self.upper,
                         result.device)
        return words, keep.unsqueeze(-1) if words.dim() > result.dim() else keep

    def kept_bits(self, case: Case, tensors: dict[str, torch.Tensor],
                  result: torch.Tensor) -> tuple[str, dict[str, Any]] | None:
        """Every kept element holds the input's bits."""
        x = tensors["input"]
        words, keep = self._kept(case, result)
        wrong = (words != bits._words(x)) & keep
        return _evidence(wrong, result, f"kept elements differ from {self.name}'s input",
                         x, result)

    def dropped_zero(self, case: Case, tensors: dict[str, torch.Tensor],
                     result: torch.Tensor) -> tuple[str, dict[str, Any]] | None:
        """Every element not kept has all bits zero (+0.0, never -0.0; a 0 byte)."""
        words, keep = self._kept(case, result)
        wrong = (words != 0) & ~keep
        return _evidence(wrong, result, "elements outside the triangle are not all-zero bits",
                         torch.zeros_like(result), result)

    def compile_function(self, case: Case, args: dict[str, Any]) -> tuple[Any, torch.Tensor,
                                                                          Any]:
        """``torch.triu(x, diagonal)`` (or tril), back-propagated with ones: its gradient
        is the same op of the gradient, so the backward launches the kernel again."""
        op, diagonal = getattr(torch, self.name), case.offset

        def fn(x: torch.Tensor) -> torch.Tensor:
            return op(x, diagonal)

        x = args["input"]
        return fn, x, torch.ones(case.sizes, dtype=x.dtype, device=x.device)

    def error_cases(self) -> list[Case]:
        """One invalid call per invalid class (``INVALID``)."""
        def case(sizes: tuple[int, ...], invalid: str, **kw: Any) -> Case:
            layout = kw.pop("layout", None) or Layout.contiguous(sizes)
            return Case(self.name, sizes, 0, -2, -1, "float32", layout, invalid=invalid, **kw)

        return [
            case((), "rank0", layout=Layout((), (), 0)),
            case((5,), "rank1"),
            case((3, 4), "out_dtype", out_dtype="int32"),
            case((3, 4), "out_device", out_device="meta"),
            case((3, 4), "non_integer", raw_args=(("diagonal", 1.5),)),
            case((3, 4), "int_overflow", raw_args=(("diagonal", 2**63),)),
            case((3, 4), "non_tensor", raw_args=(("input", "x"),)),
        ]

    def compile_cases(self) -> list[Case]:
        """A contiguous matrix, and a batch of transposed ones below the main diagonal."""
        return [
            Case(self.name, (4, 5), 0, -2, -1, "float32", Layout.contiguous((4, 5))),
            Case(self.name, (2, 4, 3), -1, -2, -1, "float32",
                 Layout((2, 4, 3), (12, 1, 4), 0, ("permuted",))),
        ]

    def warm_up_cases(self) -> list[Case]:
        """Per dtype this torch has that aten's kernel takes (``ATEN_DTYPES``): a contiguous
        Case with a special, a strided one of bits, at diagonal 1."""
        return [Case(self.name, common.WARM_SIZES, 1, -2, -1, dtype, layout, values)
                for dtype in common.warm_dtypes() if dtype in ATEN_DTYPES
                for layout, values in common.warm_layouts(common.WARM_SIZES)]


def spec_fields(op: Triangle, invalid: tuple[str, ...], inplace: str = "") -> dict[str, Any]:
    """Every ``OpSpec`` field of ``op`` but the literals its module spells out (``order``,
    ``name``, ``operands``, ``arguments``, ``fields``: read from the source without imports,
    ``diagfuzz.core.opnames``): the four triangle specs differ only in those and in these
    arguments."""
    from diagfuzz.specs.base import Relation

    base = op.name.rstrip("_")
    module = "diagfuzz.ops.triangle"
    return {
        "dims": (-2, -1),
        "full": "result",
        "aten": (op.name, "") if inplace else (base, f"{base}.out"),
        "inplace": inplace,
        "invalid": invalid,
        "kernel": op.name,
        "entry_points": ((f"{module}:{op.name}", "") if inplace
                         else (f"{module}:{base}", f"{module}:{base}_out")),
        "call": op.call,
        "reference": op.reference,
        "others": op.others,
        "aten_kernel": op.aten_kernel,
        "relations": (Relation("metamorphic:kept==input", op.kept_bits),
                      Relation("metamorphic:outside-triangle-zero", op.dropped_zero)),
        "compile_function": op.compile_function,
        "error_cases": op.error_cases,
        "compile_cases": op.compile_cases,
        "warm_up_cases": op.warm_up_cases,
    }


def _evidence(wrong: torch.Tensor, result: torch.Tensor, what: str, expected: torch.Tensor,
              actual: torch.Tensor) -> tuple[str, dict[str, Any]] | None:
    """None where no element is ``wrong`` (words; complex128's pairs), else ("<count>
    <what>", the diff of ``expected`` and ``actual`` there)."""
    if not bool(wrong.any()):
        return None
    flat = wrong.reshape(result.numel(), -1).any(dim=1)
    bad = flat.nonzero().reshape(-1).cpu()
    return f"{len(bad)} {what}", bits.diff(expected, actual, bad)
