"""Shared planning for the two kernels: row dims, coalescing, flat tiles, and row peeling.

Both kernels see their result as a row-major 2-D array ``[R, W]`` of integer words, and each
program owns a flat block of it (``FlatTile``). A row's position in the other tensor is found
by peeling the row index over at most ``MAX_ROW_DIMS`` (size, stride) pairs, innermost first
(a ``tl.static_range`` loop in each kernel over tuples of its ``size{j}``/``stride{j}``
arguments, unrolled when compiled: a nested @triton.jit call costs ~1 ms per launch under
Triton's interpreter); along a row only adds and a constant shift remain. This keeps integer
division off the per-element path, which is what limited a naive flat kernel to 0.13-0.64x
of aten.

Why flat blocks: a tile shaped like the rows (``[rows, width]``) needs a compiled variant per
power-of-two width, or wastes most lanes on narrow rows (measured up to 10x slower). A flat
block has one shape per word size; its rows are handled a pass of lanes at a time whatever
their width, so a fuzz run compiles at most two variants (narrow and wide passes) per kernel
and word size (BENCHMARKS.md).

Launch arguments go by name: ``KernelArgs`` reads a kernel's parameter order once, and each
plan (cached per call signature) holds them in that order, ready for a launch. The tuning
knobs are one frozen ``Tuning`` value, ``TUNING``; ``retune`` replaces it.

``Launcher``: after Triton's binder has compiled a variant once, later calls with the same
variant go straight to the compiled kernel, skipping the per-call argument binding.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
from collections.abc import Callable, Iterator, Mapping, Sequence
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


def row_args(dims: list[RowDim]) -> dict[str, int]:
    """The kernels' row arguments: ``size{j}``/``stride{j}`` innermost first, padded to
    MAX_ROW_DIMS (size 1, stride 0), and ``n_dims``."""
    if len(dims) > MAX_ROW_DIMS:
        raise NotImplementedError(
            f"diagfuzz kernels address at most {MAX_ROW_DIMS} non-diagonal dims after "
            f"merging contiguous runs; this tensor needs {len(dims)}"
        )
    inner_first = list(reversed(dims))
    pad = [RowDim(1, 0)] * (MAX_ROW_DIMS - len(dims))
    padded = inner_first + pad
    return {**{f"size{j}": d.size for j, d in enumerate(padded)},
            **{f"stride{j}": d.stride for j, d in enumerate(padded)},
            "n_dims": len(dims)}


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


@dataclass(frozen=True)
class Tuning:
    """The planners' tuning knobs: one frozen value, ``TUNING``, read when a call signature is
    first planned (plans are then cached per signature); ``retune`` replaces it and forgets
    the cached plans, so a benchmark's ``--set NAME=VALUE`` sweeps a knob (``apply_settings``).
    """

    #: diagonal_backward on a GPU (outputs over 1 MB and under 256 MB; small_* and huge_*
    #: below): each program stores 16 KiB of zeros as 16-byte vectors, then its share of the
    #: diagonal, one lane per 32 words a pass (128 lanes for 4-byte words).
    #: Every program peels a pass whether or not the diagonal crosses its block, so lanes cost
    #: (1024 lanes on 4096-word blocks: large outputs 0.40-0.75x aten), and too few cost
    #: passes (256 lanes on 16384 1-byte words: 8 passes for rows of 8 bytes, 0.76x). H200
    #: sweeps of 16 and 32 words a lane: BENCHMARKS.md.
    fill_block_bytes: int = 16384
    fill_words_per_lane: int = 32
    #: Warps per program of the large-output fill plans (a sweep knob; 4 is the tuned value).
    fill_num_warps: int = 4
    #: Outputs of at least huge_output_bytes: there the zero stores are nearly all the time,
    #: and the stores a thread has in flight set their speed. H200, plain Triton fills of
    #: 1 GiB: 231.5 µs in 4 KiB blocks on 4 warps (two 16-byte stores a thread: the shape of
    #: aten's own fill, 231.3), 237.4 in 8 KiB on 4 (four), 242.0 in 16 KiB on 4 (eight: the
    #: large plans'). Where the rows have one row dim (a program's peel is one division:
    #: 2-D results) and are at least huge_long_row_bytes long, blocks are
    #: huge_long_row_block_bytes (4 KiB: 16384² float32 232.1 µs against 235.2 in 8 KiB,
    #: aten 235.2); elsewhere huge_fill_block_bytes (8 KiB). 4 KiB blocks made every batched
    #: row of 1 GiB float32 take 269-271 µs, whatever its row length (2 KiB to 16 KiB, rows
    #: of 2 to 4 dims; 8 KiB: 236-250): there a program's peel weighs more than two fewer
    #: stores a thread gain, and 8 KiB on 8 warps lost the same way. Below huge_output_bytes,
    #: 8 KiB blocks were 1.5-4% slower at 2-8 MB and within about 1% at 16-128 MB; that
    #: threshold was not swept between 16 and 256 MB. The transposed launches keep the large
    #: plans' block and warps. These sweeps: BENCHMARKS.md.
    huge_output_bytes: int = 1 << 28
    huge_fill_block_bytes: int = 8192
    huge_fill_num_warps: int = 4
    huge_long_row_bytes: int = 16384
    huge_long_row_block_bytes: int = 4096
    #: Cache hints of diagonal_backward: store the zero fill with ``evict_first`` / load
    #: grad_output with ``evict_last``. H200, two A/B pairs in one run: the grad_output hint
    #: moved the 64 MB float32 3-D outputs from 84-90% to 92-99% of a same-size fill (e.g.
    #: 64x512x512 d=(1,2) 20.9 -> 19.1 us) and 16x16x256x256 float32 28 -> 26.3 us; the
    #: zero-fill hint cost 5-15% (its sweep), so it stays off. BENCHMARKS.md.
    zero_store_evict: bool = False
    grad_load_evict: bool = True
    #: diagonal_backward moves runs that grad_output holds across its diagonal dim (strided
    #: wider along the run than along that dim: ``16x16x256x256 d=(0,1)``, where each 4-byte
    #: load of a run used one word of a 32-byte sector) as [transpose_i_block,
    #: transpose_c_block] tiles, loaded along the diagonal dim and stored along the runs, in
    #: programs of their own after the zero-fill programs (one launch). H200 (8e698d4,
    #: contiguous grad_output): 16x16x256x256 float32 26.5 -> 19.9 us (0.98x -> 1.31x aten),
    #: bfloat16 15.2 -> 12.3 us.
    transpose_runs: bool = True
    transpose_i_block: int = 16
    transpose_c_block: int = 256
    #: Outputs of at most small_output_bytes get blocks of small_fill_block_bytes, a lane per
    #: small_fill_words_per_lane words: a 1 MB output made 64 programs of 16 KiB on 132 SMs,
    #: and rows of 8 words needed 4 passes a block (4096x8x8: 1.0x the two-launch baseline).
    #: Every fuzz Case (at most 64 KB) is small, so a fuzz run still compiles at most two
    #: variants (narrow and wide) per word size; large outputs keep the big blocks.
    small_output_bytes: int = 1 << 20
    small_fill_block_bytes: int = 4096
    small_fill_words_per_lane: int = 8
    #: diagonal_copy on a GPU gathers at most 512 bytes per program: its reads are strided
    #: gathers, so more programs keep more loads in flight. H200, two sweeps of the 77 copy
    #: rows (6308cd6, programs owning whole rows): 512 B geomean 1.18/1.19x aten, worst row
    #: 0.95/0.96x; 1 KiB 1.17/1.16x, worst 0.88/0.87x; 2 KiB 1.11x.
    gather_block_bytes: int = 512
    #: A diagonal_copy program owns whole rows (or one segment of a row), so one pass of loads
    #: covers it; off: flat blocks of gather_block_bytes, which may cross row ends.
    gather_align_rows: bool = True
    #: diagonal_copy moves, as [copy_transpose_i_block, copy_transpose_c_block] tiles loaded
    #: along the input's innermost row dim and stored along the diagonal, large results whose
    #: input holds the rows closer together than the diagonal (16x16x256x256 d=(0,1): each
    #: 4-byte gather of the flat path used one word of a 32-byte sector).
    copy_transpose: bool = True
    copy_transpose_i_block: int = 16
    copy_transpose_c_block: int = 128
    copy_transpose_num_warps: int = 4
    #: Results smaller than this keep the flat path on a GPU (every fuzz Case, at most 64 KiB).
    copy_transpose_min_bytes: int = (1 << 20) + 1
    #: diagonal_scatter on a GPU: a program copies scatter_block_bytes of the result's
    #: storage (16-byte vector loads and stores: the input's storage and the result are both
    #: allocator aligned), then, after a barrier, stores src's words that fall inside its
    #: block, scatter_diag_lanes diagonal elements a round. Results of at most
    #: small_output_bytes take scatter_small_block_bytes (more programs on 132 SMs), those of
    #: scatter_large_output_bytes and more scatter_large_block_bytes. Swept on the H200 over
    #: the scatter grid (benchmarks/bench_family.py ``--set``; BENCHMARKS.md): 4 KiB blocks
    #: ran the rows copying 64 MiB and more at 0.99-1.11x aten and 16 KiB (32 KiB of bytes)
    #: blocks at 0.90-1.11x; below 64 MiB 16 KiB blocks were faster on most rows (4096² int8:
    #: 13.6 against 14.9 us). 8 warps read 0.86-0.93x on the rows of 128 MB and more, where
    #: 4 warps read 1.01-1.02x.
    scatter_block_bytes: int = 16384
    #: scatter_block_bytes for 1-byte words (int8, bool): a block's phase 2 costs about the
    #: same whatever its words, and 16 KiB blocks of bytes are four times the blocks of
    #: float32 words for the same diagonal.
    scatter_byte_block_bytes: int = 32768
    scatter_small_block_bytes: int = 4096
    scatter_large_output_bytes: int = 64 << 20
    scatter_large_block_bytes: int = 4096
    scatter_num_warps: int = 4
    scatter_diag_lanes: int = 128
    #: Blocks holding more diagonal elements than scatter_diag_lanes take rounds of up to
    #: this many (a strided input's runs: 512 in a 4 KiB block of float32 words).
    scatter_max_diag_lanes: int = 512
    #: A diagonal made of runs (its innermost merged dim contiguous in the result) is stored
    #: by programs of its own while the copy's programs leave the runs' words out, when a
    #: run covers at least 1/N of a block (16x16x256x256 d=(0,1) int8 ran at 0.21x aten in
    #: DIAG_LANES rounds); 0: always rounds. (Stored so, runs of every other word, as a
    #: strided input makes, took 92.2 us against 85.0 in rounds: float32, H200.)
    scatter_run_block_fraction: int = 4
    #: A runs diagonal that src reads element by element, holding consecutive runs next to
    #: each other, is stored in tiles of this many runs (at most; 0 or 1: run by run).
    scatter_run_tile: int = 16
    #: A runs diagonal is stored by programs of at most a block's words and at least 256,
    #: as many as make this many programs (powers of two); 0: blocks of the copy's size.
    scatter_run_programs: int = 512
    #: In clone mode a block's first round of src words is loaded before its copy and
    #: stored after the barrier, so the two loads wait on memory together (gather mode's
    #: copy is index work, and its int64 variants spilt with the round's registers held).
    scatter_prefetch_src: bool = True
    #: The clone's loads and stores carry ``evict_first`` (a streaming copy: neither the
    #: input's storage nor the result is read again by this launch). A sweep knob, off: untimed.
    scatter_copy_evict: bool = False
    #: diagonal_scatter's gather mode (an expanded input, or a contiguous ``out=``) peels every
    #: word into the input's strides: at most this many words a program (8 a thread on 4
    #: warps). Blocks of 16 KiB of int8 took 55 s to compile for sm_90 (10,489 PTX lines).
    scatter_gather_block_words: int = 1024
    #: Lanes of a wide round on a GPU, at most (32 words a thread): a wide pass covers its
    #: share of a 16 KiB block of 1- or 2-byte words in 4 or 2 rounds (of an 8 KiB one, 2 or
    #: 1). (Blocks of 4096 words for every word size, one round, cost 1-byte outputs a
    #: quarter of their speed: 4x the programs.)
    max_wide_lanes: int = 4096


#: The tuning every plan is made with (``retune`` replaces it).
TUNING = Tuning()

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
            copy_lanes = min(block, TUNING.max_wide_lanes)
            return FlatTile(block, 1, copy_lanes, copy_lanes, 0, triton.cdiv(total, block),
                            block // copy_lanes)
        row_lanes = triton.next_power_of_2(run)
    return FlatTile(block, lanes, lanes, row_lanes, row_lanes.bit_length() - 1,
                    triton.cdiv(total, block))


def plan_fill(total: int, width: int, run: int, word_bytes: int,
              row_dims: int) -> FlatTile:
    """diagonal_backward's plan from the ``*fill*`` knobs of ``TUNING``: the small ones for
    outputs of at most ``small_output_bytes``, the huge ones from ``huge_output_bytes``
    (their block by the rows: ``width`` words, indexed by ``row_dims`` dims)."""
    tuning = TUNING
    out_bytes = total * word_bytes
    if out_bytes <= tuning.small_output_bytes:
        return plan_flat(total, width, run, word_bytes, tuning.small_fill_block_bytes,
                         tuning.small_fill_words_per_lane)
    if out_bytes >= tuning.huge_output_bytes:
        block_bytes, warps = tuning.huge_fill_block_bytes, tuning.huge_fill_num_warps
        if row_dims == 1 and width * word_bytes >= tuning.huge_long_row_bytes:
            block_bytes = tuning.huge_long_row_block_bytes
    else:
        block_bytes, warps = tuning.fill_block_bytes, tuning.fill_num_warps
    tile = plan_flat(total, width, run, word_bytes, block_bytes, tuning.fill_words_per_lane)
    if INTERPRET or tile.num_warps == warps:
        return tile
    return dataclasses.replace(tile, num_warps=warps)


def plan_scatter(total: int, word_bytes: int, n_diag: int,
                 gather: bool) -> tuple[int, int, int]:
    """diagonal_scatter's (block words, diagonal lanes, warps) for a result of ``total``
    words with ``n_diag`` diagonal elements, from the ``scatter_*`` knobs of ``TUNING``."""
    if INTERPRET:  # one program and one round where possible: programs run one by one
        block = min(triton.next_power_of_2(max(total, 2)), _INTERPRET_MAX_WORDS)
        lanes = min(triton.next_power_of_2(max(n_diag, 2)), _INTERPRET_MAX_WORDS)
        return block, lanes, 4
    tuning = TUNING
    if total * word_bytes <= tuning.small_output_bytes:
        block_bytes = tuning.scatter_small_block_bytes
    elif total * word_bytes >= tuning.scatter_large_output_bytes:
        block_bytes = tuning.scatter_large_block_bytes
    elif word_bytes == 1:
        block_bytes = tuning.scatter_byte_block_bytes
    else:
        block_bytes = tuning.scatter_block_bytes
    block = max(block_bytes // word_bytes, 2)
    if gather:
        block = min(block, max(tuning.scatter_gather_block_words, 2))
    return block, tuning.scatter_diag_lanes, tuning.scatter_num_warps


def plan_diag_lanes(lanes: int, block_elements: int, min_gap: int, n_diag: int) -> int:
    """diagonal_scatter's lanes a round: ``lanes`` (plan_scatter's, one a thread), or more,
    up to ``scatter_max_diag_lanes``, where one block holds more diagonal elements, so one
    round stores them all. Consecutive elements of an ordered diagonal lie at least
    ``min_gap`` (its innermost dim's result stride) apart, so a block of ``block_elements``
    holds at most (block_elements - 1) // min_gap + 1; an unordered one passes 0 (every
    program scans the whole diagonal). Powers of two: a few variants to compile."""
    if INTERPRET or min_gap <= 0:
        return lanes
    most = min((block_elements - 1) // min_gap + 1, n_diag)
    return max(lanes, min(triton.next_power_of_2(most), TUNING.scatter_max_diag_lanes))


def plan_run_block(block: int, diag_words: int) -> int:
    """The words a diagonal_scatter run program stores: at most ``block``, and few enough
    that the diagonal's ``diag_words`` span ``scatter_run_programs`` programs (a power of
    two, at least 256 words)."""
    programs = TUNING.scatter_run_programs
    if INTERPRET or not programs:
        return block
    share = max(diag_words // programs, 256)
    return min(block, 1 << (share.bit_length() - 1))


def plan_tail(block: int, word_bytes: int, num_warps: int) -> int:
    """The words a diagonal_scatter program copies at a time where it masks or gathers
    (16 bytes a thread): the whole block under the interpreter, where a program's steps
    cost time and not registers."""
    if INTERPRET:
        return block
    return min(block, num_warps * 32 * max(16 // word_bytes, 1))


def cache_hints() -> dict[str, str]:
    """diagonal_backward's cache-hint constexprs, from ``zero_store_evict`` and
    ``grad_load_evict``."""
    return {"ZERO_EVICT": "evict_first" if TUNING.zero_store_evict else "",
            "GRAD_EVICT": "evict_last" if TUNING.grad_load_evict else ""}


def plan_gather(total: int, width: int, word_bytes: int) -> FlatTile:
    """diagonal_copy's plan: a row is its own run, in blocks of ``gather_block_bytes``."""
    return plan_flat(total, width, width, word_bytes, TUNING.gather_block_bytes)


def needs_int64(*extents: int) -> bool:
    """Whether index arithmetic must be int64: any extent or offset beyond int32.

    Always under the interpreter: there int64 costs nothing extra, while every int32 add and
    multiply gets an overflow check that doubled the time of a CPU launch.
    """
    return INTERPRET or any(abs(e) > INT32_MAX for e in extents)


def parse_settings(settings: Sequence[str]) -> dict[str, int | bool]:
    """Tuning changes from ``NAME=VALUE`` texts (a benchmark's ``--set``), checked: each NAME
    a field of ``Tuning`` (any case: ``FILL_NUM_WARPS`` is ``fill_num_warps``), each VALUE
    an integer, or for an on/off knob 0, 1, true or false."""
    knobs = {field.name: getattr(TUNING, field.name) for field in dataclasses.fields(Tuning)}
    done: dict[str, int | bool] = {}
    for setting in settings:
        text, _, value = setting.partition("=")
        name = text.strip().lower()
        if name not in knobs:
            raise SystemExit(f"--set {setting}: no tuning knob {text!r} in ops._tiling.Tuning "
                             f"(knobs: {', '.join(knobs)})")
        done[name] = _parse_knob(setting, value.strip(), type(knobs[name]))
    return done


def _parse_knob(setting: str, value: str, kind: type) -> int | bool:
    """``value`` as a knob of ``kind`` (bool or int); SystemExit naming ``setting``."""
    if kind is bool:
        known = {"0": False, "false": False, "1": True, "true": True}
        if value.lower() not in known:
            raise SystemExit(f"--set {setting}: {value!r} is not 0, 1, true or false")
        return known[value.lower()]
    try:
        return int(value)
    except ValueError:
        raise SystemExit(f"--set {setting}: {value!r} is not an integer") from None


#: Every op's plan cache (``plan_cache``), forgotten when the tuning changes.
_PLAN_CACHES: list[dict] = []


def plan_cache() -> dict:
    """A new plan cache for an op (plans by call signature), cleared by ``retune``."""
    cache: dict = {}
    _PLAN_CACHES.append(cache)
    return cache


def retune(changes: Mapping[str, Any]) -> Tuning:
    """Replace ``TUNING`` with ``changes`` applied, forget every cached plan (they were made
    with the tuning then) and return the tuning replaced (to restore it)."""
    return _install(dataclasses.replace(TUNING, **changes))


def _install(tuning: Tuning) -> Tuning:
    """Make ``tuning`` current, forget every cached plan; return the tuning replaced."""
    global TUNING
    before, TUNING = TUNING, tuning
    for cache in _PLAN_CACHES:
        cache.clear()
    return before


@contextlib.contextmanager
def tuned(changes: Mapping[str, Any]) -> Iterator[Tuning]:
    """``TUNING`` with ``changes`` for the block, then restored; plans made meanwhile are
    forgotten on the way in and out."""
    before = retune(changes)
    try:
        yield TUNING
    finally:
        _install(before)


def apply_settings(settings: Sequence[str]) -> dict[str, int | bool]:
    """Retune from ``NAME=VALUE`` texts (``parse_settings``); returns the changes made."""
    done = parse_settings(settings)
    retune(done)
    return done


def fits_int32(values: Sequence[int]) -> bool:
    """Whether Triton passes every value as i32 (its rule: -2**31 <= v < 2**31)."""
    return all(-INT32_MAX - 1 <= v <= INT32_MAX for v in values)


@dataclass(frozen=True)
class LaunchPlan:
    """Everything a launch needs except the tensors: cached per call signature, so a
    repeated shape costs the host a dict lookup, ``torch.empty`` and the launch. Made by
    ``KernelArgs.plan``, which puts the named arguments in the kernel's order."""

    #: the result's sizes (the launchers allocate it)
    sizes: tuple[int, ...]
    n_programs: int
    #: the kernel's integer arguments, in its parameter order (named by ``int_names``)
    ints: tuple[int, ...]
    #: the kernel's constexprs, in its parameter order
    constexprs: dict[str, Any]
    num_warps: int
    int_names: tuple[str, ...] = ()

    def arg(self, name: str) -> int:
        """The integer argument ``name``."""
        return self.ints[self.int_names.index(name)]

    @cached_property
    def variant(self) -> tuple | None:
        """What, besides the pointers' alignment, picks the compiled kernel; None when an
        integer exceeds int32 (Triton then types it i64: leave those to Triton's binder)."""
        if not fits_int32(self.ints):
            return None
        return (*self.constexprs.values(), self.num_warps)

    @cached_property
    def trailing_args(self) -> tuple[Any, ...]:
        """Every argument after the pointers, in the kernel's order, as a direct launch
        passes them."""
        return (*self.ints, *self.constexprs.values())

    @cached_property
    def launched(self) -> dict[tuple, Direct]:
        """The compiled kernels this plan has launched directly, by (launcher, device,
        word size, alignment of the aligned pointers): ``Launcher``'s lookup for a
        repeated call, where the plan's constexprs and warps fix the rest of the variant."""
        return {}


def _is_constexpr(param: inspect.Parameter) -> bool:
    """Triton's rule (``KernelParam.is_constexpr``): the annotation names ``constexpr``."""
    return param.annotation is not inspect.Parameter.empty and "constexpr" in str(
        param.annotation)


def _is_pointer(name: str) -> bool:
    return name.endswith("_ptr")


def shape_jit(aligned: int = 1) -> Callable[[Callable], Any]:
    """``triton.jit`` that specialises only the first ``aligned`` (pointer) arguments, on
    16-byte alignment: every later runtime argument changes with the shape (a specialised
    size recompiles on every new shape; DESIGN.md "Known traps"), and the pointers a kernel
    gathers from gain nothing from alignment (a storage offset would double the variants)."""
    def decorate(fn: Callable) -> Any:
        runtime = [name for name, param in inspect.signature(fn).parameters.items()
                   if not _is_constexpr(param)]
        return triton.jit(fn, do_not_specialize=runtime[aligned:])
    return decorate


@dataclass(frozen=True)
class KernelArgs:
    """A kernel's parameters by kind, in its own order, read once from its signature: the
    planners name every argument, and ``plan`` puts them in that order."""

    kernel: str
    pointers: tuple[str, ...]
    ints: tuple[str, ...]
    constexprs: tuple[str, ...]

    @classmethod
    def of(cls, kernel: Any) -> KernelArgs:
        """Those of a ``@triton.jit`` kernel (JIT or interpreted: both keep ``fn``); its
        pointers (named ``*_ptr``) come first."""
        params = inspect.signature(kernel.fn).parameters.values()
        runtime = [p.name for p in params if not _is_constexpr(p)]
        pointers = tuple(name for name in runtime if _is_pointer(name))
        if runtime[:len(pointers)] != list(pointers):
            raise TypeError(f"{kernel.fn.__name__}: pointer parameters must come first, "
                            f"got {runtime}")
        return cls(kernel.fn.__name__, pointers, tuple(runtime[len(pointers):]),
                   tuple(p.name for p in params if _is_constexpr(p)))

    def plan(self, sizes: tuple[int, ...], n_programs: int, ints: Mapping[str, int],
             constexprs: Mapping[str, Any], num_warps: int) -> LaunchPlan:
        """A launch of this kernel, its arguments given by name."""
        self._check("integer", self.ints, ints)
        self._check("constexpr", self.constexprs, constexprs)
        return LaunchPlan(sizes, n_programs, tuple(ints[name] for name in self.ints),
                          {name: constexprs[name] for name in self.constexprs}, num_warps,
                          self.ints)

    def _check(self, kind: str, wanted: tuple[str, ...], given: Mapping[str, Any]) -> None:
        """TypeError naming every argument missing from ``given`` or unknown to the kernel."""
        missing = [name for name in wanted if name not in given]
        unknown = [name for name in given if name not in wanted]
        if missing or unknown:
            raise TypeError(f"{self.kernel}: {kind} arguments missing {missing}, "
                            f"unknown {unknown}")


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
        if self.direct and self._repeat(plan, tensors):
            return
        device = tensors[0].device
        if device.type == "cuda" and device.index != torch.cuda.current_device():
            # Triton launches on the current device; aten's dispatcher sets no device guard
            # for a Python kernel, so a tensor on another GPU needs one here.
            with torch.cuda.device(device):
                self._launch(plan, tensors)
        else:
            self._launch(plan, tensors)

    def _repeat(self, plan: LaunchPlan, tensors: Sequence[torch.Tensor]) -> bool:
        """A repeated call of a plan on the current device, launched straight from the
        plan's own record of its compiled kernel (``LaunchPlan.launched``); False where
        the plan has not launched this variant here yet (``_launch`` then does).

        Why its own path: a call that repeats a plan is the fuzzer's and a model's common
        case, and each step this skips (device objects, the current-device query, a key of
        the whole variant) costs the host about a microsecond a call.
        """
        out = tensors[0]
        ptrs = [t.data_ptr() for t in tensors]
        device = out.get_device()
        key = (self, device, out.element_size(), *[p % 16 == 0 for p in ptrs[:self.aligned]])
        direct = plan.launched.get(key)
        if direct is None or device != torch._C._cuda_getDevice():
            return False
        try:
            launch_direct(direct, plan.n_programs,
                          torch._C._cuda_getCurrentRawStream(device), (*ptrs,
                                                                       *plan.trailing_args))
        except Exception:  # a Triton whose launcher differs: use its own path
            self.direct = False
            return False
        return True

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
                        self._remember(plan, tensors, direct)
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

    def _remember(self, plan: LaunchPlan, tensors: Sequence[torch.Tensor],
                  direct: Direct) -> None:
        """Record in ``plan`` the compiled kernel a direct launch of it used (``_repeat``)."""
        out = tensors[0]
        key = (self, out.get_device(), out.element_size(),
               *[t.data_ptr() % 16 == 0 for t in tensors[:self.aligned]])
        plan.launched[key] = direct

    @staticmethod
    def _run(direct: Direct, device: int, plan: LaunchPlan,
             tensors: Sequence[torch.Tensor]) -> None:
        """The variant's compiled kernel on torch's current stream of ``device``
        (``adapters.triton.launch_direct``)."""
        args = (*(t.data_ptr() for t in tensors), *plan.trailing_args)
        launch_direct(direct, plan.n_programs, torch._C._cuda_getCurrentRawStream(device),
                      args)
