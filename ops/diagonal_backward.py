"""diagonal_backward as one Triton launch that writes every element of a ``torch.empty`` result.

The result (contiguous, ``input_sizes``) is seen as ``[rows, width]`` words. Each program owns
a flat block of it: it stores the block as zeros (16-byte vector stores, no index work), then,
after a barrier, stores over them the diagonal's words that fall in its block. Each row of the
result holds at most one *run* of diagonal words, so a row's share of the diagonal needs only
the row's peel (one division per row dim) and adds. Two forms of run:

* columns span the second diagonal dim and every dim after it (``run_in_cols``): a row holds
  one diagonal position, whose run is the dims after the second diagonal dim (one word run
  when the second diagonal dim is innermost); grad_output must see those dims as one strided
  run, which any grad_output whose trailing dims merge does;
* otherwise (trailing dims that do not merge in grad_output) the second diagonal dim is a row
  dim, and a whole row (the innermost dim) is on the diagonal or not.

No torch.zeros and no copy: the kernel is the only data movement.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import triton
import triton.language as tl

from diagfuzz.core.geometry import Diagonal, check_sizes, diagonal_of
from diagfuzz.core.words import words_per_element
from diagfuzz.ops import _counters, _tiling
from diagfuzz.ops._runtime import INTERPRET, check_device
from diagfuzz.ops._tiling import (
    KernelArgs,
    Launcher,
    LaunchPlan,
    RowDim,
    cache_hints,
    coalesce,
    needs_int64,
    plan_cache,
    plan_fill,
    remember,
    row_args,
    shape_jit,
)


@shape_jit(aligned=1)
def _diagonal_backward_kernel(
    out_ptr, grad_ptr, total, width, run_len, row_lanes, lane_shift,
    size0, size1, size2, size3, size4, size5, size6, size7,
    stride0, stride1, stride2, stride3, stride4, stride5, stride6, stride7,
    n_dims, first_inner, first_size, second_inner, second_size, first_pos, second_pos,
    diag_base, shift, length, diag_stride, col_stride, run_in_cols, n_fill, n_iblocks, n_cblocks,
    SELECT_INDEX: tl.constexpr, WORDS: tl.constexpr, BLOCK: tl.constexpr,
    PEEL_LANES: tl.constexpr, COPY_LANES: tl.constexpr, ROUNDS: tl.constexpr,
    INDEX_64: tl.constexpr, ZERO_EVICT: tl.constexpr, GRAD_EVICT: tl.constexpr,
    TRANSPOSE: tl.constexpr, I_BLOCK: tl.constexpr, C_BLOCK: tl.constexpr,
):
    # Nested @triton.jit calls are avoided on purpose: Triton's interpreter re-patches the
    # language module on every such call, which made a CPU launch ~10x slower.
    # The row dims, innermost first, indexed by the peels' unrolled loops.
    sizes = (size0, size1, size2, size3, size4, size5, size6, size7)
    strides = (stride0, stride1, stride2, stride3, stride4, stride5, stride6, stride7)
    pid = tl.program_id(0)
    if INDEX_64:
        pid = pid.to(tl.int64)
    if TRANSPOSE:
        # Runs gathered across grad_output's diagonal dim (e.g. 16x16x256x256 d=(0,1):
        # grad_output 256x256x16). The first n_fill programs store the zeros of every block
        # off the runs (blocks lie wholly on or off a run: the plan checks); each later
        # program moves a [I_BLOCK diagonal positions, C_BLOCK run words] tile of one row
        # group, loaded along the diagonal dim (the narrower stride) and stored along the runs.
        if pid < n_fill:
            start = pid * BLOCK
            row = start // width
            first = (row // first_inner) % first_size
            run_start = (first + shift) * run_len
            col = start - row * width
            i = first - diag_base
            on_run = (i >= 0) & (i < length) & (col >= run_start) & (col < run_start + run_len)
            if not on_run:  # blocks tile the rows exactly (the plan checks): unmasked
                offs = start + tl.arange(0, BLOCK)
                zeros = tl.zeros((BLOCK,), dtype=out_ptr.dtype.element_ty)
                tl.store(out_ptr + offs, zeros, eviction_policy=ZERO_EVICT)
        else:
            t = pid - n_fill
            c_block = t % n_cblocks
            t = t // n_cblocks
            i_block = t % n_iblocks
            other = t // n_iblocks
            # The row of the group with the first diagonal dim's index 0, and its offset in
            # grad_output (the first dim has no grad_output stride): peeled once, a scalar.
            other_row = (other // first_inner) * (first_inner * first_size) + other % first_inner
            rem = other_row
            grad_row = other_row * 0
            for j in tl.static_range(8):  # MAX_ROW_DIMS
                if n_dims > j:
                    quotient = rem // sizes[j]
                    grad_row += (rem - quotient * sizes[j]) * strides[j]
                    rem = quotient
            # (Names differ from the fill branch's: Triton merges a name bound in both
            # branches of a runtime if, and a tile's are vectors where the fill's are scalars.)
            pos = i_block * I_BLOCK + tl.arange(0, I_BLOCK)
            c = c_block * C_BLOCK + tl.arange(0, C_BLOCK)
            if INDEX_64:
                pos = pos.to(tl.int64)
                c = c.to(tl.int64)
            hit = (pos < length)[:, None] & (c < run_len)[None, :]
            # diag_stride < col_stride (the plan checks): the loads run along pos.
            g = tl.load(grad_ptr + grad_row + pos[:, None] * diag_stride
                        + c[None, :] * col_stride, mask=hit,
                        eviction_policy=GRAD_EVICT)
            tile_first = diag_base + pos
            out_row = ((other_row + tile_first * first_inner) * width
                       + (tile_first + shift) * run_len)
            tl.store(out_ptr + out_row[:, None] + c[None, :], g, mask=hit)
    else:
        start = pid * BLOCK
        offs = start + tl.arange(0, BLOCK)
        zeros = tl.zeros((BLOCK,), dtype=out_ptr.dtype.element_ty)
        end = tl.minimum(start + BLOCK, total)
        if start + BLOCK <= total:  # a full block: unmasked, so the stores are 16-byte vectors
            tl.store(out_ptr + offs, zeros, eviction_policy=ZERO_EVICT)
        else:
            tl.store(out_ptr + offs, zeros, mask=offs < total, eviction_policy=ZERO_EVICT)
        # The diagonal's words below overwrite some of those zeros: order the two stores across
        # the program's threads. (Skipping the zeros of blocks lying wholly on a wide run, with
        # the run's words stored once, measured slower on the H200: their zeros then waited for
        # the row's peel; 16x16x256x256 d=(0,1) int8 12.3 -> 13.6 us, BENCHMARKS.md.)
        tl.debug_barrier()
        row_end = (end - 1) // width + 1
        slot = tl.arange(0, PEEL_LANES)
        k = tl.arange(0, COPY_LANES)
        if INDEX_64:
            slot = slot.to(tl.int64)
            k = k.to(tl.int64)
        slot = slot >> lane_shift  # which row of the pass
        k = k & (row_lanes - 1)  # which word of that row's run
        for row0 in range(start // width, row_end, PEEL_LANES >> lane_shift):
            row = row0 + slot
            # Peel each row index (innermost dim first) into grad_output's offset, one division
            # per dim. The indices along the two diagonal dims: on a GPU (SELECT_INDEX) they fall
            # out of the peel by a select; under the interpreter one division each is cheaper.
            rem = row
            grad_row = row * 0
            if SELECT_INDEX:
                first = row * 0
                second = row * 0
            else:
                first = (row // first_inner) % first_size
                second = (row // second_inner) % second_size
            for j in tl.static_range(8):  # MAX_ROW_DIMS
                if n_dims > j:
                    quotient = rem // sizes[j]
                    idx = rem - quotient * sizes[j]
                    rem = quotient
                    grad_row += idx * strides[j]
                    if SELECT_INDEX:
                        first = tl.where(first_pos == j, idx, first)
                        second = tl.where(second_pos == j, idx, second)
            # Diagonal element i sits where the second dim's index is first + shift.
            i = first - diag_base
            target = first + shift
            on_diag = (row < row_end) & (i >= 0) & (i < length)
            # Rows that hold the second diagonal dim are on the diagonal only at its target.
            on_diag = on_diag & ((second - target) * (1 - run_in_cols) == 0)
            run_start = target * run_len * run_in_cols  # the run's first column in the row
            row_base = row * width
            lo = tl.maximum(run_start, start - row_base)  # the run's part inside this block
            hi = tl.minimum(run_start + run_len, end - row_base)
            # row_lanes holds a run (narrow), or ROUNDS rounds hold a run's share of the block.
            # A wide pass is one row; most blocks of a long row miss its run: skip their lanes.
            crosses = 1
            if PEEL_LANES == 1:
                crosses = tl.max((on_diag & (hi > lo)).to(tl.int32), axis=0)
            if crosses > 0:
                for r in tl.static_range(ROUNDS):  # narrow: one round
                    col = lo + r * COPY_LANES + k
                    hit = on_diag & (col < hi)
                    word = col - run_start
                    g = tl.load(grad_ptr + grad_row + i * diag_stride + (word // WORDS) * col_stride
                                + word % WORDS, mask=hit, eviction_policy=GRAD_EVICT)
                    tl.store(out_ptr + row_base + col, g, mask=hit)


def diagonal_backward(
    grad_output: torch.Tensor, input_sizes: Sequence[int], offset: int, dim1: int, dim2: int
) -> torch.Tensor:
    """``aten::diagonal_backward``: zeros of ``input_sizes`` with grad_output on the diagonal.

    grad_output is broadcast to the diagonal's shape, as aten's ``copy_`` does; the result
    has grad_output's dtype and device and contiguous strides.
    """
    key = _key(grad_output, input_sizes, offset, dim1, dim2)
    known = _PLANS.get(key) if key is not None else None
    if known is None:  # first call with this signature: validate and plan
        sizes, diag, grad = _prepare(grad_output, input_sizes, offset, dim1, dim2)
        known = (sizes, _plan(sizes, grad, diag))
        remember(_PLANS, key, known)
    else:  # validated before; grad_output's pointer is all the launch needs of it
        grad = grad_output
    sizes, plan = known
    out = torch.empty(sizes, dtype=grad.dtype, device=grad.device)
    if plan is not None:
        _counters.count("diagonal_backward")
        _launch(plan, (out, grad))
    return out


#: (sizes, plan) by call signature (see ``_key``).
_PLANS: dict = plan_cache()


def _key(grad_output, input_sizes, offset, dim1, dim2) -> tuple | None:
    """What determines validation, result and plan; None where the fast path does not apply
    (a tensor subclass, conj/neg bits, arguments that are not plain values)."""
    if type(grad_output) is not torch.Tensor or grad_output.is_conj() or grad_output.is_neg():
        return None
    try:
        return (tuple(input_sizes), offset, dim1, dim2, grad_output.shape,
                grad_output.stride(), grad_output.dtype, grad_output.device)
    except TypeError:
        return None


def diagonal_backward_out(
    grad_output: torch.Tensor, input_sizes: Sequence[int], offset: int, dim1: int, dim2: int,
    *, out: torch.Tensor,
) -> torch.Tensor:
    """The ``.out`` overload, with aten's dtype and resize rules."""
    sizes, diag, grad = _prepare(grad_output, input_sizes, offset, dim1, dim2)
    return _counters.write_out(
        out, sizes, grad.dtype, grad.device,
        fill=lambda o: _fill(o, grad, diag),
        compute=lambda: diagonal_backward(grad, sizes, offset, dim1, dim2),
    )


def _prepare(grad_output, input_sizes, offset, dim1, dim2):
    """Validate like aten; return sizes, the diagonal, and grad_output at the diagonal's shape."""
    if not isinstance(grad_output, torch.Tensor):
        raise TypeError(f"grad_output must be a Tensor, got {type(grad_output).__name__}")
    sizes = check_sizes(input_sizes, "input_sizes")
    diag = diagonal_of(sizes, offset, dim1, dim2)
    check_device(grad_output, "grad_output")
    if tuple(grad_output.shape) != diag.shape:
        grad_output = grad_output.expand(diag.shape)  # aten broadcasts; raises like aten
    return sizes, diag, grad_output.resolve_conj().resolve_neg()


def _fill(out: torch.Tensor, grad: torch.Tensor, diag: Diagonal) -> None:
    """One launch writes every element of the contiguous ``out``."""
    plan = _plan(tuple(out.shape), grad, diag)
    if plan is not None:
        _counters.count("diagonal_backward")
        _launch(plan, (out, grad))


def _plan(sizes: tuple[int, ...], grad: torch.Tensor, diag: Diagonal) -> LaunchPlan | None:
    """The launch that writes a contiguous result of ``sizes``; None when it is empty."""
    numel = math.prod(sizes)
    if numel == 0:
        return None
    words = words_per_element(grad.dtype)
    first_dim, second_dim = sorted((diag.dim1, diag.dim2))
    # Index along the first dim is p; the second dim's index is p + shift on the diagonal.
    if first_dim == diag.dim1:
        diag_base, shift = diag.row0, diag.col0 - diag.row0
    else:
        diag_base, shift = diag.col0, diag.row0 - diag.col0
    grad_strides = iter(s * words for s in grad.stride()[:-1])
    dims = []
    for d, size in enumerate(sizes):
        if d == first_dim:
            dims.append(RowDim(size, 0, "first"))
        elif d == second_dim:
            dims.append(RowDim(size, 0, "second"))
        else:
            dims.append(RowDim(size, next(grad_strides)))
    diag_stride = grad.stride()[-1] * words
    trailing = coalesce(dims[second_dim + 1:])
    if len(trailing) <= 1:  # columns: the second diagonal dim and one run after it
        run_in_cols = 1
        run_elements = trailing[0].size if trailing else 1
        col_stride = trailing[0].stride if trailing else 0
        run_len = run_elements * words
        width = sizes[second_dim] * run_len
        row_dims = coalesce(dims[:second_dim])
    else:  # rows: everything but the innermost run; a row is on the diagonal or not
        run_in_cols = 0
        merged = coalesce(dims)
        width = run_len = merged[-1].size * words
        col_stride = merged[-1].stride
        row_dims = merged[:-1]
    first_inner, first_size = _index_divisor(row_dims, "first")
    second_inner, second_size = _index_divisor(row_dims, "second")
    peel_args = row_args(row_dims)
    total = numel * words
    word_bytes = grad.element_size() // words
    tile = plan_fill(total, width, run_len, word_bytes, len(row_dims))
    grad_extent = sum(s * (n - 1) for s, n in zip(grad.stride(), grad.shape, strict=True)) * words
    index_64 = tile.needs_int64(total, width, grad_extent + words)
    n_programs, block, tiles, num_warps = tile.n_programs, tile.block, (0, 1, 1), tile.num_warps
    tuning = _tiling.TUNING
    transposed = (words == 1 and run_in_cols == 1 and diag_stride < col_stride
                  and _transpose_block(total, width, run_len, diag.length, word_bytes))
    if transposed:
        # The large plans' block and warps at every size over 1 MB (the huge outputs' tier
        # is for the flat fill; its lane constexprs, unused here, only name the variant).
        block = transposed
        num_warps = tile.num_warps if INTERPRET else tuning.fill_num_warps
        tiles = (total // block, triton.cdiv(diag.length, tuning.transpose_i_block),
                 triton.cdiv(run_len, tuning.transpose_c_block))
        n_programs = tiles[0] + total // width // first_size * tiles[1] * tiles[2]
        # A tile's masked lanes reach I_BLOCK diagonal positions and C_BLOCK run words past
        # the last ones: their offsets must not overflow either.
        i_pad, c_pad = tuning.transpose_i_block, tuning.transpose_c_block
        index_64 = needs_int64(
            total + width + run_len + block + i_pad * (first_inner * width + run_len) + c_pad,
            grad_extent + words + i_pad * diag_stride + c_pad * col_stride, n_programs)
    return _ARGS.plan(
        sizes, n_programs,
        {"total": total, "width": width, "run_len": run_len, "row_lanes": tile.row_lanes,
         "lane_shift": tile.lane_shift, **peel_args,
         "first_inner": first_inner, "first_size": first_size,
         "second_inner": second_inner, "second_size": second_size,
         "first_pos": _position(row_dims, "first"), "second_pos": _position(row_dims, "second"),
         "diag_base": diag_base, "shift": shift, "length": diag.length,
         "diag_stride": diag_stride, "col_stride": col_stride, "run_in_cols": run_in_cols,
         "n_fill": tiles[0], "n_iblocks": tiles[1], "n_cblocks": tiles[2]},
        {"SELECT_INDEX": not INTERPRET, "WORDS": words, "BLOCK": block,
         "PEEL_LANES": tile.peel_lanes,
         "COPY_LANES": tile.copy_lanes, "ROUNDS": tile.rounds, "INDEX_64": index_64,
         **cache_hints(), "TRANSPOSE": bool(transposed),
         "I_BLOCK": tuning.transpose_i_block, "C_BLOCK": tuning.transpose_c_block},
        num_warps,
    )


def _transpose_block(total: int, width: int, run_len: int, length: int,
                     word_bytes: int) -> int:
    """The zero-fill block of a transposed launch, or 0 where it does not apply.

    It applies (with ``transpose_runs`` on) to runs of at least two diagonal positions of
    one-word elements that grad_output keeps closer together along the diagonal dim than
    along the run (the plan checks the strides), when fill blocks can lie wholly
    on or off each run: the block divides both the row width and the run. On a GPU only large
    outputs take it (a fuzz-sized Case never compiles this variant) and the block is the
    large fill plan's (``fill_block_bytes``, also from 256 MB: the huge tier is the flat
    fill's); under the interpreter the largest power of two dividing both, unless
    that makes more than INTERPRET_MAX_FILL_PROGRAMS programs (an odd run gives 1-word
    blocks: a (4,4,1023) Case took 25 s instead of 22 ms, each program costing ~1.5 ms).
    """
    tuning = _tiling.TUNING
    if not tuning.transpose_runs or length < 2:
        return 0
    if INTERPRET:
        common = math.gcd(width, run_len)
        block = min(common & -common, 1 << 16)
        return block if total // block <= INTERPRET_MAX_FILL_PROGRAMS else 0
    if total * word_bytes <= tuning.small_output_bytes:
        return 0
    block = tuning.fill_block_bytes // word_bytes
    return block if width % block == 0 and run_len % block == 0 else 0


#: Under the interpreter, the most zero-fill programs a transposed launch may make.
INTERPRET_MAX_FILL_PROGRAMS = 256

_ARGS = KernelArgs.of(_diagonal_backward_kernel)
_launch = Launcher(_diagonal_backward_kernel)


def _position(row_dims: list[RowDim], tag: str) -> int:
    """Where the tagged dim is peeled (0 = innermost); -1 when absent."""
    tags = [d.tag for d in reversed(row_dims)]
    return tags.index(tag) if tag in tags else -1


def _index_divisor(row_dims: list[RowDim], tag: str) -> tuple[int, int]:
    """(product of the sizes inside the tagged row dim, its size); (1, 1) when absent."""
    inner = 1
    for dim in reversed(row_dims):
        if dim.tag == tag:
            return inner, dim.size
        inner *= dim.size
    return 1, 1
