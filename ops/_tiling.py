"""Shared planning for the two kernels: row dims, coalescing, flat tiles, and row peeling.

Both kernels see their result as a row-major 2-D array ``[R, W]`` of integer words, and each
program owns a flat block of it (``FlatTile``). A row's position in the other tensor is found
by peeling the row index over at most ``MAX_ROW_DIMS`` (size, stride) pairs, innermost first
(written out in each kernel: a nested @triton.jit call costs ~1 ms per launch under Triton's
interpreter); along a row only adds and a constant shift remain. This keeps integer division
off the per-element path, which is what limited a naive flat kernel to 0.13-0.64x of aten.

Why flat blocks: a tile shaped like the rows (``[rows, width]``) needs a compiled variant per
power-of-two width, or wastes most lanes on narrow rows (measured up to 10x slower). A flat
block has one shape per word size; its rows are handled a pass of lanes at a time whatever
their width, so a fuzz run compiles at most two variants (narrow and wide passes) per kernel
and word size (BENCHMARKS.md).

``Launcher``: after Triton's binder has compiled a variant once, later calls with the same
variant go straight to the compiled kernel, skipping the per-call argument binding.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import torch
import triton

from diagfuzz.adapters.triton import Direct, direct_handles, launch_direct
from diagfuzz.core.words import as_words
from diagfuzz.ops._runtime import INTERPRET

#: Row dims a kernel peels; after coalescing, any tensor of rank <= MAX_ROW_DIMS + 1 fits.
MAX_ROW_DIMS = 8

INT32_MAX = 2**31 - 1

#: Triton arguments that change with every shape: never specialise on them (a specialised
#: size recompiles on every new shape; DESIGN.md "Known traps"). The pointer a kernel reads
#: from is not specialised either (its gathers gain nothing from 16-byte alignment, and a
#: storage offset would double the variants); the result pointer is, for vector stores.
SHAPE_ARGS = (
    [f"size{j}" for j in range(MAX_ROW_DIMS)]
    + [f"stride{j}" for j in range(MAX_ROW_DIMS)]
    + ["total", "width", "run_len", "row_lanes", "lane_shift", "n_dims"]
)


@dataclass(frozen=True)
class RowDim:
    """One dim of the row space: its size, the other tensor's stride (words), and a role tag."""

    size: int
    stride: int
    tag: str = ""  # "first"/"second" mark the diagonal dims in diagonal_backward


def coalesce(dims: list[RowDim]) -> list[RowDim]:
    """Drop size-1 dims and merge neighbours that are one run in the strided tensor.

    ``dims`` is outermost first. Tagged dims are never merged: the kernel needs their index.
    """
    out: list[RowDim] = []
    for dim in dims:
        if dim.size == 1:
            continue
        prev = out[-1] if out else None
        if (
            prev is not None
            and not prev.tag
            and not dim.tag
            and prev.stride == dim.stride * dim.size
        ):
            out[-1] = RowDim(prev.size * dim.size, dim.stride)
        else:
            out.append(dim)
    return out


def row_args(dims: list[RowDim]) -> tuple[list[int], list[int]]:
    """Sizes and strides innermost first, padded to MAX_ROW_DIMS (size 1, stride 0)."""
    if len(dims) > MAX_ROW_DIMS:
        raise NotImplementedError(
            f"diagfuzz kernels address at most {MAX_ROW_DIMS} non-diagonal dims after "
            f"merging contiguous runs; this tensor needs {len(dims)}"
        )
    inner_first = list(reversed(dims))
    pad = MAX_ROW_DIMS - len(dims)
    return (
        [d.size for d in inner_first] + [1] * pad,
        [d.stride for d in inner_first] + [0] * pad,
    )


@dataclass(frozen=True)
class FlatTile:
    """How a launch covers the result's words.

    Each program owns ``block`` consecutive words and visits the rows they belong to, a pass
    at a time: a pass peels ``peel_lanes >> lane_shift`` rows and moves up to ``row_lanes``
    words of each, ``copy_lanes`` lanes a round. Either many rows share the lanes
    (``narrow``: ``peel_lanes == copy_lanes``, one round, ``row_lanes`` a power of two that
    holds a row's run), or a pass is one row, peeled on a single lane, whose run gets ``rounds``
    rounds of ``copy_lanes`` lanes, as many as its share of the block can need (``wide``).
    Only ``block``, the lane counts and ``rounds`` are compile-time constants, and on a GPU
    they depend on the word size, on ``wide`` and on the output's size tier alone: at most
    two compiled variants per kernel, word size and tier (every fuzz Case is in the small
    tier).
    """

    block: int
    peel_lanes: int
    copy_lanes: int
    row_lanes: int
    lane_shift: int
    n_programs: int
    rounds: int = 1
    num_warps: int = 4

    @property
    def wide(self) -> bool:
        """Whether a pass is one row (a run longer than the lanes of a narrow pass)."""
        return self.peel_lanes == 1

    def needs_int64(self, total: int, width: int, read_extent: int) -> bool:
        """Whether the kernel must index in int64: the rows of a pass may run past the last
        row (masked), and their offsets must not overflow either."""
        return needs_int64(total + (self.peel_lanes + 1) * width + self.block, read_extent)


#: diagonal_backward on a GPU (outputs over 1 MB and under 256 MB; SMALL_* and HUGE_* below):
#: each program stores 16 KiB of zeros as 16-byte vectors, then its share of the diagonal,
#: one lane per 32 words a pass (128 lanes for 4-byte words).
#: Every program peels a pass whether or not the diagonal crosses its block, so lanes cost
#: (1024 lanes on 4096-word blocks: large outputs 0.40-0.75x aten), and too few cost passes
#: (256 lanes on 16384 1-byte words: 8 passes for rows of 8 bytes, 0.76x). H200 sweeps of
#: 16 and 32 words a lane: BENCHMARKS.md.
FILL_BLOCK_BYTES = 16384
FILL_WORDS_PER_LANE = 32
#: Warps per program of the large-output fill plans (a sweep knob; 4 is the tuned value).
FILL_NUM_WARPS = 4
#: Outputs of at least HUGE_OUTPUT_BYTES: blocks of HUGE_FILL_BLOCK_BYTES on
#: HUGE_FILL_NUM_WARPS warps, four 16-byte stores a thread instead of eight. There the zero
#: stores are nearly all the time, and their pattern counts: H200, plain Triton fills of
#: 1 GiB took 232 µs with 2 stores a thread, 237 with 4 and 242 with 8 (these plans' 16 KiB
#: on 4 warps). In one run (fill_floor.py) 16384² float32 went 239.0 -> 235.1 µs (0.985x ->
#: 1.001x aten), 1024x512x512 d=(1,2) float32 258.5 -> 249.8, and none of the 14 rows of
#: 256 MB or more got slower. 8 warps (two stores a thread) read 234.1 on 16384² but 272.6
#: on 1024x512x512: their programs' diagonal work (the peel of rows of 512 words) then
#: weighs more. Below, 8 KiB blocks were 1.5-4% slower at 2-8 MB and within about 1% at
#: 16-128 MB; the threshold was not swept between 16 and 256 MB. The transposed launches
#: keep the large plans' block and warps. BENCHMARKS.md.
HUGE_OUTPUT_BYTES = 1 << 28
HUGE_FILL_BLOCK_BYTES = 8192
HUGE_FILL_NUM_WARPS = 4
#: Cache hints of diagonal_backward (0 = none): 1 stores the zero fill with ``evict_first``
#: / loads grad_output with ``evict_last``. H200, two A/B pairs in one run: the grad_output
#: hint moved the 64 MB float32 3-D outputs from 84-90% to 92-99% of a same-size fill
#: (e.g. 64x512x512 d=(1,2) 20.9 -> 19.1 us) and 16x16x256x256 float32 28 -> 26.3 us; the
#: zero-fill hint cost 5-15% (its sweep), so it stays off. BENCHMARKS.md.
ZERO_STORE_EVICT = 0
GRAD_LOAD_EVICT = 1
#: 1: diagonal_backward moves runs that grad_output holds across its diagonal dim (strided
#: wider along the run than along that dim: ``16x16x256x256 d=(0,1)``, where each 4-byte
#: load of a run used one word of a 32-byte sector) as [TRANSPOSE_I_BLOCK, TRANSPOSE_C_BLOCK]
#: tiles, loaded along the diagonal dim and stored along the runs, in programs of their own
#: after the zero-fill programs (one launch). H200 (8e698d4, contiguous grad_output):
#: 16x16x256x256 float32 26.5 -> 19.9 us (0.98x -> 1.31x aten), bfloat16 15.2 -> 12.3 us.
TRANSPOSE_RUNS = 1
TRANSPOSE_I_BLOCK = 16
TRANSPOSE_C_BLOCK = 256
#: Outputs of at most SMALL_OUTPUT_BYTES get blocks of SMALL_FILL_BLOCK_BYTES, a lane per
#: SMALL_FILL_WORDS_PER_LANE words: a 1 MB output made 64 programs of 16 KiB on 132 SMs, and
#: rows of 8 words needed 4 passes a block (4096x8x8: 1.0x the two-launch baseline). Every
#: fuzz Case (at most 64 KB) is small, so a fuzz run still compiles at most two variants
#: (narrow and wide) per word size; large outputs keep the big blocks.
SMALL_OUTPUT_BYTES = 1 << 20
SMALL_FILL_BLOCK_BYTES = 4096
SMALL_FILL_WORDS_PER_LANE = 8
#: diagonal_copy on a GPU gathers at most 512 bytes per program: its reads are strided
#: gathers, so more programs keep more loads in flight. H200, two sweeps of the 77 copy rows
#: (6308cd6, programs owning whole rows): 512 B geomean 1.18/1.19x aten, worst row
#: 0.95/0.96x; 1 KiB 1.17/1.16x, worst 0.88/0.87x; 2 KiB 1.11x.
GATHER_BLOCK_BYTES = 512
#: 1: a diagonal_copy program owns whole rows (or one segment of a row), so one pass of
#: loads covers it; 0: flat blocks of GATHER_BLOCK_BYTES, which may cross row ends.
GATHER_ALIGN_ROWS = 1
#: 1: diagonal_copy moves, as [COPY_TRANSPOSE_I_BLOCK, COPY_TRANSPOSE_C_BLOCK] tiles loaded
#: along the input's innermost row dim and stored along the diagonal, large results whose
#: input holds the rows closer together than the diagonal (16x16x256x256 d=(0,1): each
#: 4-byte gather of the flat path used one word of a 32-byte sector).
COPY_TRANSPOSE = 1
COPY_TRANSPOSE_I_BLOCK = 16
COPY_TRANSPOSE_C_BLOCK = 128
COPY_TRANSPOSE_NUM_WARPS = 4
#: Results smaller than this keep the flat path on a GPU (every fuzz Case, at most 64 KiB).
COPY_TRANSPOSE_MIN_BYTES = (1 << 20) + 1
#: diagonal_scatter on a GPU: a program copies SCATTER_BLOCK_BYTES of the result's storage
#: (16-byte vector loads and stores: the input's storage and the result are both allocator
#: aligned), then, after a barrier, stores src's words that fall inside its block,
#: SCATTER_DIAG_LANES diagonal elements a round. Results of at most SMALL_OUTPUT_BYTES take
#: SCATTER_SMALL_BLOCK_BYTES (more programs on 132 SMs). The values are diagonal_backward's
#: fill plans (a copy moves twice a fill's bytes), unswept on the H200: benchmarks/
#: bench_family.py ``--set`` sweeps them.
SCATTER_BLOCK_BYTES = 16384
SCATTER_SMALL_BLOCK_BYTES = 4096
SCATTER_NUM_WARPS = 4
SCATTER_DIAG_LANES = 128
#: 1: the clone's loads and stores carry ``evict_first`` (a streaming copy: neither the
#: input's storage nor the result is read again by this launch). A sweep knob, off: untimed.
SCATTER_COPY_EVICT = 0
#: diagonal_scatter's gather mode (an expanded input, or a contiguous ``out=``) peels every
#: word into the input's strides: at most this many words a program (8 a thread on 4
#: warps). Blocks of 16 KiB of int8 took 55 s to compile for sm_90 (10,489 PTX lines).
SCATTER_GATHER_BLOCK_WORDS = 1024
#: Lanes of a wide round on a GPU, at most (32 words a thread): a wide pass covers its share
#: of a 16 KiB block of 1- or 2-byte words in 4 or 2 rounds (of an 8 KiB one, 2 or 1).
#: (Blocks of 4096 words for every word size, one round, cost 1-byte outputs a quarter of
#: their speed: 4x the programs.)
MAX_WIDE_LANES = 4096
#: The interpreter runs programs one after another: one program and one pass where possible.
_INTERPRET_MAX_WORDS = 1 << 16


def plan_flat(total: int, width: int, run: int, word_bytes: int, block_bytes: int,
              words_per_lane: int = 1) -> FlatTile:
    """Cover ``total`` words, rows of ``width`` words holding runs of at most ``run`` words.

    Rows of any width cost no lanes of their own: a narrow row needs no tile shape of its
    own (a compiled variant per power of two) and leaves no lanes masked off.
    """
    if INTERPRET:
        block = min(triton.next_power_of_2(total), _INTERPRET_MAX_WORDS)
        row_lanes = triton.next_power_of_2(min(run, block))
        rows = min(triton.cdiv(total, width), block // width + 2)
        lanes = min(triton.next_power_of_2(rows) * row_lanes, _INTERPRET_MAX_WORDS)
    else:
        block = block_bytes // word_bytes
        lanes = max(block // words_per_lane, 1)
        if run > lanes:  # wide: one row a pass, the run's share of the block in rounds
            copy_lanes = min(block, MAX_WIDE_LANES)
            return FlatTile(block, 1, copy_lanes, copy_lanes, 0, triton.cdiv(total, block),
                            block // copy_lanes)
        row_lanes = triton.next_power_of_2(run)
    return FlatTile(block, lanes, lanes, row_lanes, row_lanes.bit_length() - 1,
                    triton.cdiv(total, block))


def plan_fill(total: int, width: int, run: int, word_bytes: int) -> FlatTile:
    """diagonal_backward's plan: the *FILL_* constants, read when a call signature is first
    planned (one place to tune; plans are then cached per signature, so set them before
    the first call): the small ones for outputs of at most SMALL_OUTPUT_BYTES, the huge
    ones from HUGE_OUTPUT_BYTES."""
    out_bytes = total * word_bytes
    if out_bytes <= SMALL_OUTPUT_BYTES:
        return plan_flat(total, width, run, word_bytes, SMALL_FILL_BLOCK_BYTES,
                         SMALL_FILL_WORDS_PER_LANE)
    if out_bytes >= HUGE_OUTPUT_BYTES:
        block_bytes, warps = HUGE_FILL_BLOCK_BYTES, HUGE_FILL_NUM_WARPS
    else:
        block_bytes, warps = FILL_BLOCK_BYTES, FILL_NUM_WARPS
    tile = plan_flat(total, width, run, word_bytes, block_bytes, FILL_WORDS_PER_LANE)
    if INTERPRET or tile.num_warps == warps:
        return tile
    return dataclasses.replace(tile, num_warps=warps)


def plan_scatter(total: int, word_bytes: int, n_diag: int,
                 gather: bool) -> tuple[int, int, int]:
    """diagonal_scatter's (block words, diagonal lanes, warps) for a result of ``total``
    words with ``n_diag`` diagonal elements; the SCATTER_* constants are read when a call
    signature is first planned (plans are cached per signature)."""
    if INTERPRET:  # one program and one round where possible: programs run one by one
        block = min(triton.next_power_of_2(max(total, 2)), _INTERPRET_MAX_WORDS)
        lanes = min(triton.next_power_of_2(max(n_diag, 2)), _INTERPRET_MAX_WORDS)
        return block, lanes, 4
    block_bytes = (SCATTER_SMALL_BLOCK_BYTES if total * word_bytes <= SMALL_OUTPUT_BYTES
                   else SCATTER_BLOCK_BYTES)
    block = max(block_bytes // word_bytes, 2)
    if gather:
        block = min(block, max(SCATTER_GATHER_BLOCK_WORDS, 2))
    return block, SCATTER_DIAG_LANES, SCATTER_NUM_WARPS


def cache_hints() -> dict[str, str]:
    """diagonal_backward's cache-hint constexprs, from ZERO_STORE_EVICT and GRAD_LOAD_EVICT."""
    return {"ZERO_EVICT": "evict_first" if ZERO_STORE_EVICT else "",
            "GRAD_EVICT": "evict_last" if GRAD_LOAD_EVICT else ""}


def plan_gather(total: int, width: int, word_bytes: int) -> FlatTile:
    """diagonal_copy's plan: a row is its own run; GATHER_BLOCK_BYTES read when a signature
    is first planned (plans are cached per signature)."""
    return plan_flat(total, width, width, word_bytes, GATHER_BLOCK_BYTES)


def needs_int64(*extents: int) -> bool:
    """Whether index arithmetic must be int64: any extent or offset beyond int32.

    Always under the interpreter: there int64 costs nothing extra, while every int32 add and
    multiply gets an overflow check that doubled the time of a CPU launch.
    """
    return INTERPRET or any(abs(e) > INT32_MAX for e in extents)


def parse_settings(settings: Sequence[str]) -> dict[str, int]:
    """Integer planning constants from ``NAME=VALUE`` texts (a benchmark's ``--set``),
    checked: each NAME an integer constant of this module, each VALUE an integer."""
    done: dict[str, int] = {}
    module = sys.modules[__name__]
    for setting in settings:
        name, _, value = setting.partition("=")
        if type(getattr(module, name, None)) is not int:  # a bool (INTERPRET) is no knob
            raise SystemExit(f"--set {setting}: no integer constant {name!r} in ops._tiling")
        try:
            done[name] = int(value)
        except ValueError:
            raise SystemExit(f"--set {setting}: {value!r} is not an integer") from None
    return done


def override(settings: Sequence[str]) -> dict[str, int]:
    """Set integer planning constants from ``NAME=VALUE`` texts (``parse_settings``); before
    any call plans: plans are cached per call signature once made."""
    done = parse_settings(settings)
    module = sys.modules[__name__]
    for name, value in done.items():
        setattr(module, name, value)
    return done


def fits_int32(values: Sequence[int]) -> bool:
    """Whether Triton passes every value as i32 (its rule: -2**31 <= v < 2**31)."""
    return all(-INT32_MAX - 1 <= v <= INT32_MAX for v in values)


@dataclass(frozen=True)
class LaunchPlan:
    """Everything a launch needs except the two tensors: cached per call signature, so a
    repeated shape costs the host a dict lookup, ``torch.empty`` and the launch."""

    #: the result's sizes (the launchers allocate it)
    sizes: tuple[int, ...]
    n_programs: int
    ints: tuple[int, ...]
    constexprs: dict[str, Any]
    num_warps: int

    @cached_property
    def variant(self) -> tuple | None:
        """What, besides the pointers' alignment, picks the compiled kernel; None when an
        integer exceeds int32 (Triton then types it i64: leave those to Triton's binder)."""
        if not fits_int32(self.ints):
            return None
        return (*self.constexprs.values(), self.num_warps)


#: Plans by call signature, per op; cleared when full (fuzzing sees endless new shapes).
PLAN_CACHE_SIZE = 4096


def remember(cache: dict, key: tuple | None, plan: Any) -> None:
    """Store ``plan`` (what the op caches per call: a plan, with what it needs) under
    ``key`` (no key: nothing to remember)."""
    if key is None:
        return
    if len(cache) >= PLAN_CACHE_SIZE:
        cache.clear()
    cache[key] = plan


class Launcher:
    """Launch a kernel; after the first launch of a variant, skip Triton's binder.

    ``JITFunction.run`` binds and type-checks every argument on every call (tens of µs for
    ~30 arguments). A variant is fixed by the constexprs, the word size, the 16-byte
    alignment of the first ``aligned`` pointers (the result's; the pointers after them and
    every shape int are unspecialised) and every integer fitting int32, so the compiled
    kernel that the first call returns serves every later call of that variant, with raw
    pointers. Those calls go to the compiled kernel's launcher itself
    (``CompiledKernel.run``) on torch's current stream, minus the closure and device lookups
    ``CompiledKernel[grid]`` builds per call, and without launch metadata and hooks when no
    hook listens (``adapters.triton``; diagonal_copy's host time was 1.5x aten's). Any failure
    of that path switches it off for good: Triton's own path is always right, only slower.
    """

    def __init__(self, kernel: Any, aligned: int = 1) -> None:
        self.kernel = kernel
        #: how many leading tensors' pointers Triton specialises on 16-byte alignment: the
        #: result's (vector stores), and for diagonal_scatter the storage it copies from
        self.aligned = aligned
        self._direct: dict[tuple, Direct] = {}
        self.direct = not INTERPRET

    @property
    def compiled(self) -> dict[tuple, Any]:
        """The compiled kernel of each variant launched directly (e.g. for its PTX)."""
        return {key: direct[0] for key, direct in self._direct.items()}

    def __call__(self, plan: LaunchPlan, tensors: Sequence[torch.Tensor]) -> None:
        device = tensors[0].device
        if device.type == "cuda" and device.index != torch.cuda.current_device():
            # Triton launches on the current device; aten's dispatcher sets no device guard
            # for a Python kernel, so a tensor on another GPU needs one here.
            with torch.cuda.device(device):
                self._launch(plan, tensors)
        else:
            self._launch(plan, tensors)

    def _launch(self, plan: LaunchPlan, tensors: Sequence[torch.Tensor]) -> None:
        key = None
        if self.direct:
            variant = plan.variant
            if variant is not None:
                # A compiled kernel is loaded on one device: the device is part of the key.
                out = tensors[0]
                key = (out.device.index, out.element_size(),
                       *(t.data_ptr() % 16 == 0 for t in tensors[:self.aligned]), *variant)
                direct = self._direct.get(key)
                if direct is not None:
                    try:
                        self._run(direct, out.device.index, plan, tensors)
                        return
                    except Exception:  # a Triton whose launcher differs: use its own path
                        self.direct = False
                        key = None
        compiled = self.kernel[(plan.n_programs,)](
            *(as_words(t) for t in tensors), *plan.ints, **plan.constexprs,
            num_warps=plan.num_warps)
        if key is not None and self.direct:
            try:
                self._direct[key] = direct_handles(compiled)
            except Exception:  # a Triton whose CompiledKernel differs: use its own path
                self.direct = False

    @staticmethod
    def _run(direct: Direct, device: int, plan: LaunchPlan,
             tensors: Sequence[torch.Tensor]) -> None:
        """The variant's compiled kernel on torch's current stream of ``device``
        (``adapters.triton.launch_direct``)."""
        args = (*(t.data_ptr() for t in tensors), *plan.ints, *plan.constexprs.values())
        launch_direct(direct, plan.n_programs, torch._C._cuda_getCurrentRawStream(device),
                      args)
