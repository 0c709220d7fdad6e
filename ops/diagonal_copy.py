"""diagonal_copy as one Triton launch: the strided diagonal gathered into a new tensor.

The result (contiguous: the other dims, then the diagonal) is ``[rows, width]`` words with
``width`` the diagonal's length. Two layouts of work:

* flat (``FlatTile``): each program gathers whole rows, as many as a pass of lanes holds
  (narrow), or one segment of a long row (wide), so one pass of loads covers it; a row's start
  in the input is peeled once per row, and along the row the input advances by
  ``stride(dim1) + stride(dim2)``;
* transposed tiles, for large results whose input holds the rows' innermost dim closer
  together than the diagonal's positions: the flat path's gathers would each use one word of
  a 32-byte sector, while a tile is loaded along the rows and stored along the diagonal.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from diagfuzz.core.geometry import Diagonal, diagonal_of
from diagfuzz.core.words import words_per_element
from diagfuzz.ops import _counters, _tiling
from diagfuzz.ops._runtime import INTERPRET, check_device
from diagfuzz.ops._tiling import (
    FlatTile,
    KernelArgs,
    Launcher,
    LaunchPlan,
    RowDim,
    coalesce,
    needs_int64,
    plan_cache,
    plan_gather,
    remember,
    row_args,
    shape_jit,
)


@shape_jit(aligned=1)
def _diagonal_copy_kernel(
    out_ptr, in_ptr, total, width, run_len, row_lanes, lane_shift,
    size0, size1, size2, size3, size4, size5, size6, size7,
    stride0, stride1, stride2, stride3, stride4, stride5, stride6, stride7,
    n_dims, base, col_stride, segments, group_words, block_words, n_iblocks, n_cblocks,
    WORDS: tl.constexpr, BLOCK: tl.constexpr, PEEL_LANES: tl.constexpr,
    COPY_LANES: tl.constexpr, ROUNDS: tl.constexpr, INDEX_64: tl.constexpr,
    TRANSPOSE: tl.constexpr, I_BLOCK: tl.constexpr, C_BLOCK: tl.constexpr,
):
    # No nested @triton.jit calls: the interpreter re-patches on each (see _tiling).
    # The row dims, innermost first, indexed by the peels' unrolled loops.
    sizes = (size0, size1, size2, size3, size4, size5, size6, size7)
    strides = (stride0, stride1, stride2, stride3, stride4, stride5, stride6, stride7)
    pid = tl.program_id(0)
    if INDEX_64:
        pid = pid.to(tl.int64)
    if TRANSPOSE:
        # The input holds the innermost row dim closer together than the diagonal
        # (16x16x256x256 d=(0,1): rows are contiguous, diagonal positions 17 * 65536 apart):
        # a program moves a [I_BLOCK diagonal positions, C_BLOCK rows] tile, loaded along
        # the rows and stored along the diagonal (the result's contiguous dim).
        c_block = pid % n_cblocks
        t = pid // n_cblocks
        i_block = t % n_iblocks
        other_row = (t // n_iblocks) * size0  # the tile's first row; its peel is a scalar
        rem = other_row
        in_row = other_row * 0 + base
        for j in tl.static_range(8):  # MAX_ROW_DIMS
            if n_dims > j:
                quotient = rem // sizes[j]
                in_row += (rem - quotient * sizes[j]) * strides[j]
                rem = quotient
        pos = i_block * I_BLOCK + tl.arange(0, I_BLOCK)
        c = c_block * C_BLOCK + tl.arange(0, C_BLOCK)
        if INDEX_64:
            pos = pos.to(tl.int64)
            c = c.to(tl.int64)
        hit = (pos < width)[:, None] & (c < size0)[None, :]
        value = tl.load(in_ptr + in_row + pos[:, None] * col_stride + c[None, :] * stride0,
                        mask=hit)
        tl.store(out_ptr + (other_row + c)[None, :] * width + pos[:, None], value, mask=hit)
    else:
        # A program owns block_words words of a group of group_words (segments programs a
        # group): whole rows (narrow) or a row's segment (wide), so one pass covers it.
        group = pid // segments
        group_start = group * group_words
        start = group_start + (pid - group * segments) * block_words
        end = tl.minimum(tl.minimum(start + block_words, group_start + group_words), total)
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
            for j in tl.static_range(8):  # MAX_ROW_DIMS
                if n_dims > j:
                    quotient = rem // sizes[j]
                    in_row += (rem - quotient * sizes[j]) * strides[j]
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
_PLANS: dict = plan_cache()


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
    peel_args = row_args(row_dims)
    base = diag.row0 * strides[diag.dim1] + diag.col0 * strides[diag.dim2]
    col_stride = strides[diag.dim1] + strides[diag.dim2]
    width = diag.length * words
    total = numel * words
    word_bytes = source.element_size() // words
    tile = plan_gather(total, width, word_bytes)
    source_extent = base + sum(s * (n - 1) for s, n in zip(strides, source.shape, strict=True))
    index_64 = tile.needs_int64(total, width, source_extent + words)
    segments, group_words, block_words = _groups(tile, width)
    n_programs = triton.cdiv(total, group_words) * segments
    tuning = _tiling.TUNING
    i_block, c_block = tuning.copy_transpose_i_block, tuning.copy_transpose_c_block
    tiles = (1, 1)
    transposed = words == 1 and bool(row_dims) and _transposes(
        total, width, row_dims[-1], col_stride, word_bytes)
    if transposed:
        inner = row_dims[-1].size
        tiles = (triton.cdiv(width, i_block), triton.cdiv(inner, c_block))
        n_programs = total // width // inner * tiles[0] * tiles[1]
        # A tile's masked lanes reach i_block positions and c_block rows past the last ones.
        index_64 = needs_int64(total + c_block * width + i_block, n_programs,
                               source_extent + words + i_block * abs(col_stride)
                               + c_block * abs(row_dims[-1].stride))
    return _ARGS.plan(
        diag.shape, n_programs,
        {"total": total, "width": width, "run_len": width, "row_lanes": tile.row_lanes,
         "lane_shift": tile.lane_shift, **peel_args, "base": base,
         "col_stride": col_stride, "segments": segments, "group_words": group_words,
         "block_words": block_words, "n_iblocks": tiles[0], "n_cblocks": tiles[1]},
        {"WORDS": words, "BLOCK": tile.block, "PEEL_LANES": tile.peel_lanes,
         "COPY_LANES": tile.copy_lanes, "ROUNDS": tile.rounds, "INDEX_64": index_64,
         "TRANSPOSE": transposed, "I_BLOCK": i_block, "C_BLOCK": c_block},
        tuning.copy_transpose_num_warps if transposed and not INTERPRET else tile.num_warps,
    )


def _groups(tile: FlatTile, width: int) -> tuple[int, int, int]:
    """(segments, group_words, block_words): which words each program of the flat path owns.

    On a GPU a program owns whole rows, as many as a pass holds (narrow), or one segment of
    a row (wide), so one pass of loads covers it: flat blocks crossing row ends took two
    passes, each waiting on its loads (``8x256x8x256 o=1 d=(1,3)`` float32, rows of 255
    words in blocks of 256: 0.88x aten). Under the interpreter (one program, one pass where
    possible) and with ``gather_align_rows`` off: flat blocks.
    """
    if INTERPRET or not _tiling.TUNING.gather_align_rows:
        return 1, tile.block, tile.block
    if tile.wide:
        return triton.cdiv(width, tile.block), width, tile.block
    rows = tile.peel_lanes >> tile.lane_shift
    return 1, rows * width, rows * width


def _transposes(total: int, width: int, inner: RowDim, col_stride: int,
                word_bytes: int) -> bool:
    """Whether the tiled path applies (``copy_transpose`` on): one-word elements whose
    innermost row dim the input holds closer together than the diagonal's positions, on a
    diagonal of at least two. On a GPU only results of ``copy_transpose_min_bytes`` or more
    with an innermost row dim of at least a tile's rows take it (a fuzz Case never compiles
    the variant); under the interpreter any launch of at most INTERPRET_MAX_TILES tiles.
    """
    tuning = _tiling.TUNING
    if not tuning.copy_transpose or width < 2 or abs(inner.stride) >= abs(col_stride):
        return False
    i_block, c_block = tuning.copy_transpose_i_block, tuning.copy_transpose_c_block
    if INTERPRET:
        tiles = total // width // inner.size * triton.cdiv(width, i_block) * triton.cdiv(
            inner.size, c_block)
        return tiles <= INTERPRET_MAX_TILES
    return total * word_bytes >= tuning.copy_transpose_min_bytes and inner.size >= c_block


#: Under the interpreter, the most tile programs a transposed launch may make: each costs
#: about a millisecond there (4 tiles: 5.0 ms a call against the flat path's 2.2 ms), and
#: one to four tiles already run every line of the tile path on CPU.
INTERPRET_MAX_TILES = 4

_ARGS = KernelArgs.of(_diagonal_copy_kernel)
_launch = Launcher(_diagonal_copy_kernel)
