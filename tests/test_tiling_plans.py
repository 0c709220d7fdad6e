"""CPU unit tests of the launch planning in ops/_tiling.py and the launchers' plan caches.

The plan cache must never change a result: the same call signature gives the same plan, and
anything that changes the result (strides, broadcasting, dtype) is part of the key.
"""

from __future__ import annotations

import importlib

import pytest
import torch

import diagfuzz.ops as ops
from diagfuzz.adapters.triton import listening
from diagfuzz.core.geometry import diagonal_of
from diagfuzz.ops import _tiling
from tests.bitwise import bitwise_difference
from tests.tuning import tune

#: The default tuning (these tests read its values; ``tune`` changes the current one).
TUNING = _tiling.Tuning()

backward_module = importlib.import_module("diagfuzz.ops.diagonal_backward")
copy_module = importlib.import_module("diagfuzz.ops.diagonal_copy")


def _aten_backward(g: torch.Tensor, sizes: list[int], *args: int) -> torch.Tensor:
    with ops.use_triton(False):
        return torch.ops.aten.diagonal_backward(g, sizes, *args)


def test_repeated_calls_with_other_strides_or_broadcasts_replan() -> None:
    """Same shape, other strides / a broadcast grad: each call still matches aten bitwise."""
    base = torch.arange(24, dtype=torch.float32, device=ops.DEVICE).reshape(4, 6)
    for g in (base[:, :3], base[:, ::2], base[:, 1:4], base[:1, :3].expand(4, 3),
              base[:, :3].contiguous(), torch.arange(3, dtype=torch.float32, device=ops.DEVICE)):
        for _ in range(2):  # the second call takes the cached plan
            out = ops.diagonal_backward(g, [4, 3, 5], 0, 1, 2)
            assert bitwise_difference(out, _aten_backward(g, [4, 3, 5], 0, 1, 2)) == ""
    x0 = torch.arange(60, device=ops.DEVICE)
    for x in (x0.reshape(3, 4, 5), x0.reshape(3, 5, 4).mT):
        for _ in range(2):
            with ops.use_triton(False):
                expected = torch.ops.aten.diagonal_copy(x, 1, 1, 2)
            assert bitwise_difference(ops.diagonal_copy(x, 1, 1, 2), expected) == ""


def test_cached_signature_still_raises_for_a_new_invalid_call() -> None:
    g = torch.zeros(3, device=ops.DEVICE)
    ops.diagonal_backward(g, [3, 3], 0, 0, 1)
    with pytest.raises(RuntimeError, match="identical"):
        ops.diagonal_backward(g, [3, 3], 0, 1, 1)
    with pytest.raises(TypeError, match="grad_output"):
        ops.diagonal_backward([0.0, 0.0, 0.0], [3, 3], 0, 0, 1)


def test_plan_cache_is_bounded(monkeypatch) -> None:
    cache: dict = {}
    monkeypatch.setattr(_tiling, "PLAN_CACHE_SIZE", 3)
    for i in range(7):
        _tiling.remember(cache, (i,), None)
        assert len(cache) <= 3
    _tiling.remember(cache, None, None)  # no key: nothing stored
    assert None not in cache


def test_empty_results_launch_nothing() -> None:
    before = ops.launches("diagonal_backward")
    for _ in range(2):
        out = ops.diagonal_backward(torch.zeros(0, device=ops.DEVICE), [0, 4], 0, 0, 1)
        assert out.shape == (0, 4)
    assert ops.launches("diagonal_backward") == before


@pytest.mark.parametrize("word_bytes", [1, 2, 4, 8])
def test_gpu_blocks_depend_on_the_word_size_and_wideness_alone(monkeypatch, word_bytes) -> None:
    """At most two compiled variants per kernel and word size: the constexprs of a GPU plan
    (block, lane counts) take one value for runs that fit the lanes and one for longer runs,
    whatever the shape; the rest (row_lanes, lane_shift) are runtime arguments."""
    monkeypatch.setattr(_tiling, "INTERPRET", False)
    shapes = set()
    for total, width, run in [(16, 4, 1), (4096, 4096, 1), (10**6, 7, 7), (123457, 1, 1),
                              (2**20, 512, 4), (99, 33, 33), (2**24, 2**12, 2**12),
                              (2**24, 2**16, 2**16), (5000, 1024, 1024), (5000, 1025, 1025)]:
        tile = _tiling.plan_flat(total, width, run, word_bytes, TUNING.fill_block_bytes,
                                 TUNING.fill_words_per_lane)
        shapes.add((tile.block, tile.peel_lanes, tile.copy_lanes, tile.rounds, tile.num_warps))
        assert tile.row_lanes & (tile.row_lanes - 1) == 0
        # The rounds of lanes cover any row's share of a block (the kernels have no loop).
        assert tile.row_lanes * tile.rounds >= min(run, tile.block)
        assert tile.row_lanes <= tile.copy_lanes
        assert tile.wide == (run > tile.copy_lanes or tile.peel_lanes == 1)
        assert tile.peel_lanes >> tile.lane_shift >= 1  # rows per pass
        assert tile.n_programs * tile.block >= total > (tile.n_programs - 1) * tile.block
    block = 16384 // word_bytes
    wide_lanes = min(block, 4096)
    narrow = (block, block // 32, block // 32, 1, 4)
    assert shapes == {narrow, (block, 1, wide_lanes, block // wide_lanes, 4)}


def test_small_outputs_get_small_blocks_and_keep_two_variants(monkeypatch) -> None:
    """Outputs up to SMALL_OUTPUT_BYTES get more programs and lanes (a 1 MB output made 64
    programs of 16 KiB); every fuzz Case is small, so the fuzz run's variants stay at two per
    word size (narrow and wide) whatever the shape; larger outputs keep the big blocks."""
    monkeypatch.setattr(_tiling, "INTERPRET", False)
    limit = TUNING.small_output_bytes
    small = _tiling.plan_fill(limit // 4, 8, 1, 4, 2)  # 4096x8x8 float32: rows of 8 words
    big = _tiling.plan_fill(limit // 4 + 1, 8, 1, 4, 2)
    assert small.block * 4 == TUNING.small_fill_block_bytes
    assert big.block * 4 == TUNING.fill_block_bytes
    assert small.n_programs > big.n_programs
    rows_per_pass = small.peel_lanes >> small.lane_shift
    assert rows_per_pass * 8 >= small.block  # a block of 8-word rows in one pass
    fuzz_shapes = {
        (t.block, t.peel_lanes, t.copy_lanes, t.rounds)
        for total, width, run in [(1, 1, 1), (16, 4, 1), (4096, 64, 64), (4096, 4096, 4096),
                                  (2048, 2, 2), (4095, 4095, 1)]
        for t in [_tiling.plan_fill(total, width, run, 4, 1)]
    }
    assert len(fuzz_shapes) == 2


def test_huge_outputs_block_by_row_length(monkeypatch) -> None:
    """From HUGE_OUTPUT_BYTES a program's block is four 16-byte stores per thread, not eight,
    and two (aten's fill's shape) where rows of one row dim are at least HUGE_LONG_ROW_BYTES
    long (2-D results: a program's peel is one division); just below the size, the large
    plans stay."""
    monkeypatch.setattr(_tiling, "INTERPRET", False)
    limit = TUNING.huge_output_bytes
    long_row = TUNING.huge_long_row_bytes
    for word_bytes in (1, 2, 4):
        below = _tiling.plan_fill((limit - 1) // word_bytes, 16384, 1, word_bytes, 1)
        assert (below.block * word_bytes, below.num_warps) == (
            TUNING.fill_block_bytes, TUNING.fill_num_warps)
        for width, block_bytes, stores in (
                (long_row // word_bytes, TUNING.huge_long_row_block_bytes, 2),
                (long_row // word_bytes - 1, TUNING.huge_fill_block_bytes, 4),
                (512, TUNING.huge_fill_block_bytes, 4)):
            huge = _tiling.plan_fill(limit // word_bytes, width, 1, word_bytes, 1)
            assert huge.block * word_bytes == block_bytes, (word_bytes, width)
            assert huge.num_warps == TUNING.huge_fill_num_warps
            assert huge.block * word_bytes == stores * 16 * 32 * huge.num_warps
            # Rows of two or more dims (batched results) keep four stores at any length.
            batched = _tiling.plan_fill(limit // word_bytes, width, 1, word_bytes, 2)
            assert batched.block * word_bytes == TUNING.huge_fill_block_bytes
    # The tier's warps are its own, not the large plans' (both are 4 today).
    tune(monkeypatch, huge_fill_num_warps=8)
    assert _tiling.plan_fill(limit // 4, 16384, 1, 4, 1).num_warps == 8
    assert _tiling.plan_fill((limit - 1) // 4, 16384, 1, 4, 1).num_warps == TUNING.fill_num_warps


def test_huge_backward_plans_count_the_row_dims(monkeypatch) -> None:
    """diagonal_backward's planner hands plan_fill its rows' dims: a 1 GiB 2-D result takes
    the long-row blocks, a batched one with rows as long keeps the 8 KiB blocks (there 4 KiB
    took 269 µs against 236 on the H200)."""
    monkeypatch.setattr(_tiling, "INTERPRET", False)
    for sizes, block_bytes in (((16384, 16384), TUNING.huge_long_row_block_bytes),
                               ((16, 4096, 4096), TUNING.huge_fill_block_bytes)):
        grad = torch.empty(sizes[:-1], dtype=torch.float32)  # the diagonal's shape
        plan = backward_module._plan(sizes, grad, diagonal_of(sizes, 0, -2, -1))
        assert plan.constexprs["BLOCK"] * 4 == block_bytes, sizes


def test_interpreter_covers_small_results_in_one_program_and_pass(monkeypatch) -> None:
    monkeypatch.setattr(_tiling, "INTERPRET", True)
    tile = _tiling.plan_flat(60, 5, 1, 4, TUNING.fill_block_bytes, TUNING.fill_words_per_lane)
    assert tile.n_programs == 1 and tile.block == 64 and not tile.wide
    assert tile.peel_lanes >> tile.lane_shift >= 60 // 5  # every row in one pass


def test_variant_is_none_when_an_integer_needs_int64() -> None:
    plan = _tiling.LaunchPlan((2,), 1, (1, 2**31), {"A": 1}, 4)  # Triton would type it i64
    assert plan.variant is None
    plan = _tiling.LaunchPlan((2,), 1, (1, -(2**31)), {"A": 1}, 4)
    assert plan.variant == (1, 4)


def test_launch_plans_are_cached_per_signature() -> None:
    g = torch.ones(5, 2, device=ops.DEVICE)
    ops.diagonal_backward(g, [5, 2, 3], 0, 1, 2)
    key = backward_module._key(g, [5, 2, 3], 0, 1, 2)
    assert key in backward_module._PLANS
    x = torch.ones(2, 3, 4, device=ops.DEVICE)
    ops.diagonal_copy(x, 0, 1, 2)
    assert copy_module._key(x, 0, 1, 2) in copy_module._PLANS


@pytest.mark.parametrize("geometry", [
    ((5, 7), 1, 0, 1), ((5, 7), -2, 1, 0), ((3, 4, 5), 1, 0, 2), ((3, 4, 5), 0, 2, 1),
    ((2, 3, 4, 5), -1, 1, 3), ((4, 2, 3, 4), 1, 3, 0), ((2, 3, 2, 3, 2), 0, 1, 3),
    ((3, 4, 5), 0, 0, 1),  # a run of 5 words after the second diagonal dim
])
def test_gpu_index_selects_match_aten_under_the_interpreter(monkeypatch, geometry) -> None:
    """The GPU's way to the diagonal-dim indices (selects during the peel, ON_GPU)
    runs here too, so CI covers the code path that only a GPU takes by default."""
    monkeypatch.setattr(backward_module, "INTERPRET", False)
    monkeypatch.setattr(backward_module, "_PLANS", {})
    sizes, offset, dim1, dim2 = geometry
    diag_shape = torch.empty(sizes, device="meta").diagonal(offset, dim1, dim2).shape
    g = torch.randint(-2**31, 2**31 - 1, diag_shape, dtype=torch.int32, device=ops.DEVICE)
    out = ops.diagonal_backward(g, list(sizes), offset, dim1, dim2)
    assert bitwise_difference(out, _aten_backward(g, list(sizes), offset, dim1, dim2)) == ""


def test_copy_blocks_are_smaller(monkeypatch) -> None:
    """A copy gathers: more, smaller programs than the backward fill."""
    monkeypatch.setattr(_tiling, "INTERPRET", False)
    fill = _tiling.plan_flat(2**20, 512, 1, 4, TUNING.fill_block_bytes,
                             TUNING.fill_words_per_lane)
    gather = _tiling.plan_flat(2**20, 512, 512, 4, TUNING.gather_block_bytes)
    ratio = fill.block // gather.block
    assert ratio >= 16 and gather.n_programs == ratio * fill.n_programs
    assert gather.wide and gather.copy_lanes == gather.block  # rows longer than a block
    short = _tiling.plan_flat(2**20, 100, 100, 4, TUNING.gather_block_bytes)
    assert not short.wide and short.row_lanes == 128 and short.peel_lanes == short.block


def test_launch_hooks_count_only_when_someone_listens() -> None:
    """The direct launch skips launch metadata and hooks only when no hook would run:
    Triton >= 3.5 keeps an always-present, usually empty chain of hooks."""
    import triton

    chain = triton.knobs.runtime.launch_enter_hook
    assert not listening(None)
    assert listening(lambda metadata: None)
    if hasattr(chain, "calls"):
        assert not listening(chain) or chain.calls
        hook = lambda metadata: None  # noqa: E731
        chain.add(hook)
        try:
            assert listening(chain)
        finally:
            chain.remove(hook)
