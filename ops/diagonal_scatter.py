"""diagonal_scatter as one Triton launch: a copy of ``input`` with ``src`` on its diagonal.

What aten returns (``at::native::diagonal_scatter``: ``clone_preserve_strides(self)``, then
``copy_`` of src into the clone's diagonal view), and so what this launcher returns:

* an input with no zero stride on a dim of size > 1 (aten's ``has_internal_overlap`` is not
  ``Yes``): a clone of the input's *whole storage* (every element, also those the view never
  addresses), viewed with the input's sizes, strides and storage offset ("clone" mode);
* an input with such a zero stride (expanded): ``input.clone()``, i.e. ``empty_like(input)``
  (dense, in the stride order aten infers) holding the input's elements ("gather" mode).

src's elements then sit on that result's diagonal positions. src must have the diagonal's
shape exactly (no broadcasting: RuntimeError, aten's message); aten's ``copy_`` converts any
dtype and device, so a src of another dtype or device goes through that same aten
conversion first. Inputs with conj or neg bits reach aten's kernel resolved (its
Conjugate/Negative fallback); the launcher resolves them too, so both see the same tensor.

One launch, whatever the mode. Each program owns a block of the result's storage words: it
copies them (clone: 16-byte vector loads and stores of the storage, no index work; gather:
each word's element peeled into the input's strides), then, after a barrier, stores src's
words on the diagonal positions inside its block (in clone mode the first round of those
is loaded before the copy, so a block waits on memory once). Which diagonal elements those
are: sorted by the result's strides (outermost first), the diagonal's dims address the storage in
increasing order when each stride exceeds the extent of the dims inside it, which holds for
every layout made by slicing, permuting or expanding a dense tensor (and so for every dense
result). A block's diagonal elements are then one run of that order, found from the block's
two ends with one division per dim, and each is peeled into its storage and src positions.
A block every word of which is on the diagonal copies nothing. A diagonal that is not so
ordered (only ``as_strided`` makes one) is scanned whole by every program; one whose
positions repeat would make aten's result depend on the order of its ``copy_``'s writes,
and is refused (RuntimeError).

A diagonal of long runs (its innermost merged dim contiguous in the result: d=(0,1) of
16x16x256x256 is 16 runs of 65,536 elements) is stored by programs of its own instead, each
a part of one run, in 16-byte vectors (and read so where src's runs are contiguous too), or,
where src holds consecutive runs side by side, a tile of up to 16 runs read row by row; the
blocks' copies leave the runs' words out, so no two programs write one word and no barrier
is needed, and blocks wholly inside a run copy nothing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from diagfuzz.core.geometry import Diagonal, diagonal_of
from diagfuzz.core.words import words_per_element
from diagfuzz.ops import _counters, _tiling
from diagfuzz.ops._runtime import check_device
from diagfuzz.ops._tiling import (
    MAX_ROW_DIMS,
    KernelArgs,
    Launcher,
    LaunchPlan,
    RowDim,
    coalesce,
    needs_int64,
    plan_cache,
    plan_diag_lanes,
    plan_run_block,
    plan_scatter,
    plan_tail,
    remember,
    row_args,
    shape_jit,
)

#: Pointers specialised on 16-byte alignment: the result's, the storage it copies from and
#: src's (runs of a diagonal stored whole: ``_run_align``).
_ALIGNED = 3


@shape_jit(aligned=_ALIGNED)
def _diagonal_scatter_kernel(
    out_ptr, in_ptr, src_ptr, total, in_base, outer_stride,
    size0, size1, size2, size3, size4, size5, size6, size7,
    stride0, stride1, stride2, stride3, stride4, stride5, stride6, stride7, n_dims,
    dsize0, dsize1, dsize2, dsize3, dsize4, dsize5, dsize6, dsize7,
    dout0, dout1, dout2, dout3, dout4, dout5, dout6, dout7,
    dsrc0, dsrc1, dsrc2, dsrc3, dsrc4, dsrc5, dsrc6, dsrc7,
    n_ddims, diag_base, n_diag, monotone, run_programs, run_chunks,
    WORDS: tl.constexpr, BLOCK: tl.constexpr, GATHER: tl.constexpr, INDEX_64: tl.constexpr,
    DIAG_LANES: tl.constexpr, COPY_EVICT: tl.constexpr, DIAG_RUNS: tl.constexpr,
    TAIL_BLOCK: tl.constexpr, RUN_BLOCK: tl.constexpr, RUN_OUT_ALIGN: tl.constexpr,
    RUN_SRC_ALIGN: tl.constexpr, RUN_TILE: tl.constexpr, PREFETCH: tl.constexpr,
):
    # No nested @triton.jit calls: the interpreter re-patches on each (see _tiling).
    # The peeled dims and the diagonal's dims, innermost first, indexed by the peels'
    # unrolled loops.
    sizes = (size0, size1, size2, size3, size4, size5, size6, size7)
    strides = (stride0, stride1, stride2, stride3, stride4, stride5, stride6, stride7)
    dsizes = (dsize0, dsize1, dsize2, dsize3, dsize4, dsize5, dsize6, dsize7)
    douts = (dout0, dout1, dout2, dout3, dout4, dout5, dout6, dout7)
    dsrcs = (dsrc0, dsrc1, dsrc2, dsrc3, dsrc4, dsrc5, dsrc6, dsrc7)
    pid = tl.program_id(0)
    if INDEX_64:
        pid = pid.to(tl.int64)
    # Runs: the first run_programs programs store the diagonal, the rest copy blocks of the
    # result's storage around it (run_programs is 0 otherwise).
    start = (pid - run_programs) * BLOCK
    offs = start + tl.arange(0, BLOCK)
    end = tl.minimum(start + BLOCK, total)
    el_start = start // WORDS
    el_end = end // WORDS
    # How many diagonal elements lie below each end of the block, both ends at once: with
    # the dims sorted outermost first, an element's position grows with its index tuple,
    # so a greedy division per dim counts them (q <= 0 and a dim's index past its size end
    # the count; the last dim's remainder says whether the tuple itself lies below).
    ends = el_start + tl.arange(0, 2) * (el_end - el_start)
    q = ends - diag_base
    count = q * 0
    done = q <= 0
    inner = count + n_diag
    for j in tl.static_range(7, -1, -1):  # MAX_ROW_DIMS dims, outermost first
        if n_ddims > j:
            inner = inner // dsizes[j]
            idx = tl.minimum(tl.maximum(q, 0) // douts[j], dsizes[j])
            count += tl.where(done, 0, idx * inner)
            done = done | (idx >= dsizes[j])
            q = q - idx * douts[j]
    count += tl.where(done, 0, (q > 0).to(count.dtype))
    which = tl.arange(0, 2)
    lo = tl.sum(tl.where(which == 0, count, 0), axis=0)
    hi = tl.sum(tl.where(which == 1, count, 0), axis=0)
    # An unordered diagonal: every element, each checked against the block below.
    lo = tl.where(monotone != 0, lo, 0)
    hi = tl.where(monotone != 0, hi, n_diag)
    if not DIAG_RUNS:
        # Round one's src words, loaded before phase 1's copy so that both wait on memory
        # together: after the barrier round one only stores (a block holding at most
        # DIAG_LANES diagonal elements, all but the largest diagonals', waits once, not twice).
        lanes = tl.arange(0, DIAG_LANES)
        if INDEX_64:
            lanes = lanes.to(tl.int64)
        lane_words = tl.arange(0, WORDS)[None, :]
        first_at = tl.zeros([DIAG_LANES, 1], dtype=lanes.dtype)
        first_hit = first_at != 0
        first_words = tl.zeros([DIAG_LANES, WORDS], dtype=src_ptr.dtype.element_ty)
        if PREFETCH:  # noqa: SIM102 (a compile-time if around a run-time one)
            if lo < hi:
                f_rest = lo + lanes
                f_pos = f_rest * 0 + diag_base
                f_src = f_rest * 0
                for j in tl.static_range(8):  # MAX_ROW_DIMS
                    if n_ddims > j:
                        f_quot = f_rest // dsizes[j]
                        f_idx = f_rest - f_quot * dsizes[j]
                        f_pos += f_idx * douts[j]
                        f_src += f_idx * dsrcs[j]
                        f_rest = f_quot
                f_hit = (lo + lanes < hi) & (f_pos >= el_start) & (f_pos < el_end)
                first_hit = f_hit[:, None]
                first_at = f_pos[:, None] * WORDS
                first_words = tl.load(src_ptr + f_src[:, None] * WORDS + lane_words,
                                      mask=first_hit)
    # Phase 1: the block's words, unless a diagonal element overwrites each of them
    # (distinct positions, as many as the block's elements) or the program stores a run.
    covered = (pid < run_programs) | ((monotone != 0) & (hi - lo == el_end - el_start))
    plain = start + BLOCK <= total  # full (and without runs): unmasked, so vectors
    if DIAG_RUNS:
        # The diagonal is runs of dsize0 elements contiguous in the result (its innermost
        # merged dim, as d=(0,1) of 16x16x256x256; src's stride there is dsrc0). The run
        # programs store them: the copy leaves their words out.
        run_len = dsizes[0]
        first_run = lo // run_len
        past_run = (hi + run_len - 1) // run_len
        plain = plain & (first_run >= past_run)
    if covered == 0:
        if plain & (GATHER == 0):
            # The input's storage word for word in 16-byte vectors, every load in flight.
            tl.store(out_ptr + offs, tl.load(in_ptr + offs, eviction_policy=COPY_EVICT),
                     eviction_policy=COPY_EVICT)
        else:
            # TAIL_BLOCK words at a time: a mask (or a gather's offsets) for every word of
            # a BLOCK of bytes held 255 registers and spilt (ptxas -v, sm_90), for the
            # whole kernel.
            for sub in range(0, BLOCK, TAIL_BLOCK):
                t_offs = start + sub + tl.arange(0, TAIL_BLOCK)
                if GATHER:
                    # The result is dense: a word's element index peels, innermost dim
                    # first, into the input's strides (in words); the outermost dim needs
                    # no division.
                    element = t_offs // WORDS
                    rem = element
                    in_off = in_base + (t_offs - element * WORDS)
                    for j in tl.static_range(8):  # MAX_ROW_DIMS
                        if n_dims > j:
                            quotient = rem // sizes[j]
                            in_off += (rem - quotient * sizes[j]) * strides[j]
                            rem = quotient
                    t_from = in_ptr + in_off + rem * outer_stride
                else:
                    t_from = in_ptr + t_offs
                if plain:
                    tl.store(out_ptr + t_offs, tl.load(t_from))
                else:
                    t_keep = t_offs < total
                    if DIAG_RUNS:
                        # The words before each run, a copy each: no mask is carried through
                        # the loop (one carried through it held 145 registers for int8; 72).
                        t_el = t_offs // WORDS
                        gap = el_start
                        for k in range(first_run, past_run):
                            # Run k's first element: k peeled over the outer diagonal dims.
                            k_rest = k
                            run_pos = k * 0 + diag_base
                            for j in tl.static_range(1, 8):  # MAX_ROW_DIMS
                                if n_ddims > j:
                                    k_quot = k_rest // dsizes[j]
                                    run_pos += (k_rest - k_quot * dsizes[j]) * douts[j]
                                    k_rest = k_quot
                            t_gap = t_keep & (t_el >= gap) & (t_el < run_pos)
                            t_words = tl.load(t_from, mask=t_gap, eviction_policy=COPY_EVICT)
                            tl.store(out_ptr + t_offs, t_words, mask=t_gap,
                                     eviction_policy=COPY_EVICT)
                            gap = run_pos + run_len
                        t_keep = t_keep & (t_el >= gap)
                    t_words = tl.load(t_from, mask=t_keep, eviction_policy=COPY_EVICT)
                    tl.store(out_ptr + t_offs, t_words, mask=t_keep, eviction_policy=COPY_EVICT)
    if DIAG_RUNS:
        if pid < run_programs:
            # Part ``r_part`` (of run_chunks) of RUN_TILE runs from run r_group * RUN_TILE
            # (one run where RUN_TILE is 1): the first run's start peeled over the outer
            # diagonal dims, in the result (r_pos) and in src (r_src).
            r_group = pid // run_chunks
            r_part = pid - r_group * run_chunks
            r_rest = r_group * RUN_TILE
            r_pos = r_rest * 0 + diag_base
            r_src = r_rest * 0
            for j in tl.static_range(1, 8):  # MAX_ROW_DIMS
                if n_ddims > j:
                    r_quot = r_rest // dsizes[j]
                    r_idx = r_rest - r_quot * dsizes[j]
                    r_pos += r_idx * douts[j]
                    r_src += r_idx * dsrcs[j]
                    r_rest = r_quot
            if RUN_TILE > 1:
                # RUN_TILE runs side by side, RUN_BLOCK // RUN_TILE elements of each: the runs
                # are consecutive along the diagonal's next dim, where src's stride is 1 (src
                # holds them innermost: 16x16x256x256's default src, (256, 256, 16)), so a row
                # of the tile is contiguous in src and a column in the result (read run by
                # run, each src word takes a 32-byte sector of its own).
                u_runs = tl.arange(0, RUN_TILE)
                u_el = tl.arange(0, RUN_BLOCK // RUN_TILE)
                if INDEX_64:
                    u_runs = u_runs.to(tl.int64)
                    u_el = u_el.to(tl.int64)
                u_el += r_part * (RUN_BLOCK // RUN_TILE)
                u_keep = (u_el < dsizes[0])[:, None]
                u_words = tl.load(src_ptr + r_src + u_runs[None, :] + (u_el * dsrc0)[:, None],
                                  mask=u_keep)
                tl.store(out_ptr + r_pos + (u_runs * dout1)[None, :] + u_el[:, None], u_words,
                         mask=u_keep)
            else:
                # RUN_BLOCK words of one run from its element ``r_first``.
                # Runs store (RUN_OUT_ALIGN), and contiguous src runs load (RUN_SRC_ALIGN),
                # whole vectors: the planner proves every part's start a multiple of those
                # words (the pointers are specialised on 16 bytes).
                r_first = r_part * (RUN_BLOCK // WORDS)
                r_words = tl.arange(0, RUN_BLOCK)
                if INDEX_64:
                    r_words = r_words.to(tl.int64)
                r_el = r_first + r_words // WORDS
                r_word = r_words - (r_words // WORDS) * WORDS
                # (The hints sit on an add of two unknowns: canonicalisation folds a "* 1"
                # or an add of a constant, and an op it replaces loses its hint.)
                r_at = tl.multiple_of(r_pos * WORDS + r_first * WORDS, RUN_OUT_ALIGN)
                r_out = out_ptr + r_at + r_words
                if RUN_SRC_ALIGN:
                    r_from = tl.multiple_of(r_src * WORDS + r_first * WORDS, RUN_SRC_ALIGN)
                    r_in = src_ptr + r_from + r_words
                else:
                    r_in = src_ptr + (r_src + r_el * dsrc0) * WORDS + r_word
                if r_first + RUN_BLOCK // WORDS <= dsizes[0]:
                    tl.store(r_out, tl.load(r_in))
                else:
                    r_mask = r_el < dsizes[0]
                    tl.store(r_out, tl.load(r_in, mask=r_mask), mask=r_mask)
    elif lo < hi:
        # Phase 2 overwrites some of phase 1's words: order the two phases across threads
        # (a block without diagonal elements, most of a large one's, skips the barrier).
        tl.debug_barrier()
        rounds_from = lo
        if PREFETCH:
            tl.store(out_ptr + first_at + lane_words, first_words, mask=first_hit)
            rounds_from = lo + DIAG_LANES
        for r0 in range(rounds_from, hi, DIAG_LANES):
            r = r0 + lanes
            # Peel each element index into its storage position and src offset (elements);
            # every dim takes a remainder, so lanes past the end stay inside both extents.
            # (Names differ from phase 1's: Triton carries a name bound before a loop and
            # rebound in it through the loop, at one type, and phase 1's are BLOCK-wide.)
            r_rest = r
            pos = r * 0 + diag_base
            src_off = r * 0
            for j in tl.static_range(8):  # MAX_ROW_DIMS
                if n_ddims > j:
                    r_quot = r_rest // dsizes[j]
                    idx_v = r_rest - r_quot * dsizes[j]
                    pos += idx_v * douts[j]
                    src_off += idx_v * dsrcs[j]
                    r_rest = r_quot
            hit = ((r < hi) & (pos >= el_start) & (pos < el_end))[:, None]
            value = tl.load(src_ptr + src_off[:, None] * WORDS + lane_words, mask=hit)
            tl.store(out_ptr + pos[:, None] * WORDS + lane_words, value, mask=hit)


@dataclass(frozen=True)
class Result:
    """The result's metadata, as aten makes it: ``clone`` (the input's storage, sizes,
    strides and storage offset) or gather (dense ``strides``, offset 0)."""

    clone: bool
    sizes: tuple[int, ...]
    strides: tuple[int, ...]
    storage_offset: int
    #: elements of the result's storage (clone: the input's whole storage)
    storage_numel: int
    #: the input itself starts its storage and spans it contiguously (no base view needed)
    whole: bool


def diagonal_scatter(
    input: torch.Tensor, src: torch.Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1
) -> torch.Tensor:
    """``aten::diagonal_scatter``: a new tensor laid out as aten lays it out (module
    docstring), holding ``input`` with ``src`` on the diagonal ``(offset, dim1, dim2)``."""
    key = _key(input, src, offset, dim1, dim2)
    known = _PLANS.get(key) if key is not None else None
    if known is None:  # first call with this signature: validate and plan
        source, values, diag = _prepare(input, src, offset, dim1, dim2)
        result = _result(source)
        known = (result, _plan(source, values, diag, result.clone, result.strides,
                               result.storage_offset, result.storage_numel))
        remember(_PLANS, key, known)
    else:  # validated before; the pointers are all the launch needs of the tensors
        source, values = input, src
    result, plan = known
    if result.clone:
        out = torch.empty(result.storage_numel, dtype=source.dtype, device=source.device)
    else:
        out = torch.empty_strided(result.sizes, result.strides, dtype=source.dtype,
                                  device=source.device)
    if plan is not None:
        _counters.count("diagonal_scatter")
        _launch(plan, (out, source if result.whole else _storage_of(source, result), values))
    if result.clone:
        out.as_strided_(result.sizes, result.strides, result.storage_offset)
    return out


#: (Result, plan) by call signature (see ``_key``).
_PLANS: dict = plan_cache()


def _key(input: object, src: object, offset: int, dim1: int, dim2: int) -> tuple | None:
    """What determines validation, result and plan; None where the fast path does not apply
    (tensor subclasses, conj/neg bits, a src aten's copy_ converts first)."""
    if (type(input) is not torch.Tensor or type(src) is not torch.Tensor or input.is_conj()
            or input.is_neg() or src.is_conj() or src.is_neg() or src.dtype != input.dtype
            or src.device != input.device):
        return None
    return (input.shape, input.stride(), input.storage_offset(),
            input.untyped_storage().nbytes(), input.dtype, input.device, src.shape,
            src.stride(), offset, dim1, dim2)


def diagonal_scatter_out(
    input: torch.Tensor, src: torch.Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1,
    *, out: torch.Tensor,
) -> torch.Tensor:
    """The ``.out`` overload: aten's generated out= wrapper (its functional result, resized
    into ``out``, same dtype and device or RuntimeError). A contiguous ``out`` is written by
    one launch in gather mode where that gives the functional result's elements: the input's
    elements each have their own storage position, or it is expanded (aten clones it
    dense); otherwise the functional result is copied in, as aten does."""
    source, values, diag = _prepare(input, src, offset, dim1, dim2)
    fill = None
    if _has_internal_overlap(source) or _non_overlapping(source):
        def fill(o: torch.Tensor) -> None:
            plan = _plan(source, values, diag, False, o.stride(), 0, o.numel())
            if plan is not None:
                _counters.count("diagonal_scatter")
                _launch(plan, (o, _storage_of(source, _result(source)), values))
    return _counters.write_generated_out(
        out, tuple(source.shape), source.dtype, source.device, reads=(input, src), fill=fill,
        compute=lambda: diagonal_scatter(source, values, offset, dim1, dim2),
    )


def _prepare(input: torch.Tensor, src: torch.Tensor, offset: int, dim1: int,
             dim2: int) -> tuple[torch.Tensor, torch.Tensor, Diagonal]:
    """Validate like aten; return the input and src as the kernel reads them (conj/neg
    resolved, src in the input's dtype and on its device) and the diagonal."""
    if not isinstance(input, torch.Tensor):
        raise TypeError(f"input must be a Tensor, got {type(input).__name__}")
    if not isinstance(src, torch.Tensor):
        raise TypeError(f"src must be a Tensor, got {type(src).__name__}")
    check_device(input, "input")
    source = input.resolve_conj().resolve_neg()
    if not _has_internal_overlap(source):
        _storage_numel(source)  # aten's clone_preserve_strides asserts first
    diag = diagonal_of(tuple(source.shape), offset, dim1, dim2)
    if tuple(src.shape) != diag.shape:
        raise RuntimeError(
            "expected src to have a size equal to the slice of self. src size = "
            f"{list(src.shape)}, slice size = {list(diag.shape)}")
    return source, _converted(src.resolve_conj().resolve_neg(), source), diag


def _converted(src: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """src as aten's ``copy_`` reads it into ``like``: converted on the CPU before a move
    from the CPU (a blocking copy converts there), after the move otherwise."""
    if src.dtype == like.dtype and src.device == like.device:
        return src
    if src.device.type == "cpu":
        return src.to(dtype=like.dtype).to(device=like.device)
    return src.to(device=like.device).to(dtype=like.dtype)


def _has_internal_overlap(t: torch.Tensor) -> bool:
    """aten's ``has_internal_overlap(t) == MemOverlap::Yes``: a zero stride on a dim of
    size > 1, unless ``t`` is non-overlapping and dense, as every empty tensor is (it is
    contiguous whatever its strides); a non-empty one with such a stride never is."""
    return t.numel() > 0 and any(n > 1 and s == 0 for n, s in zip(t.shape, t.stride(),
                                                                    strict=True))


def _non_overlapping(t: torch.Tensor) -> bool:
    """Whether every element of ``t`` has its own storage position: sorted by stride, each
    stride of a dim of size > 1 exceeds the extent of the dims inside it (sufficient)."""
    extent = 0
    for size, stride in sorted((d for d in zip(t.shape, t.stride(), strict=True) if d[0] > 1),
                               key=lambda d: d[1]):
        if stride <= extent:
            return False
        extent += stride * (size - 1)
    return True


def _storage_numel(t: torch.Tensor) -> int:
    """Elements of ``t``'s whole storage; aten's internal assert where bytes do not divide."""
    nbytes = t.untyped_storage().nbytes()
    if nbytes % t.element_size():
        raise RuntimeError(
            "nbytes % dtype_size == 0 INTERNAL ASSERT FAILED (diagfuzz: the storage of "
            f"{nbytes} bytes does not hold whole {t.dtype} elements, as aten's "
            "clone_preserve_strides asserts)")
    return nbytes // t.element_size()


def _result(source: torch.Tensor) -> Result:
    """The result's metadata, as aten's ``clone_preserve_strides`` makes it."""
    sizes = tuple(source.shape)
    if _has_internal_overlap(source):  # aten: self.clone(), i.e. empty_like(self)
        like = torch.empty_like(torch.empty_strided(sizes, source.stride(), dtype=source.dtype,
                                                    device="meta"))
        return Result(False, sizes, like.stride(), 0, math.prod(sizes), False)
    numel = _storage_numel(source)
    whole = (source.storage_offset() == 0 and source.is_contiguous()
             and source.numel() == numel)
    return Result(True, sizes, source.stride(), int(source.storage_offset()), numel, whole)


def _storage_of(source: torch.Tensor, result: Result) -> torch.Tensor:
    """The input's storage from its first element, as a flat tensor (the kernel's input
    pointer is always the storage's start: allocator aligned, one variant)."""
    numel = result.storage_numel if result.clone else (
        source.untyped_storage().nbytes() // source.element_size())
    return source.as_strided((numel,), (1,), 0)


def _plan(source: torch.Tensor, src: torch.Tensor, diag: Diagonal, clone: bool,
          out_strides: Sequence[int], out_offset: int, out_numel: int) -> LaunchPlan | None:
    """The launch that writes a result of ``out_numel`` storage elements; None when empty.

    ``clone``: the result's storage is the input's (copied whole); otherwise the result is
    dense with ``out_strides`` and gathers the input's elements.
    """
    words = words_per_element(source.dtype)
    total = out_numel * words
    if total == 0:
        return None
    word_bytes = source.element_size() // words
    # Phase 1, gather: the dims in the result's storage order, outermost first.
    in_base = outer_stride = 0
    peeled: list[RowDim] = []
    in_extent = 0
    if not clone:
        order = sorted(range(source.dim()), key=lambda d: out_strides[d], reverse=True)
        rows = coalesce([RowDim(source.shape[d], source.stride(d) * words) for d in order])
        in_base = int(source.storage_offset()) * words
        if rows:
            outer_stride, peeled = rows[0].stride, rows[1:]
        in_extent = in_base + sum(r.stride * (r.size - 1) for r in rows) + words
    peel_args = row_args(peeled)
    # Phase 2: the diagonal's dims (size, result stride, src stride), outermost first.
    dims, monotone, n_diag = _diagonal_dims(source, src, diag, out_strides)
    diag_args = _diagonal_args(dims)
    diag_base = out_offset + diag.row0 * out_strides[diag.dim1] + diag.col0 * out_strides[
        diag.dim2]
    block, lanes, num_warps = plan_scatter(total, word_bytes, n_diag, not clone)
    tail = plan_tail(block, word_bytes, num_warps)
    runs = _runs(dims, monotone, words, block)
    if not runs:  # (runs take no rounds)
        gap = (dims[-1][1] if dims else 1) if monotone else 0  # (no dims: one element)
        lanes = plan_diag_lanes(lanes, block // words, gap, n_diag)
    run_block, run_chunks, run_programs, run_tile = 2, 1, 0, 1
    if runs:
        run_len = dims[-1][0]
        run_block = min(plan_run_block(block, n_diag * words),
                        triton.next_power_of_2(max(run_len * words, 2)))
        if dims[-1][2] != 1:  # gathered word by word: an address a word, in registers
            run_block = min(run_block, tail)
            run_tile = _run_tile(dims, words)
        if run_tile > 1:  # RUN_BLOCK // run_tile elements of run_tile runs a program
            run_block = max(run_block, 2 * run_tile)
            run_chunks = triton.cdiv(run_len, run_block // run_tile)
        else:
            run_chunks = triton.cdiv(run_len * words, run_block)
        run_programs = n_diag // run_len // run_tile * run_chunks
    n_programs = run_programs + triton.cdiv(total, block)
    out_extent = (diag_base + sum(o * (n - 1) for n, o, _ in dims) + 1) * words
    src_extent = (sum(s * (n - 1) for n, _, s in dims) + 1) * words
    index_64 = needs_int64(total + block, n_programs * block, n_diag + lanes, out_extent,
                           src_extent, in_extent + (block + 1) * abs(outer_stride),
                           n_programs * run_block)
    return _ARGS.plan(
        (), n_programs,
        {"total": total, "in_base": in_base, "outer_stride": outer_stride, **peel_args,
         **diag_args, "diag_base": diag_base, "n_diag": n_diag, "monotone": int(monotone),
         "run_programs": run_programs, "run_chunks": run_chunks},
        {"WORDS": words, "BLOCK": block, "GATHER": not clone, "INDEX_64": index_64,
         "DIAG_LANES": lanes, "DIAG_RUNS": runs,
         "TAIL_BLOCK": tail, "RUN_BLOCK": run_block,
         "RUN_OUT_ALIGN": _run_align(dims, diag_base, run_block, words, word_bytes,
                                     out=True) if runs and run_tile == 1 else 0,
         "RUN_SRC_ALIGN": _run_align(dims, 0, run_block, words, word_bytes,
                                     out=False) if runs and run_tile == 1 else 0,
         "RUN_TILE": run_tile,
         "COPY_EVICT": "evict_first" if _tiling.TUNING.scatter_copy_evict else "",
         "PREFETCH": clone and _tiling.TUNING.scatter_prefetch_src},
        num_warps,
    )


def _runs(dims: list[tuple[int, int, int]], monotone: bool, words: int, block: int) -> bool:
    """Whether the diagonal is stored as runs (True) or in DIAG_LANES rounds: its
    innermost merged dim is contiguous in the result and holds at least
    1/scatter_run_block_fraction of a block's words (0: always rounds). Runs let the copy
    leave them out, so no barrier orders two writes of one word, and the diagonal spreads
    over programs of its own."""
    fraction = _tiling.TUNING.scatter_run_block_fraction
    if not (fraction and monotone and dims):
        return False
    size, out_stride, _ = dims[-1]
    return out_stride == 1 and size * words * fraction >= block


def _run_tile(dims: list[tuple[int, int, int]], words: int) -> int:
    """How many runs a run program stores side by side (1: one run): where src reads a run
    element by element (stride > 1) and holds consecutive runs next to each other (the
    diagonal's next dim has src stride 1), a power of two dividing that dim's size, at most
    ``scatter_run_tile``, so a tile never spans two of its rows. One-word elements only."""
    cap = _tiling.TUNING.scatter_run_tile
    if words != 1 or len(dims) < 2 or dims[-2][2] != 1 or cap < 2:
        return 1
    size = dims[-2][0]
    return min(size & -size, 1 << (cap.bit_length() - 1))


def _run_align(dims: list[tuple[int, int, int]], base: int, run_block: int, words: int,
               word_bytes: int, out: bool) -> int:
    """The words every run program's first result (``out``) or src word is a multiple of,
    a power of two of at most 16 bytes, or 0 where src's runs are not contiguous (stride >
    1: gathered element by element). A start is ``base`` plus the outer diagonal dims'
    strides (in words) plus a multiple of ``run_block``: the kernel's hint for 16-byte
    vectors, the pointers being specialised on 16 bytes."""
    side = 1 if out else 2  # the result's or src's stride in a (size, out, src) dim
    if not dims or dims[-1][side] != 1:
        return 0
    cap = max(16 // word_bytes, 1)
    common = math.gcd(base * words, run_block, *(d[side] * words for d in dims[:-1]))
    return min(common & -common, cap)


def _diagonal_args(dims: list[tuple[int, int, int]]) -> dict[str, int]:
    """The kernel's diagonal arguments: ``dsize{j}``/``dout{j}``/``dsrc{j}`` (size, result
    stride, src stride) innermost first, padded to MAX_ROW_DIMS (1, 0, 0), and ``n_ddims``."""
    if len(dims) > MAX_ROW_DIMS:
        raise NotImplementedError(
            f"diagfuzz's diagonal_scatter addresses at most {MAX_ROW_DIMS} diagonal dims "
            f"after merging runs; this diagonal needs {len(dims)}")
    padded = list(reversed(dims)) + [(1, 0, 0)] * (MAX_ROW_DIMS - len(dims))
    args = {"n_ddims": len(dims)}
    for j, (size, out_stride, src_stride) in enumerate(padded):
        args.update({f"dsize{j}": size, f"dout{j}": out_stride, f"dsrc{j}": src_stride})
    return args


def _diagonal_dims(source: torch.Tensor, src: torch.Tensor, diag: Diagonal,
                   out_strides: Sequence[int]) -> tuple[list[tuple[int, int, int]], bool, int]:
    """The diagonal's dims as (size, result stride, src stride), outermost first, runs
    merged; whether their positions grow with the index tuple; the element count.

    An unordered diagonal whose positions repeat is refused: aten's ``copy_`` would store
    several src elements on one position, the last written winning.
    """
    others = [d for d in range(source.dim()) if d not in (diag.dim1, diag.dim2)]
    dims = [(source.shape[d], out_strides[d], src.stride(j)) for j, d in enumerate(others)]
    dims.append((diag.length, out_strides[diag.dim1] + out_strides[diag.dim2],
                 src.stride(-1)))
    n_diag = math.prod(n for n, _, _ in dims)
    if n_diag == 0:
        return [], False, 0
    dims = sorted((d for d in dims if d[0] != 1), key=lambda d: d[1], reverse=True)
    merged: list[tuple[int, int, int]] = []
    for size, out, s in dims:
        if merged and merged[-1][1] == out * size and merged[-1][2] == s * size:
            merged[-1] = (merged[-1][0] * size, out, s)
        else:
            merged.append((size, out, s))
    extent, monotone = 0, True
    for size, out, _ in reversed(merged):
        monotone = monotone and out > extent
        extent += out * (size - 1)
    if not monotone:
        positions = torch.zeros(1, dtype=torch.int64)
        for size, out, _ in merged:
            positions = (positions[:, None] + torch.arange(size) * out).reshape(-1)
        if positions.unique().numel() != positions.numel():
            raise RuntimeError(
                "diagonal_scatter: the diagonal of this input repeats storage positions "
                f"(sizes {list(source.shape)}, strides {list(source.stride())}); aten's "
                "result would depend on the order of copy_'s writes, so diagfuzz refuses it")
    return merged, monotone, n_diag


_ARGS = KernelArgs.of(_diagonal_scatter_kernel)
_launch = Launcher(_diagonal_scatter_kernel, aligned=_ALIGNED)
