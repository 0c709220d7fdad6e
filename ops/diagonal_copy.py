"""diagonal_copy as one Triton launch: the strided diagonal gathered into a new tensor.

The result (contiguous: the other dims, then the diagonal) is ``[rows, width]`` words with
``width`` the diagonal's length. Each program owns a flat block of the result and gathers the
rows it holds, many short rows a pass or one long row a pass (``FlatTile``): a row's start in
the input is peeled once per row; along the row the input advances by
``stride(dim1) + stride(dim2)``.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from diagfuzz.ops import _counters
from diagfuzz.ops._geometry import Diagonal, diagonal_of
from diagfuzz.ops._runtime import check_device
from diagfuzz.ops._tiling import (
    SHAPE_ARGS,
    Launcher,
    LaunchPlan,
    RowDim,
    coalesce,
    plan_gather,
    remember,
    row_args,
)
from diagfuzz.ops._words import words_per_element


@triton.jit(do_not_specialize=[*SHAPE_ARGS, "base", "col_stride", "in_ptr"])
def _diagonal_copy_kernel(
    out_ptr, in_ptr, total, width, run_len, row_lanes, lane_shift,
    size0, size1, size2, size3, size4, size5, size6, size7,
    stride0, stride1, stride2, stride3, stride4, stride5, stride6, stride7,
    n_dims, base, col_stride,
    WORDS: tl.constexpr, BLOCK: tl.constexpr, PEEL_LANES: tl.constexpr,
    COPY_LANES: tl.constexpr, ROUNDS: tl.constexpr, INDEX_64: tl.constexpr,
):
    # No nested @triton.jit calls: the interpreter re-patches on each (see _tiling).
    pid = tl.program_id(0)
    if INDEX_64:
        pid = pid.to(tl.int64)
    start = pid * BLOCK
    end = tl.minimum(start + BLOCK, total)
    row_end = (end - 1) // width + 1
    slot = tl.arange(0, PEEL_LANES)
    k = tl.arange(0, COPY_LANES)
    if INDEX_64:
        slot = slot.to(tl.int64)
        k = k.to(tl.int64)
    slot = slot >> lane_shift  # which row of the pass
    k = k & (row_lanes - 1)  # which word of that row
    for row0 in range(start // width, row_end, PEEL_LANES >> lane_shift):
        row = row0 + slot
        rem = row
        in_row = row * 0 + base
        if n_dims > 0:
            quotient = rem // size0
            in_row += (rem - quotient * size0) * stride0
            rem = quotient
        if n_dims > 1:
            quotient = rem // size1
            in_row += (rem - quotient * size1) * stride1
            rem = quotient
        if n_dims > 2:
            quotient = rem // size2
            in_row += (rem - quotient * size2) * stride2
            rem = quotient
        if n_dims > 3:
            quotient = rem // size3
            in_row += (rem - quotient * size3) * stride3
            rem = quotient
        if n_dims > 4:
            quotient = rem // size4
            in_row += (rem - quotient * size4) * stride4
            rem = quotient
        if n_dims > 5:
            quotient = rem // size5
            in_row += (rem - quotient * size5) * stride5
            rem = quotient
        if n_dims > 6:
            quotient = rem // size6
            in_row += (rem - quotient * size6) * stride6
            rem = quotient
        if n_dims > 7:
            quotient = rem // size7
            in_row += (rem - quotient * size7) * stride7
            rem = quotient
        row_base = row * width
        lo = tl.maximum(start - row_base, 0)  # the row's part inside this block
        hi = tl.minimum(end - row_base, width)
        # row_lanes holds a row (narrow), or ROUNDS rounds hold a row's share of the block.
        for r in tl.static_range(ROUNDS):
            col = lo + r * COPY_LANES + k
            hit = (row < row_end) & (col < hi)
            value = tl.load(in_ptr + in_row + (col // WORDS) * col_stride + col % WORDS,
                            mask=hit)
            tl.store(out_ptr + row_base + col, value, mask=hit)


def diagonal_copy(
    input: torch.Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1
) -> torch.Tensor:
    """``aten::diagonal_copy``: a new contiguous tensor holding ``input.diagonal(...)``."""
    key = _key(input, offset, dim1, dim2)
    known = _PLANS.get(key) if key is not None else None
    if known is None:  # first call with this signature: validate and plan
        diag, source = _prepare(input, offset, dim1, dim2)
        known = (diag.shape, _plan(source, diag))
        remember(_PLANS, key, known)
    else:  # validated before; input's pointer is all the launch needs of it
        source = input
    sizes, plan = known
    out = torch.empty(sizes, dtype=source.dtype, device=source.device)
    if plan is not None:
        _counters.count("diagonal_copy")
        _launch(plan, (out, source))
    return out


#: (result sizes, plan) by call signature (see ``_key``).
_PLANS: dict = {}


def _key(input, offset, dim1, dim2) -> tuple | None:
    """What determines validation, result and plan; None where the fast path does not apply
    (a tensor subclass, conj/neg bits)."""
    if type(input) is not torch.Tensor or input.is_conj() or input.is_neg():
        return None
    return (input.shape, input.stride(), input.dtype, input.device, offset, dim1, dim2)


def diagonal_copy_out(
    input: torch.Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1, *, out: torch.Tensor
) -> torch.Tensor:
    """The ``.out`` overload, with aten's dtype and resize rules."""
    diag, source = _prepare(input, offset, dim1, dim2)
    return _counters.write_out(
        out, diag.shape, source.dtype, source.device,
        fill=lambda o: _fill(o, source, diag),
        compute=lambda: diagonal_copy(source, offset, dim1, dim2),
    )


def _prepare(input, offset, dim1, dim2) -> tuple[Diagonal, torch.Tensor]:
    if not isinstance(input, torch.Tensor):
        raise TypeError(f"input must be a Tensor, got {type(input).__name__}")
    diag = diagonal_of(tuple(input.shape), offset, dim1, dim2)
    check_device(input, "input")
    return diag, input.resolve_conj().resolve_neg()


def _fill(out: torch.Tensor, source: torch.Tensor, diag: Diagonal) -> None:
    """One launch gathers the diagonal of ``source`` into the contiguous ``out``."""
    plan = _plan(source, diag)
    if plan is not None:
        _counters.count("diagonal_copy")
        _launch(plan, (out, source))


def _plan(source: torch.Tensor, diag: Diagonal) -> LaunchPlan | None:
    """The launch that gathers the diagonal into a contiguous result; None when empty."""
    numel = math.prod(diag.shape)
    if numel == 0:
        return None
    words = words_per_element(source.dtype)
    strides = [s * words for s in source.stride()]
    row_dims = coalesce([
        RowDim(size, strides[d])
        for d, size in enumerate(source.shape)
        if d not in (diag.dim1, diag.dim2)
    ])
    row_sizes, row_strides = row_args(row_dims)
    base = diag.row0 * strides[diag.dim1] + diag.col0 * strides[diag.dim2]
    col_stride = strides[diag.dim1] + strides[diag.dim2]
    width = diag.length * words
    total = numel * words
    tile = plan_gather(total, width, source.element_size() // words)
    source_extent = base + sum(s * (n - 1) for s, n in zip(strides, source.shape, strict=True))
    index_64 = tile.needs_int64(total, width, source_extent + words)
    return LaunchPlan(
        diag.shape, tile.n_programs,
        (total, width, width, tile.row_lanes, tile.lane_shift, *row_sizes, *row_strides,
         len(row_dims), base, col_stride),
        {"WORDS": words, "BLOCK": tile.block, "PEEL_LANES": tile.peel_lanes,
         "COPY_LANES": tile.copy_lanes, "ROUNDS": tile.rounds, "INDEX_64": index_64},
        tile.num_warps,
    )


_launch = Launcher(_diagonal_copy_kernel)
