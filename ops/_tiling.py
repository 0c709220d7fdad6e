"""Shared planning for the two kernels: row dims, coalescing, tile shapes, and row peeling.

Both kernels see their output as a row-major 2-D array ``[R, W]`` of integer words. A row's
position in the other tensor is found once per row by peeling the row index over at most
``MAX_ROW_DIMS`` (size, stride) pairs, innermost first (written out in each kernel: a
nested @triton.jit call costs ~1 ms per launch under Triton's interpreter); columns then
need only adds and constant shifts. This keeps per-element integer division out of the
kernels, which is what limited a naive flat kernel to 0.13-0.64x of aten.

Two things keep the H200 at its store bandwidth and the host cheap (BENCHMARKS.md):

* ``ALIGN``: when a wide row is a multiple of 16 bytes, the kernel gets the row width as
  ``width_units * ALIGN`` (``ALIGN`` a constexpr), so Triton can prove 16-byte alignment and
  emits 16-byte vector stores; shape arguments stay unspecialised;
* ``Launcher``: after Triton's binder has compiled a variant once, later calls with the same
  variant go straight to the compiled kernel, skipping the per-call argument binding.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import torch
import triton

from diagfuzz.ops._runtime import INTERPRET
from diagfuzz.ops._words import as_words

#: Row dims a kernel peels; after coalescing, any tensor of rank <= MAX_ROW_DIMS + 1 fits.
MAX_ROW_DIMS = 8

INT32_MAX = 2**31 - 1

#: Triton arguments that change with every shape: never specialise on them (a specialised
#: size recompiles on every new shape; DESIGN.md "Known traps"). Pointers stay specialised
#: on 16-byte alignment: leaving the gathered pointer unspecialised halved the variants of a
#: fuzz run, but its H200 grid was not clean enough to prove speed, so it is not shipped.
SHAPE_ARGS = (
    [f"size{j}" for j in range(MAX_ROW_DIMS)]
    + [f"stride{j}" for j in range(MAX_ROW_DIMS)]
    + ["rows", "width_units", "n_col_blocks", "n_dims"]
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
class Tile:
    """A tile of ``block_rows x block_cols`` words and the grid that covers ``[rows, width]``."""

    block_rows: int
    block_cols: int
    n_col_blocks: int
    n_programs: int
    num_warps: int
    #: words the row width is a multiple of, as told to the kernel (1, or 16 bytes' worth).
    align: int = 1


#: Words per tile on a GPU, by word size: about 16 KiB of output per program.
_GPU_TILE_WORDS = {1: 16384, 2: 8192, 4: 4096, 8: 2048}
#: Narrow rows (short diagonals, small trailing dims) get tall tiles instead of wide ones.
_NARROW_COLS = 16
#: 1 KiB rows: each thread stores two 16-byte vectors per row, so the per-row index
#: arithmetic (integer division) is shared by 32 bytes rather than 16.
_WIDE_COLS = {1: 1024, 2: 512, 4: 256, 8: 128}
#: The interpreter runs programs one after another: few, large tiles are fastest there.
_INTERPRET_TILE_WORDS = 1 << 16


def plan_tile(rows: int, width: int, word_bytes: int, tile_bytes: int = 16384) -> Tile:
    """Pick a tile shape of about ``tile_bytes`` of output per program.

    On a GPU the columns are the row width rounded up to a power of two, between 16 words
    and 1 KiB, so a short row does not leave most lanes masked off. That costs up to one
    compiled variant per power of two; two fixed widths (16 words, 1 KiB) were tried and ran
    up to 10x slower on rows of 64 bytes (BENCHMARKS.md). Compiles are cached on disk per
    worker (diagfuzz.workers), so a fuzz run pays for each variant once per machine.
    """
    if INTERPRET:
        cols = triton.next_power_of_2(max(width, 1))
        cols = min(cols, _INTERPRET_TILE_WORDS)
        block_rows = min(triton.next_power_of_2(max(rows, 1)), _INTERPRET_TILE_WORDS // cols)
    else:
        total = min(_GPU_TILE_WORDS[word_bytes], tile_bytes // word_bytes)
        cols = min(max(triton.next_power_of_2(width), _NARROW_COLS), _WIDE_COLS[word_bytes])
        block_rows = max(total // cols, 1)
    num_warps = 4
    # Wide rows of whole 16-byte vectors get vector stores (one more variant, wide tiles only).
    vector = 16 // word_bytes
    align = vector if not INTERPRET and cols > _NARROW_COLS and width % vector == 0 else 1
    n_col_blocks = triton.cdiv(width, cols)
    n_programs = triton.cdiv(rows, block_rows) * n_col_blocks
    return Tile(block_rows, cols, n_col_blocks, n_programs, num_warps, align)


def needs_int64(*extents: int) -> bool:
    """Whether index arithmetic must be int64: any extent or offset beyond int32.

    Always under the interpreter: there int64 costs nothing extra, while every int32 add and
    multiply gets an overflow check that doubled the time of a CPU launch.
    """
    return INTERPRET or any(abs(e) > INT32_MAX for e in extents)


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


def remember(cache: dict, key: tuple | None, plan: LaunchPlan | None) -> None:
    """Store ``plan`` under ``key`` (no key: nothing to remember)."""
    if key is None:
        return
    if len(cache) >= PLAN_CACHE_SIZE:
        cache.clear()
    cache[key] = plan


class Launcher:
    """Launch a kernel; after the first launch of a variant, skip Triton's binder.

    ``JITFunction.run`` binds and type-checks every argument on every call (tens of µs for
    ~30 arguments). A variant is fixed by the constexprs, the word size, the pointers'
    16-byte alignment and every integer fitting int32 (all shape ints are unspecialised), so
    the compiled kernel that the first call returns serves every later call of that variant,
    with raw pointers. Any failure of that path switches it off for good: Triton's own path
    is always right, only slower.
    """

    def __init__(self, kernel: Any) -> None:
        self.kernel = kernel
        self.compiled: dict[tuple, Any] = {}
        self.direct = not INTERPRET

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
                key = (tensors[0].device.index, tensors[0].element_size(),
                       *(t.data_ptr() % 16 == 0 for t in tensors), *variant)
                compiled = self.compiled.get(key)
                if compiled is not None:
                    try:
                        compiled[(plan.n_programs, 1, 1)](
                            *(t.data_ptr() for t in tensors), *plan.ints,
                            *plan.constexprs.values())
                        return
                    except Exception:  # a Triton whose launcher differs: use its own path
                        self.direct = False
                        key = None
        compiled = self.kernel[(plan.n_programs,)](
            *(as_words(t) for t in tensors), *plan.ints, **plan.constexprs,
            num_warps=plan.num_warps)
        if key is not None and self.direct:
            self.compiled[key] = compiled
