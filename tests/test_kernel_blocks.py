"""The GPU's block plans, shrunk to a few words, run under the interpreter against aten.

On a GPU a program owns 1-16 KiB of the result and handles its rows one lane per 32 words a pass, so
the paths where a run of diagonal words is split between two programs, a long run gets a
wide pass of its own, or a block needs several passes over its rows, only appear for large
tensors.
Shrinking the blocks to 4-16 words makes small Cases take every one of those paths on CPU.
"""

from __future__ import annotations

import importlib
import random

import pytest
import torch

import diagfuzz.ops as ops
from diagfuzz.ops import _tiling
from tests.bitwise import bitwise_difference

backward_module = importlib.import_module("diagfuzz.ops.diagonal_backward")
copy_module = importlib.import_module("diagfuzz.ops.diagonal_copy")

#: (fill block bytes, fill words per lane, gather block bytes), for int32 words: 4..16 words
#: a block, 2 lanes a pass.
SMALL_BLOCKS = [(16, 2, 16), (32, 4, 8)]


@pytest.fixture(params=SMALL_BLOCKS, ids=lambda p: f"fill{p[0]}B-{p[1]}words-a-lane-gather{p[2]}B")
def small_gpu_blocks(request, monkeypatch):
    fill, words_per_lane, gather = request.param
    monkeypatch.setattr(_tiling, "INTERPRET", False)
    monkeypatch.setattr(backward_module, "INTERPRET", False)  # the GPU's index selects too
    monkeypatch.setattr(backward_module, "FILL_BLOCK_BYTES", fill)
    monkeypatch.setattr(backward_module, "FILL_WORDS_PER_LANE", words_per_lane)
    monkeypatch.setattr(copy_module, "GATHER_BLOCK_BYTES", gather)
    monkeypatch.setattr(_tiling, "MAX_WIDE_LANES", 2)  # wide passes take several rounds
    monkeypatch.setattr(backward_module, "_PLANS", {})
    monkeypatch.setattr(copy_module, "_PLANS", {})
    return request.param


def _geometries(seed: int, count: int):
    """Random small geometries and grad/input layouts (contiguous, permuted trailing dims,
    expanded, sliced), every one with a non-empty result."""
    rng = random.Random(seed)
    for _ in range(count):
        rank = rng.randint(2, 5)
        sizes = [rng.randint(1, 6) for _ in range(rank)]
        dim1, dim2 = rng.sample(range(rank), 2)
        offset = rng.randint(-max(sizes), max(sizes))
        yield sizes, offset, dim1, dim2, rng.choice(["contiguous", "permuted", "expanded",
                                                     "sliced"]), rng.randint(0, 2**30)


def _layout(shape: tuple[int, ...], kind: str, seed: int, dtype: torch.dtype) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    base_shape = list(shape)
    if kind == "sliced":
        base_shape = [2 * s for s in shape]
    values = torch.randint(-2**31, 2**31 - 1, base_shape, generator=gen, dtype=torch.int64)
    t = values.to(torch.int32).view(torch.float32).to(ops.DEVICE)
    if dtype != torch.float32:
        t = values.to(torch.int8).to(dtype).to(ops.DEVICE)
    if kind == "sliced":
        t = t[tuple(slice(None, None, 2) for _ in shape)]
    elif kind == "permuted" and len(shape) >= 2:
        t = t.transpose(-1, -2).contiguous().transpose(-1, -2)
    elif kind == "expanded" and len(shape) >= 1:
        t = t[..., :1].expand(shape) if shape[-1] else t
    return t


@pytest.mark.parametrize("dtype", [torch.float32, torch.int8, torch.complex128])
def test_backward_with_small_gpu_blocks_matches_aten(small_gpu_blocks, dtype) -> None:
    failures = []
    for sizes, offset, dim1, dim2, kind, seed in _geometries(1, 40):
        shape = torch.empty(sizes, device="meta").diagonal(offset, dim1, dim2).shape
        grad = _layout(tuple(shape), kind, seed, dtype)
        out = ops.diagonal_backward(grad, sizes, offset, dim1, dim2)
        with ops.use_triton(False):
            expected = torch.ops.aten.diagonal_backward(grad, sizes, offset, dim1, dim2)
        diff = bitwise_difference(out, expected)
        if diff:
            failures.append(f"{sizes} offset={offset} dims=({dim1},{dim2}) {kind}: {diff}")
    assert failures == []


@pytest.mark.parametrize("dtype", [torch.float32, torch.int8, torch.complex128])
def test_copy_with_small_gpu_blocks_matches_aten(small_gpu_blocks, dtype) -> None:
    failures = []
    for sizes, offset, dim1, dim2, kind, seed in _geometries(2, 40):
        x = _layout(tuple(sizes), kind, seed, dtype)
        out = ops.diagonal_copy(x, offset, dim1, dim2)
        with ops.use_triton(False):
            expected = torch.ops.aten.diagonal_copy(x, offset, dim1, dim2)
        diff = bitwise_difference(out, expected)
        if diff:
            failures.append(f"{sizes} offset={offset} dims=({dim1},{dim2}) {kind}: {diff}")
    assert failures == []


def _plan_of(grad: torch.Tensor, sizes: list[int], dim1: int, dim2: int):
    backward_module._PLANS.clear()
    ops.diagonal_backward(grad, sizes, 0, dim1, dim2)
    ((_, plan),) = backward_module._PLANS.values()
    return plan


def test_small_blocks_take_the_split_wide_and_multi_pass_paths(small_gpu_blocks) -> None:
    """The plans these tests run really split a run between programs (wide passes) and
    need several passes over a block's rows (else the tests above would prove nothing
    beyond the one-program case)."""
    fill, words_per_lane, _ = small_gpu_blocks
    lanes = fill // 4 // words_per_lane
    # A run of 20 words (the dim after the second diagonal dim) in blocks of 4-16 words.
    grad = torch.arange(3 * 20, dtype=torch.float32, device=ops.DEVICE).reshape(20, 3)
    plan = _plan_of(grad.T.contiguous().T, [3, 4, 20], 0, 1)
    block = plan.constexprs["BLOCK"]
    run_len = plan.ints[2]
    assert block == fill // 4 and run_len == 20 > block and plan.n_programs > 1
    assert plan.constexprs["PEEL_LANES"] == 1 and plan.constexprs["COPY_LANES"] == 2
    assert plan.constexprs["ROUNDS"] == block // 2 > 1
    # Rows of one word: a block holds more rows than one pass covers.
    plan = _plan_of(torch.ones(1, dtype=torch.float32, device=ops.DEVICE), [30, 1], 0, 1)
    width, row_lanes = plan.ints[1], plan.ints[3]
    assert width == 1 and plan.constexprs["PEEL_LANES"] == lanes
    assert plan.constexprs["BLOCK"] > lanes // row_lanes
