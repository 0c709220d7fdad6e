"""The GPU's block plans, shrunk to a few words, run under the interpreter against aten.

On a GPU a program owns 1-16 KiB of the result and handles its rows one lane per 32 words a pass, so
the paths where a run of diagonal words is split between two programs, a long run gets a
wide pass of its own, or a block needs several passes over its rows, only appear for large
tensors.
Shrinking the blocks to 4-16 words makes small Cases take every one of those paths on CPU.
"""

from __future__ import annotations

import importlib
import math
import random

import pytest
import torch

import diagfuzz.ops as ops
from diagfuzz.ops import _tiling
from tests.bitwise import bitwise_difference
from tests.tuning import tune

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
    monkeypatch.setattr(copy_module, "INTERPRET", False)  # programs own whole rows
    # Every test tensor is a small output: shrink both fill plans. Wide passes take several
    # rounds.
    tune(monkeypatch, fill_block_bytes=fill, small_fill_block_bytes=fill,
         fill_words_per_lane=words_per_lane, small_fill_words_per_lane=words_per_lane,
         gather_block_bytes=gather, max_wide_lanes=2)
    monkeypatch.setattr(backward_module, "_PLANS", {})
    monkeypatch.setattr(copy_module, "_PLANS", {})
    return request.param


#: Elements of a random geometry, at most: a 4-word block makes a program per few elements,
#: and the interpreter runs programs one by one.
MAX_ELEMENTS = 192

#: Layouts that do not merge the trailing dims (``reversed``: column-major; ``sliced``) send
#: diagonal_backward down its run_in_cols=0 path when two dims follow the second diagonal dim.
KINDS = ["contiguous", "permuted", "expanded", "sliced", "reversed"]

#: Geometries every test runs besides the random ones: the paths random draws hit rarely.
BACKWARD_EXPLICIT = [
    ([3, 3, 2, 2], 0, 0, 1, "reversed"),  # run_in_cols=0: whole rows on the diagonal
    ([2, 2, 5, 7], 0, 0, 1, "reversed"),  # run_in_cols=0, rows longer than a block
    ([2, 2, 5, 7], 1, 1, 0, "sliced"),
    ([3, 4, 20], 0, 0, 1, "contiguous"),  # a run of 20 words: wide passes, split runs
    ([30, 1], 0, 0, 1, "contiguous"),  # rows of one word: several passes a block
]
COPY_EXPLICIT = [
    ([9, 9], 0, 0, 1, "contiguous"),  # rows longer than a block: wide passes, rounds
    ([9, 9], -1, 1, 0, "sliced"),
    ([2, 17, 3], 1, 1, 0, "reversed"),
    ([40, 2, 2], 0, 1, 2, "contiguous"),  # rows of two words: several passes a block
]


def _geometries(seed: int, count: int):
    """The explicit geometries, then ``count`` random small ones; four in five random ones
    have a non-empty diagonal (an empty one launches no copy and writes only zeros)."""
    rng = random.Random(seed)
    for _ in range(count):
        rank = rng.randint(2, 5)
        sizes = [rng.randint(1, 6) for _ in range(rank)]
        while math.prod(sizes) > MAX_ELEMENTS:  # blocks of a few words: keep launches short
            sizes[sizes.index(max(sizes))] -= 1
        dim1, dim2 = rng.sample(range(rank), 2)
        if rng.random() < 0.8:
            offset = rng.randint(1 - sizes[dim1], sizes[dim2] - 1)
        else:
            offset = rng.randint(-max(sizes), max(sizes))
        yield sizes, offset, dim1, dim2, rng.choice(KINDS), rng.randint(0, 2**30)


def _layout(shape: tuple[int, ...], kind: str, seed: int, dtype: torch.dtype) -> torch.Tensor:
    """Random bits (both words of a complex128) in the layout ``kind``."""
    gen = torch.Generator().manual_seed(seed)
    base_shape = [2 * s for s in shape] if kind == "sliced" else list(shape)
    if dtype == torch.complex128:
        words = torch.randint(-2**63, 2**63 - 1, [*base_shape, 2], generator=gen,
                              dtype=torch.int64)
        t = words.view(torch.complex128).squeeze(-1)
    else:
        values = torch.randint(-2**31, 2**31 - 1, base_shape, generator=gen, dtype=torch.int64)
        t = (values.to(torch.int32).view(torch.float32) if dtype == torch.float32
             else values.to(torch.int8).to(dtype))
    t = t.to(ops.DEVICE)
    if kind == "sliced":
        t = t[tuple(slice(None, None, 2) for _ in shape)]
    elif kind == "permuted" and len(shape) >= 2:
        t = t.transpose(-1, -2).contiguous().transpose(-1, -2)
    elif kind == "reversed":
        order = list(reversed(range(len(shape))))
        t = t.permute(order).contiguous().permute(order)
    elif kind == "expanded" and len(shape) >= 1:
        t = t[..., :1].expand(shape) if shape[-1] else t
    return t


def _sentinel_like(shape: torch.Size | list[int], dtype: torch.dtype) -> torch.Tensor:
    """A contiguous out= tensor whose every byte is 0x5A: a word the kernel leaves unwritten
    shows up in the comparison, whatever the allocator returned."""
    out = torch.empty(list(shape), dtype=dtype, device=ops.DEVICE)
    out.view(torch.uint8).fill_(0x5A)
    return out


def _backward_difference(grad, sizes, offset, dim1, dim2) -> str:
    with ops.use_triton(False):
        expected = torch.ops.aten.diagonal_backward(grad, sizes, offset, dim1, dim2)
    functional = ops.diagonal_backward(grad, sizes, offset, dim1, dim2)
    out = _sentinel_like(sizes, grad.dtype)
    ops.diagonal_backward_out(grad, sizes, offset, dim1, dim2, out=out)
    return bitwise_difference(functional, expected) or bitwise_difference(out, expected)


def _copy_difference(x, offset, dim1, dim2) -> str:
    with ops.use_triton(False):
        expected = torch.ops.aten.diagonal_copy(x, offset, dim1, dim2)
    functional = ops.diagonal_copy(x, offset, dim1, dim2)
    out = _sentinel_like(expected.shape, x.dtype)
    ops.diagonal_copy_out(x, offset, dim1, dim2, out=out)
    return bitwise_difference(functional, expected) or bitwise_difference(out, expected)


def _cases(seed: int, dtype: torch.dtype, explicit: list):
    count = 10 if dtype == torch.complex128 else 30  # 1-element blocks: the slow dtype
    yield from ((*geometry, index) for index, geometry in enumerate(explicit))
    yield from _geometries(seed, count)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int8, torch.complex128])
def test_backward_with_small_gpu_blocks_matches_aten(small_gpu_blocks, dtype) -> None:
    failures = []
    for sizes, offset, dim1, dim2, kind, seed in _cases(1, dtype, BACKWARD_EXPLICIT):
        shape = torch.empty(sizes, device="meta").diagonal(offset, dim1, dim2).shape
        grad = _layout(tuple(shape), kind, seed, dtype)
        diff = _backward_difference(grad, sizes, offset, dim1, dim2)
        if diff:
            failures.append(f"{sizes} offset={offset} dims=({dim1},{dim2}) {kind}: {diff}")
    assert failures == []


@pytest.mark.parametrize("dtype", [torch.float32, torch.int8, torch.complex128])
def test_copy_with_small_gpu_blocks_matches_aten(small_gpu_blocks, dtype) -> None:
    failures = []
    for sizes, offset, dim1, dim2, kind, seed in _cases(2, dtype, COPY_EXPLICIT):
        x = _layout(tuple(sizes), kind, seed, dtype)
        diff = _copy_difference(x, offset, dim1, dim2)
        if diff:
            failures.append(f"{sizes} offset={offset} dims=({dim1},{dim2}) {kind}: {diff}")
    assert failures == []


@pytest.mark.parametrize("geometry", BACKWARD_EXPLICIT[:3], ids=str)
def test_rows_on_the_diagonal_under_interpreter_plans(geometry) -> None:
    """run_in_cols=0 (trailing dims that do not merge in grad_output) with the interpreter's
    own plans as well: the random geometries of test_kernels.py never reach it."""
    sizes, offset, dim1, dim2, kind = geometry
    shape = torch.empty(sizes, device="meta").diagonal(offset, dim1, dim2).shape
    grad = _layout(tuple(shape), kind, 7, torch.float32)
    backward_module._PLANS.clear()
    assert _backward_difference(grad, sizes, offset, dim1, dim2) == ""
    ((_, plan),) = backward_module._PLANS.values()
    run_in_cols, length = plan.arg("run_in_cols"), plan.arg("length")
    assert run_in_cols == 0 and length > 0


def _plan_of(grad: torch.Tensor, sizes: list[int], dim1: int, dim2: int):
    backward_module._PLANS.clear()
    assert _backward_difference(grad, sizes, 0, dim1, dim2) == ""
    ((_, plan),) = backward_module._PLANS.values()
    return plan


def test_small_blocks_take_the_split_wide_and_multi_pass_paths(small_gpu_blocks) -> None:
    """The plans these tests run really split a run between programs (wide passes, several
    rounds), need several passes over a block's rows, and put whole rows on the diagonal
    (run_in_cols=0); else the tests above would prove nothing beyond the one-program case.
    Each result is checked against aten as well."""
    fill, words_per_lane, _ = small_gpu_blocks
    lanes = fill // 4 // words_per_lane
    # A run of 20 words (the dim after the second diagonal dim) in blocks of 4-16 words.
    grad = torch.arange(3 * 20, dtype=torch.float32, device=ops.DEVICE).reshape(20, 3)
    plan = _plan_of(grad.T.contiguous().T, [3, 4, 20], 0, 1)
    block = plan.constexprs["BLOCK"]
    run_len = plan.arg("run_len")
    assert block == fill // 4 and run_len == 20 > block and plan.n_programs > 1
    assert plan.constexprs["PEEL_LANES"] == 1 and plan.constexprs["COPY_LANES"] == 2
    assert plan.constexprs["ROUNDS"] == block // 2 > 1
    # Rows of one word: a block holds more rows than one pass covers.
    plan = _plan_of(torch.ones(1, dtype=torch.float32, device=ops.DEVICE), [30, 1], 0, 1)
    width, row_lanes = plan.arg("width"), plan.arg("row_lanes")
    assert width == 1 and plan.constexprs["PEEL_LANES"] == lanes
    assert plan.constexprs["BLOCK"] > lanes // row_lanes
    # Trailing dims that do not merge in grad_output: whole rows on the diagonal.
    grad = torch.arange(1, 13, dtype=torch.float32, device=ops.DEVICE).reshape(3, 2, 2)
    plan = _plan_of(grad.permute(2, 1, 0), [3, 3, 2, 2], 0, 1)
    assert plan.arg("run_in_cols") == 0 and plan.arg("length") == 3
