"""diagonal_scatter's and diag_embed's GPU plans, shrunk to a few words, run under the
interpreter against aten, with 32-bit and with 64-bit indices.

On a GPU a diagonal_scatter program owns 4-16 KiB of the result's storage and stores 128
diagonal elements a round, so blocks that split the diagonal, hold none of it, or need
several rounds only appear for large tensors; the interpreter's own plans are one program
with 64-bit indices. Shrinking the blocks to 8-16 words and the rounds to 2-4 elements makes
small tensors take every one of those paths on CPU, and forcing the planner's int64 switch
runs the 64-bit variant of the same plans.
"""

from __future__ import annotations

import importlib
import random

import pytest
import torch

import diagfuzz.ops as ops
from diagfuzz.ops import _tiling
from tests.bitwise import bitwise_difference
from tests.family_table import storage_difference, tensor
from tests.tuning import tune

scatter_module = importlib.import_module("diagfuzz.ops.diagonal_scatter")
embed_module = importlib.import_module("diagfuzz.ops.diag_embed")
backward_module = importlib.import_module("diagfuzz.ops.diagonal_backward")

#: (block words, diagonal lanes a round, at most, 64-bit indices forced)
PLANS = [(8, 2, 2, False), (16, 2, 8, True)]


@pytest.fixture(params=PLANS,
                ids=lambda p: f"block{p[0]}words-lanes{p[1]}to{p[2]}-int64{int(p[3])}")
def small_gpu_plans(request, monkeypatch):
    """GPU plans whose blocks hold ``block words`` words; returns ``shrink(dtype)``, which
    sizes the blocks (in bytes) for that dtype's words."""
    block_words, lanes, max_lanes, force_64 = request.param
    monkeypatch.setattr(_tiling, "INTERPRET", False)
    monkeypatch.setattr(backward_module, "INTERPRET", False)
    tune(monkeypatch, scatter_diag_lanes=lanes, scatter_max_diag_lanes=max_lanes,
         max_wide_lanes=2)
    if force_64:
        always = lambda *extents: True  # noqa: E731
        for module in (_tiling, scatter_module, backward_module):
            monkeypatch.setattr(module, "needs_int64", always)
    for module in (scatter_module, embed_module, backward_module):
        monkeypatch.setattr(module, "_PLANS", {})

    def shrink(dtype: str) -> None:
        word_bytes = min(getattr(torch, dtype).itemsize, 8)
        block_bytes = block_words * word_bytes
        tune(monkeypatch, fill_block_bytes=block_bytes, small_fill_block_bytes=block_bytes,
             fill_words_per_lane=2, small_fill_words_per_lane=2,
             scatter_block_bytes=block_bytes, scatter_byte_block_bytes=block_bytes,
             scatter_small_block_bytes=block_bytes)

    shrink.params = request.param
    return shrink


#: (input shape, offset, dim1, dim2, input kind, src kind): diagonals split between
#: programs, blocks with none of it or many elements, gather mode, a larger storage.
EXPLICIT = [
    ((6, 6), 0, 0, 1, "contiguous", "contiguous"),
    ((4, 7), -1, 1, 0, "storage", "sliced"),
    ((3, 3, 4), 1, 0, 2, "permuted", "expanded"),
    ((3, 3, 2), 0, 1, 0, "sliced", "contiguous"),  # a storage 18x the view
    ((8, 1, 1), 0, 1, 2, "contiguous", "contiguous"),  # every element on the diagonal
    ((2, 5, 5), 2, 1, 2, "expanded", "permuted"),  # gather mode
    ((3, 4), 9, 0, 1, "sliced", "contiguous"),  # no diagonal: the storage alone
    # Runs: the diagonal's innermost dim contiguous in the result (src: stride 1, or not).
    ((2, 2, 4, 4), 0, 0, 1, "contiguous", "contiguous"),  # runs of 16 elements
    ((3, 4, 2, 5), 1, 0, 1, "contiguous", "contiguous"),  # runs of 10, split by blocks
    ((4, 3, 6), -1, 0, 1, "storage", "contiguous"),  # runs of 6 in a larger storage
    ((3, 3, 8), 0, 0, 1, "contiguous", "permuted"),  # src's stride 1 along the runs
    ((2, 2, 6), 0, 0, 1, "sliced", "permuted"),  # 6 elements 2 apart: rounds, not runs
]
KINDS = ["contiguous", "permuted", "sliced", "expanded", "storage", "offset"]


def _geometries(seed: int, count: int):
    yield from EXPLICIT
    rng = random.Random(seed)
    for _ in range(count):
        rank = rng.randint(2, 4)
        shape = [rng.randint(1, 3) for _ in range(rank)]
        dim1, dim2 = rng.sample(range(rank), 2)
        offset = rng.randint(-shape[dim1], shape[dim2])
        yield tuple(shape), offset, dim1, dim2, rng.choice(KINDS), rng.choice(KINDS[:4])


def _scatter_difference(x: torch.Tensor, src: torch.Tensor, offset: int, dim1: int,
                        dim2: int) -> str:
    with ops.use_triton(False):
        expected = torch.diagonal_scatter(x, src, offset, dim1, dim2)
    actual = ops.diagonal_scatter(x, src, offset, dim1, dim2)
    out = torch.empty(0, dtype=x.dtype, device=ops.DEVICE)
    ops.diagonal_scatter_out(x, src, offset, dim1, dim2, out=out)
    return (bitwise_difference(actual, expected) or storage_difference(actual, expected)
            or bitwise_difference(out, expected.new_empty(expected.shape).copy_(expected)))


@pytest.mark.parametrize("dtype", ["float32", "int8", "complex128"])
def test_scatter_with_small_gpu_plans_matches_aten(small_gpu_plans, dtype: str) -> None:
    small_gpu_plans(dtype)
    failures = []
    for i, (shape, offset, dim1, dim2, kind, src_kind) in enumerate(_geometries(3, 6)):
        x = tensor(shape, kind, dtype, seed=i)
        diagonal = torch.empty(shape, device="meta").diagonal(offset, dim1, dim2).shape
        src = tensor(tuple(diagonal), src_kind, dtype, seed=100 + i)
        diff = _scatter_difference(x, src, offset, dim1, dim2)
        if diff:
            failures.append(f"{shape} offset={offset} dims=({dim1},{dim2}) {kind} "
                            f"src {src_kind}: {diff}")
    assert failures == []
    plans = [plan for _, plan in scatter_module._PLANS.values() if plan is not None]
    assert {plan.constexprs["INDEX_64"] for plan in plans} == {small_gpu_plans.params[3]}
    # rounds; runs from a strided src, run by run and in tiles (one-word elements), and
    # from a contiguous src
    tiled = {"runs tiled"} if dtype != "complex128" else set()
    assert {_run_kind(plan) for plan in plans} == {"rounds", "runs src=strided", "runs src=1",
                                                   *tiled}
    # clone mode loads its first round before the copy, gather mode after the barrier
    assert {(p.constexprs["GATHER"], p.constexprs["PREFETCH"]) for p in plans} == {
        (False, True), (True, False)}


def _run_kind(plan) -> str:
    """How a plan stores the diagonal: in rounds, or runs (src contiguous or strided)."""
    if not plan.constexprs["DIAG_RUNS"]:
        return "rounds"
    if plan.constexprs["RUN_TILE"] > 1:
        return "runs tiled"
    return f"runs src={1 if plan.constexprs['RUN_SRC_ALIGN'] else 'strided'}"


@pytest.mark.parametrize("fraction", [0, 1, 64])
def test_scatter_runs_and_rounds_agree(small_gpu_plans, monkeypatch, fraction: int) -> None:
    """The same run-shaped diagonals with runs off (0), only for runs a block long (1) and
    for short runs too (64): every plan matches aten."""
    small_gpu_plans("int8")
    tune(monkeypatch, scatter_run_block_fraction=fraction)
    failures = []
    for i, shape in enumerate([(2, 2, 4, 4), (3, 4, 2, 5), (2, 3, 3, 1, 7), (5, 5, 3),
                               (3, 3, 5, 9), (3, 4, 5, 9), (6, 7, 4, 5)]):
        x = tensor(shape, "contiguous", "int8", seed=i)
        src = tensor(tuple(torch.empty(shape, device="meta").diagonal(1, 0, 1).shape),
                     "contiguous", "int8", seed=50 + i)
        diff = _scatter_difference(x, src, 1, 0, 1)
        if diff:
            failures.append(f"{shape}: {diff}")
    assert failures == []
    plans = [plan for _, plan in scatter_module._PLANS.values() if plan is not None]
    runs = {plan.constexprs["DIAG_RUNS"] for plan in plans}
    # (src's runs are strided for (2, 3, 3, 1, 7), (3, 3, 5, 9) and (3, 4, 5, 9): the
    # diagonal dim is innermost in src; of size 2 or 6, tiles of two runs, of size 3, run by
    # run)
    assert runs == ({False} if fraction == 0 else {True} if fraction == 64 else runs)
    if fraction == 64:  # run parts stored unmasked and copy blocks left to the runs: taken
        for kind in ("runs src=strided", "runs src=1", "runs tiled"):
            taken = [p for p in plans if _run_kind(p) == kind]
            assert any(_whole_parts(p) for p in taken), kind
            assert any(_covered_blocks(p) for p in taken), kind


def test_scatter_runs_in_reverse_program_order(small_gpu_plans, monkeypatch) -> None:
    """The interpreter runs programs in order, so the run programs (the first) store before
    the copy's programs, whose words would hide a run program's stray write; on a GPU any
    order happens. Run in reverse order, a write outside the runs shows."""
    from triton.runtime import interpreter

    builder = interpreter.interpreter_builder
    in_order = builder.set_grid_idx

    def reversed_idx(x: int, y: int, z: int) -> None:
        nx, ny, nz = builder.grid_dim
        in_order(nx - 1 - x, ny - 1 - y, nz - 1 - z)

    monkeypatch.setattr(builder, "set_grid_idx", reversed_idx)
    small_gpu_plans("int8")
    tune(monkeypatch, scatter_run_block_fraction=64)
    failures = []
    for i, shape in enumerate([(3, 4, 2, 5), (2, 3, 3, 1, 7), (3, 4, 5, 9), (6, 7, 4, 5),
                               (3, 3, 8)]):
        x = tensor(shape, "contiguous", "int8", seed=i)
        src_shape = tuple(torch.empty(shape, device="meta").diagonal(1, 0, 1).shape)
        src = tensor(src_shape, "permuted" if len(shape) == 3 else "contiguous", "int8",
                     seed=70 + i)
        diff = _scatter_difference(x, src, 1, 0, 1)
        if diff:
            failures.append(f"{shape}: {diff}")
    assert failures == []
    plans = [plan for _, plan in scatter_module._PLANS.values() if plan is not None]
    assert {_run_kind(p) for p in plans} == {"runs src=strided", "runs src=1", "runs tiled"}


def _runs_of(plan) -> list[tuple[int, int]]:
    """(result start, src start) of every run of a runs plan, in words, as the kernel peels
    them (the outer diagonal dims, innermost first)."""
    words = plan.constexprs["WORDS"]
    n_ddims, run_len = plan.arg("n_ddims"), plan.arg("dsize0")
    starts = []
    for k in range(plan.arg("n_diag") // run_len):
        rest, pos, src = k, plan.arg("diag_base"), 0
        for j in range(1, n_ddims):
            rest, idx = divmod(rest, plan.arg(f"dsize{j}"))
            pos += idx * plan.arg(f"dout{j}")
            src += idx * plan.arg(f"dsrc{j}")
        starts.append((pos * words, src * words))
    return starts


def _parts_of(plan) -> list[tuple[int, int, bool]]:
    """(result start, src start, whole) of every run program's part, in words, as the
    kernel derives them from its program id; whole: unmasked."""
    chunk, words = plan.constexprs["RUN_BLOCK"], plan.constexprs["WORDS"]
    tile, src_step = plan.constexprs["RUN_TILE"], 1
    if tile > 1:  # RUN_TILE runs a program, RUN_BLOCK // RUN_TILE one-word elements of each
        chunk, src_step = chunk // tile, plan.arg("dsrc0")
    run_words = plan.arg("dsize0") * words
    runs = _runs_of(plan)
    assert plan.arg("run_programs") * tile == len(runs) * plan.arg("run_chunks")
    return [(pos + part * chunk, src + part * chunk * src_step,
             (part + 1) * chunk <= run_words)
            for pos, src in runs for part in range(plan.arg("run_chunks"))]


def _whole_parts(plan) -> int:
    """How many run programs store their part unmasked."""
    return sum(whole for _, _, whole in _parts_of(plan))


def _covered_blocks(plan) -> int:
    """How many copy programs' blocks lie wholly inside one contiguous run (nothing to
    copy)."""
    block, words = plan.constexprs["BLOCK"], plan.constexprs["WORDS"]
    run_words = plan.arg("dsize0") * words
    blocks = plan.n_programs - plan.arg("run_programs")
    return sum(1 for start, _ in _runs_of(plan) for b in range(blocks)
               if start <= b * block and (b + 1) * block <= start + run_words)


@pytest.mark.parametrize("dtype", ["int8", "float32", "complex128"])
def test_run_alignment_hints_hold_for_every_part(small_gpu_plans, dtype: str) -> None:
    """RUN_OUT_ALIGN and RUN_SRC_ALIGN tell the GPU compiler that every run program's result
    and src starts are multiples of them (16-byte vectors); the interpreter ignores the
    hints, so a wrong one would only show on a GPU: every part of every plan is checked
    here instead (planned, not run: the runs tests above run these paths)."""
    small_gpu_plans(dtype)
    rng = random.Random(11)
    plans, aligns = [], set()
    for i in range(200):
        outer = [rng.randint(1, 4) for _ in range(rng.randint(1, 2))]
        shape = tuple([*outer[:1], outer[0], *outer[1:], rng.randint(8, 40)])
        kind = rng.choice(["contiguous", "storage", "offset", "sliced"])
        x = tensor(shape, kind, dtype, seed=i)
        offset = rng.randint(-1, 1)
        src_shape = tuple(torch.empty(shape, device="meta").diagonal(offset, 0, 1).shape)
        src = tensor(src_shape, rng.choice(["contiguous", "offset", "permuted"]), dtype,
                     seed=60 + i)
        source, values, diag = scatter_module._prepare(x, src, offset, 0, 1)
        result = scatter_module._result(source)
        plans.append(scatter_module._plan(source, values, diag, result.clone, result.strides,
                                          result.storage_offset, result.storage_numel))
    word_bytes = min(getattr(torch, dtype).itemsize, 8)
    for plan in plans:
        if plan is None or not plan.constexprs["DIAG_RUNS"]:
            continue
        out, src = plan.constexprs["RUN_OUT_ALIGN"], plan.constexprs["RUN_SRC_ALIGN"]
        if plan.constexprs["RUN_TILE"] > 1:  # tiles take no hints
            assert out == src == 0
            continue
        # runs are contiguous in the result; src's alignment is 0 exactly where they are not
        # in src
        assert out and plan.arg("dout0") == 1 and bool(src) == (plan.arg("dsrc0") == 1)
        for align in (a for a in (out, src) if a):
            assert align & (align - 1) == 0 and align * word_bytes <= max(16, word_bytes)
        for out_at, src_at, _ in _parts_of(plan):
            assert out_at % out == 0, plan
            assert not src or src_at % src == 0, plan
        aligns.update({out, src} - {0})
    if getattr(torch, dtype).itemsize < 16:  # (a 16-byte element is always 16-aligned)
        assert len(aligns) >= 2, aligns  # aligned and unaligned geometries both planned


@pytest.mark.parametrize("dtype", ["float32", "complex128"])
def test_embed_with_small_gpu_plans_matches_aten(small_gpu_plans, dtype: str) -> None:
    small_gpu_plans(dtype)
    failures = []
    rng = random.Random(5)
    for i in range(8):
        rank = rng.randint(1, 3)
        shape = tuple(rng.randint(1, 4) for _ in range(rank))
        dim1, dim2 = rng.sample(range(-rank - 1, rank + 1), 2)
        if dim1 % (rank + 1) == dim2 % (rank + 1):
            continue
        offset = rng.randint(-3, 3)
        x = tensor(shape, rng.choice(KINDS[:4]), dtype, seed=i)
        with ops.use_triton(False):
            expected = torch.diag_embed(x, offset, dim1, dim2)
        diff = bitwise_difference(ops.diag_embed(x, offset, dim1, dim2), expected)
        if diff:
            failures.append(f"{shape} offset={offset} dims=({dim1},{dim2}): {diff}")
    assert failures == []


def test_small_plans_split_the_diagonal_and_take_rounds(small_gpu_plans, monkeypatch) -> None:
    """The plans above really have many programs, blocks holding several diagonal
    elements in more than one round, and gather mode; else they prove little more than
    the interpreter's one-program plans. (Runs off: this diagonal is one run.)"""
    block_words, lanes, max_lanes, _ = small_gpu_plans.params
    small_gpu_plans("float32")
    tune(monkeypatch, scatter_run_block_fraction=0)
    scatter_module._PLANS.clear()
    x = tensor((32, 1, 1))  # every element on the diagonal
    src = tensor((32, 1))
    assert _scatter_difference(x, src, 0, 1, 2) == ""
    ((result, plan),) = scatter_module._PLANS.values()
    assert result.clone and plan.n_programs == 32 // block_words > 1
    # a block's elements (one word apart) in rounds of the most lanes, still several
    assert plan.constexprs["DIAG_LANES"] == max_lanes < plan.constexprs["BLOCK"]
    # elements 7 words apart: a block of 16 holds 3 (4 lanes); 21 apart: one (2 lanes)
    assert _tiling.plan_diag_lanes(lanes, 16, 7, 6) == min(4, max_lanes)
    assert _tiling.plan_diag_lanes(lanes, 16, 21, 20) == lanes
    scatter_module._PLANS.clear()
    x = tensor((2, 5, 5), "expanded")
    assert _scatter_difference(x, tensor((2, 5)), 0, 1, 2) == ""
    ((result, plan),) = scatter_module._PLANS.values()
    assert not result.clone and plan.constexprs["GATHER"] and plan.n_programs > 1


def test_a_runs_diagonal_spreads_over_enough_programs(monkeypatch) -> None:
    """A runs diagonal is stored by programs of its own, of few enough words that it spans
    scatter_run_programs programs, in powers of two of at least 256 words (GPU plans)."""
    monkeypatch.setattr(_tiling, "INTERPRET", False)
    tune(monkeypatch, scatter_run_programs=512)
    assert _tiling.plan_run_block(32768, 1 << 20) == 2048  # 16x16x256x256 int8's diagonal
    assert _tiling.plan_run_block(1024, 1 << 20) == 1024  # never larger than the copy's
    assert _tiling.plan_run_block(32768, 3 * 512 * 500) == 1024  # rounded down to 2**k
    assert _tiling.plan_run_block(32768, 1000) == 256  # a short diagonal: 256 words
    tune(monkeypatch, scatter_run_programs=0)
    assert _tiling.plan_run_block(32768, 1 << 20) == 32768
