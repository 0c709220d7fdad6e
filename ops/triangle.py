"""triu and tril as one Triton launch each: a matrix's upper or lower triangle, zeros
elsewhere.

``aten::triu(input, diagonal)`` keeps the elements of each matrix (the last two dims) whose
column minus row is at least ``diagonal`` (``tril``: at most) and gives every other one
all-zero bits: +0.0, never -0.0, and no NaN from an infinity (a mask by multiplication gets
both wrong). Any int64 ``diagonal`` is valid: one at or past a matrix's edge keeps all of it
or none, so the launcher clamps it to ``[-rows, cols]`` (the same elements kept) and the
kernel compares only small integers.

The result (``torch.empty``, contiguous: aten's structured kernel asks for no strides) is
``[rows, width]`` words, one row per matrix row of every batch. A matrix of at least
``TILE_MIN_ROWS`` rows of ``TILE_MIN_WIDTH_BYTES`` goes to the tiled kernel: one program per
``TILE_ROWS`` x ``TILE_ROW_BYTES`` tile of one matrix, its batch offset worked out once,
contiguous words along a row, so loads and stores vectorise (on an H100, 1.0 to 8.7 times
aten's speed over 8 to 128 MB: BENCHMARKS.md). Smaller matrices are covered as
diagonal_copy's flat path covers its result (``FlatTile``), many to a program: a program
owns a block of words, a pass peels its rows once (the matrix row, then the batch dims of
any strides into the input), and along a row only the column moves. Either way every word
is stored: the input's word where kept, a zero word elsewhere (a masked load with
``other=0``), so no fill precedes it.

The in-place forms (``triu_``, ``tril_``) launch the same kernel on the input's own strides
storing only the zero words (kept elements are already in place), which is what aten's CPU
kernel does wherever it updates in place (its CUDA kernel always does), an input that
overlaps itself included; where aten's CPU kernel computes elsewhere and ``copy_``s back,
the values are the same, and an input that overlaps itself is refused as ``copy_`` refuses
it.
"""

from __future__ import annotations

import math
import operator

import torch
import triton.language as tl

from diagfuzz.core.words import words_per_element
from diagfuzz.ops import _counters
from diagfuzz.ops._runtime import check_device
from diagfuzz.ops._tiling import (
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

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
#: The dtypes aten's triu and tril kernels take (CPU and CUDA alike: all types and complex,
#: and ComplexHalf, Half, BFloat16, Bool); others raise NotImplementedError, on a non-empty
#: input only (an empty one returns before aten's dtype dispatch).
SUPPORTED = frozenset({
    torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
    torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex32,
    torch.complex64, torch.complex128})


@shape_jit(aligned=1)
def _triangle_kernel(
    out_ptr, in_ptr, total, width, rows, k, row_lanes, lane_shift,
    size0, size1, size2, size3, size4, size5, size6, size7,
    stride0, stride1, stride2, stride3, stride4, stride5, stride6, stride7,
    n_dims, row_stride, col_stride,
    WORDS: tl.constexpr, BLOCK: tl.constexpr, PEEL_LANES: tl.constexpr,
    COPY_LANES: tl.constexpr, ROUNDS: tl.constexpr, INDEX_64: tl.constexpr,
    UPPER: tl.constexpr, IN_PLACE: tl.constexpr,
):
    # No nested @triton.jit calls: the interpreter re-patches on each (see _tiling).
    # The batch dims, innermost first, indexed by the peel's unrolled loop.
    sizes = (size0, size1, size2, size3, size4, size5, size6, size7)
    strides = (stride0, stride1, stride2, stride3, stride4, stride5, stride6, stride7)
    pid = tl.program_id(0)
    if INDEX_64:
        pid = pid.to(tl.int64)
    start = pid * BLOCK
    end = tl.minimum(start + BLOCK, total)
    row_end = (end - 1) // width + 1
    slot = tl.arange(0, PEEL_LANES)
    lane = tl.arange(0, COPY_LANES)
    if INDEX_64:
        slot = slot.to(tl.int64)
        lane = lane.to(tl.int64)
    slot = slot >> lane_shift  # which row of the pass
    lane = lane & (row_lanes - 1)  # which word of that row
    for row0 in range(start // width, row_end, PEEL_LANES >> lane_shift):
        row = row0 + slot
        i = row % rows  # the row within its matrix; the batch index is peeled below
        rem = row // rows
        in_row = i * row_stride
        for j in tl.static_range(8):  # MAX_ROW_DIMS
            if n_dims > j:
                quotient = rem // sizes[j]
                in_row += (rem - quotient * sizes[j]) * strides[j]
                rem = quotient
        row_base = row * width
        lo = tl.maximum(start - row_base, 0)  # the row's part inside this block
        hi = tl.minimum(end - row_base, width)
        for r in tl.static_range(ROUNDS):
            col = lo + r * COPY_LANES + lane
            hit = (row < row_end) & (col < hi)
            element = col // WORDS  # the column
            keep = element - i >= k if UPPER else element - i <= k
            at = in_ptr + in_row + element * col_stride + col % WORDS
            if IN_PLACE:
                tl.store(at, tl.zeros([COPY_LANES], dtype=in_ptr.dtype.element_ty),
                         mask=hit & ~keep)
            else:
                value = tl.load(at, mask=hit & keep, other=0)
                tl.store(out_ptr + row_base + col, value, mask=hit)


def triu(input: torch.Tensor, diagonal: int = 0) -> torch.Tensor:
    """``aten::triu``: a contiguous tensor holding the elements on and above ``diagonal``
    of each matrix of ``input``, zero bits elsewhere."""
    return _functional(input, diagonal, True, "triu")


def tril(input: torch.Tensor, diagonal: int = 0) -> torch.Tensor:
    """``aten::tril``: a contiguous tensor holding the elements on and below ``diagonal``
    of each matrix of ``input``, zero bits elsewhere."""
    return _functional(input, diagonal, False, "tril")


def triu_out(input: torch.Tensor, diagonal: int = 0, *, out: torch.Tensor) -> torch.Tensor:
    """``aten::triu.out``, with aten's dtype and resize rules."""
    return _out(input, diagonal, out, True, "triu")


def tril_out(input: torch.Tensor, diagonal: int = 0, *, out: torch.Tensor) -> torch.Tensor:
    """``aten::tril.out``, with aten's dtype and resize rules."""
    return _out(input, diagonal, out, False, "tril")


def triu_(input: torch.Tensor, diagonal: int = 0) -> torch.Tensor:
    """``aten::triu_``: zero bits below ``diagonal`` of each matrix of ``input``, written
    into ``input`` itself (whatever its strides), which is returned."""
    return _in_place(input, diagonal, True, "triu_")


def tril_(input: torch.Tensor, diagonal: int = 0) -> torch.Tensor:
    """``aten::tril_``: zero bits above ``diagonal`` of each matrix of ``input``, written
    into ``input`` itself (whatever its strides), which is returned."""
    return _in_place(input, diagonal, False, "tril_")


#: The plan (or None: nothing to launch) by call signature (see ``_key``), in a 1-tuple.
_PLANS: dict = plan_cache()


def _functional(input: torch.Tensor, diagonal: int, upper: bool,
                counter: str) -> torch.Tensor:
    """A new contiguous result, every word written by one launch counted as ``counter``."""
    key = _key(input, diagonal, upper)
    known = _PLANS.get(key) if key is not None else None
    if known is None:  # first call with this signature: validate and plan
        source, k = _prepare(input, diagonal, upper)
        known = (_plan(source, k, upper, in_place=False),)
        remember(_PLANS, key, known)
    else:  # validated before; input's pointer is all the launch needs of it
        source = input
    (plan,) = known
    out = torch.empty(source.shape, dtype=source.dtype, device=source.device)
    if plan is not None:
        _counters.count(counter)
        _launch(plan, (out, source))
    return out


def _key(input: object, diagonal: object, upper: bool) -> tuple | None:
    """What determines validation, result and plan; None where the fast path does not apply
    (not a plain int diagonal, a tensor subclass, conj/neg bits)."""
    if (type(input) is not torch.Tensor or type(diagonal) is not int or input.is_conj()
            or input.is_neg()):
        return None
    return (input.shape, input.stride(), input.dtype, input.device, diagonal, upper)


def _out(input: torch.Tensor, diagonal: int, out: torch.Tensor, upper: bool,
         counter: str) -> torch.Tensor:
    """aten's structured ``out=``: out's dtype checked before it is resized
    (``write_out``); a contiguous ``out`` is written by the one launch, unless it shares
    the input's storage (then the functional result is copied in, as aten computes
    before it writes). ``out`` the input itself is aten's in-place update."""
    if out is input:
        return _in_place(input, diagonal, upper, counter)
    source, k = _prepare(input, diagonal, upper, dtypes=False)

    def fill(o: torch.Tensor) -> None:
        _check_dtype(source, upper)  # after out's dtype check and resize, as in aten
        if _shares_storage(o, source):
            o.copy_(_functional(source, k, upper, counter))
            return
        plan = _plan(source, k, upper, in_place=False)
        if plan is not None:
            _counters.count(counter)
            _launch(plan, (o, source))

    return _counters.write_out(out, tuple(source.shape), source.dtype, source.device,
                               fill=fill,
                               compute=lambda: _functional(source, k, upper, counter))


def _in_place(input: torch.Tensor, diagonal: int, upper: bool,
              counter: str) -> torch.Tensor:
    """Zero words stored into ``input`` by one launch on its own strides, as aten's
    kernels update a matrix in place (an input that overlaps itself gets the zeros of
    every matrix that reaches a position, as there). Where aten's CPU kernel computes into
    a contiguous tensor and ``copy_``s it back instead, an input overlapping itself is
    refused with copy_'s RuntimeError, as there (aten's CUDA kernel always updates in
    place); conj/neg bits go through ``copy_`` (aten's fallback resolves them around the
    op)."""
    source, k = _prepare(input, diagonal, upper)
    if input.numel() == 0:
        return input
    if input.is_conj() or input.is_neg():
        input.copy_(_functional(source, k, upper, counter))
        return input
    if (input.device.type == "cpu" and _has_internal_overlap(input)
            and not _updates_in_place(input)):
        raise RuntimeError(
            "unsupported operation: more than one element of the written-to tensor refers "
            "to a single memory location. Please clone() the tensor before performing the "
            "operation.")
    plan = _plan(input, k, upper, in_place=True)
    if plan is not None:
        _counters.count(counter)
        _launch(plan, (input, input))
    return input


def _has_internal_overlap(t: torch.Tensor) -> bool:
    """aten's ``has_internal_overlap(t) == MemOverlap::Yes``: a zero stride on a dim of
    size > 1 of a non-empty tensor."""
    return t.numel() > 0 and any(n > 1 and s == 0 for n, s in zip(t.shape, t.stride(),
                                                                    strict=True))


def _updates_in_place(t: torch.Tensor) -> bool:
    """Whether aten's CPU kernel zeroes a non-contiguous ``t`` where it lies
    (``checkTrilTriuBatchContiguous(t, allow_zero_stride=true)``): rank 3 or less, or
    batch dims nested as a contiguous tensor's (the outermost may be expanded)."""
    if t.dim() <= 3:
        return True
    expected = t.shape[-1] * t.shape[-2]
    for d in range(t.dim() - 3, -1, -1):
        if d == 0 and (t.stride(0) == 0 or t.shape[0] == 1):
            continue
        if t.stride(d) != expected:
            return False
        expected *= t.shape[d]
    return True


def _prepare(input: torch.Tensor, diagonal: object, upper: bool,
             dtypes: bool = True) -> tuple[torch.Tensor, int]:
    """Validate like aten (TypeError for a non-tensor, RuntimeError for rank < 2, with
    ``dtypes`` NotImplementedError for a dtype aten's kernel lacks); return input as read
    (conj/neg resolved) and ``diagonal`` as an int64."""
    if not isinstance(input, torch.Tensor):
        raise TypeError(f"input must be a Tensor, got {type(input).__name__}")
    k = _int64(diagonal)
    if input.dim() < 2:
        raise RuntimeError(f"{'triu' if upper else 'tril'}: input tensor must have at least "
                           "2 dimensions")
    check_device(input, "input")
    words_per_element(input.dtype)  # TypeError for a dtype the kernels cannot move
    if dtypes:
        _check_dtype(input, upper)
    return input.resolve_conj().resolve_neg(), k


def _check_dtype(input: torch.Tensor, upper: bool) -> None:
    """aten's dtype dispatch: NotImplementedError, with its message, for a non-empty input
    of a dtype outside ``SUPPORTED``."""
    if input.numel() == 0 or input.dtype in SUPPORTED:
        return
    name = str(input.dtype).removeprefix("torch.")
    scalar = "UInt" + name[4:] if name.startswith("uint") else name[0].upper() + name[1:]
    kernel = "triu_tril_cuda_template" if input.device.type == "cuda" else (
        "triu" if upper else "tril")
    raise NotImplementedError(f'"{kernel}" not implemented for \'{scalar}\'')


def _int64(value: object) -> int:
    """``value`` as the schema's SymInt: an integer (TypeError otherwise) within int64
    (RuntimeError otherwise, as ``torch.ops`` refuses it)."""
    if isinstance(value, bool):
        raise TypeError("diagonal must be an int, got bool")
    k = operator.index(value)  # type: ignore[arg-type]
    if not INT64_MIN <= k <= INT64_MAX:
        raise RuntimeError(f"diagonal {k} is out of the range of int64")
    return k


def _shares_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether ``a`` and ``b`` are views of one storage."""
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


@shape_jit(aligned=1)
def _triangle_tiles_kernel(
    out_ptr, in_ptr, rows, width, k, tiles_m, tiles_n,
    size0, size1, size2, size3, size4, size5, size6, size7,
    stride0, stride1, stride2, stride3, stride4, stride5, stride6, stride7,
    n_dims, row_stride, col_stride,
    WORDS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    UNIT_COLS: tl.constexpr, INDEX_64: tl.constexpr, UPPER: tl.constexpr,
    IN_PLACE: tl.constexpr,
):
    # One program per BLOCK_M x BLOCK_N tile of words of one matrix: its batch offset once
    # per program, then rows and columns as a 2-D block (contiguous words along a row when
    # UNIT_COLS, so loads and stores vectorise).
    sizes = (size0, size1, size2, size3, size4, size5, size6, size7)
    strides = (stride0, stride1, stride2, stride3, stride4, stride5, stride6, stride7)
    pid = tl.program_id(0)
    if INDEX_64:
        pid = pid.to(tl.int64)
    tn = pid % tiles_n
    rest = pid // tiles_n
    tm = rest % tiles_m
    matrix = rest // tiles_m
    in_base = matrix * 0
    rem = matrix
    for j in tl.static_range(8):  # MAX_ROW_DIMS
        if n_dims > j:
            quotient = rem // sizes[j]
            in_base += (rem - quotient * sizes[j]) * strides[j]
            rem = quotient
    r = tm * BLOCK_M + tl.arange(0, BLOCK_M)[:, None]
    c = tn * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    if INDEX_64:
        r = r.to(tl.int64)
        c = c.to(tl.int64)
    inside = (r < rows) & (c < width)
    element = c // WORDS  # the column
    keep = element - r >= k if UPPER else element - r <= k
    if UNIT_COLS:
        at = in_ptr + in_base + r * row_stride + c
    else:
        at = in_ptr + in_base + r * row_stride + element * col_stride + c % WORDS
    if IN_PLACE:
        tl.store(at, tl.zeros([BLOCK_M, BLOCK_N], dtype=in_ptr.dtype.element_ty),
                 mask=inside & ~keep)
    else:
        value = tl.load(at, mask=inside & keep, other=0)
        tl.store(out_ptr + (matrix * rows + r) * width + c, value, mask=inside)


#: Rows of words a matrix needs, at least, for the tiled kernel (below it, the flat kernel
#: packs many small matrices into one program); and a tile's bytes along a row, and rows.
TILE_MIN_WIDTH_BYTES = 256
TILE_MIN_ROWS = 8
TILE_ROW_BYTES = 512
TILE_ROWS = 16
TILE_WARPS = 4


def _plan_tiles(source: torch.Tensor, k: int, upper: bool,
                in_place: bool) -> LaunchPlan | None:
    """The tiled launch, for matrices of at least ``TILE_MIN_ROWS`` rows of
    ``TILE_MIN_WIDTH_BYTES``; None where the flat kernel serves (``_plan``)."""
    shape = tuple(source.shape)
    rows, cols = shape[-2], shape[-1]
    words = words_per_element(source.dtype)
    word_bytes = source.element_size() // words
    width = cols * words
    if rows < TILE_MIN_ROWS or width * word_bytes < TILE_MIN_WIDTH_BYTES:
        return None
    strides = [s * words for s in source.stride()]
    batch = coalesce([RowDim(n, strides[d]) for d, n in enumerate(shape[:-2])])
    matrices = math.prod(shape[:-2])
    block_n = max(16, TILE_ROW_BYTES // word_bytes)
    tiles_m, tiles_n = -(-rows // TILE_ROWS), -(-width // block_n)
    n_programs = matrices * tiles_m * tiles_n
    extent = sum(s * (n - 1) for s, n in zip(strides, shape, strict=True)) + words
    return _TILE_ARGS.plan(
        shape, n_programs,
        {"rows": rows, "width": width, "k": max(-rows, min(cols, k)), "tiles_m": tiles_m,
         "tiles_n": tiles_n, **row_args(batch), "row_stride": strides[-2],
         "col_stride": strides[-1]},
        {"WORDS": words, "BLOCK_M": TILE_ROWS, "BLOCK_N": block_n,
         "UNIT_COLS": strides[-1] == words,
         "INDEX_64": needs_int64(n_programs, matrices * tiles_m * TILE_ROWS * width
                                 + tiles_n * block_n, extent + rows * abs(strides[-2])
                                 + width * abs(strides[-1])),
         "UPPER": upper, "IN_PLACE": in_place},
        TILE_WARPS,
    )


def _plan(source: torch.Tensor, k: int, upper: bool, in_place: bool) -> LaunchPlan | None:
    """The launch over every word of ``source``'s shape (the result's rows of ``width``
    words, or ``source``'s own for ``in_place``); None when there is nothing to write."""
    shape = tuple(source.shape)
    numel = math.prod(shape)
    if numel == 0:
        return None
    tiles = _plan_tiles(source, k, upper, in_place)
    if tiles is not None:
        return tiles
    rows, cols = shape[-2], shape[-1]
    words = words_per_element(source.dtype)
    strides = [s * words for s in source.stride()]
    batch = coalesce([RowDim(n, strides[d]) for d, n in enumerate(shape[:-2])])
    width = cols * words
    total = numel * words
    word_bytes = source.element_size() // words
    tile = plan_gather(total, width, word_bytes)
    extent = sum(s * (n - 1) for s, n in zip(strides, shape, strict=True)) + words
    return _ARGS.plan(
        shape, tile.n_programs,
        {"total": total, "width": width, "rows": rows,
         # Past a matrix's edge every element is kept or none is: the same elements.
         "k": max(-rows, min(cols, k)), "row_lanes": tile.row_lanes,
         "lane_shift": tile.lane_shift, **row_args(batch), "row_stride": strides[-2],
         "col_stride": strides[-1]},
        {"WORDS": words, "BLOCK": tile.block, "PEEL_LANES": tile.peel_lanes,
         "COPY_LANES": tile.copy_lanes, "ROUNDS": tile.rounds,
         "INDEX_64": tile.needs_int64(total, width, extent), "UPPER": upper,
         "IN_PLACE": in_place},
        tile.num_warps,
    )


_ARGS = KernelArgs.of(_triangle_kernel)
_TILE_ARGS = KernelArgs.of(_triangle_tiles_kernel)
_flat_launch = Launcher(_triangle_kernel)
_tiles_launch = Launcher(_triangle_tiles_kernel)


def _launch(plan: LaunchPlan, tensors: tuple[torch.Tensor, torch.Tensor]) -> None:
    """The plan's kernel (tiled or flat, by the plan's own arguments) on ``tensors``."""
    (_tiles_launch if "tiles_n" in plan.int_names else _flat_launch)(plan, tensors)
