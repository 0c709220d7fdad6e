"""The sequence search's pattern sweep, and input storages handed on as a caching allocator
hands on freed blocks: bugs behind a cache keyed on addresses, on sizes without strides, or
behind state a refused call leaves, are found at once and are deterministic on the CPU."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import torch

from diagfuzz.core import recycling
from diagfuzz.core.case import Layout, Values, build_tensor
from diagfuzz.execution.classification import AFTER_CALLS, classify
from diagfuzz.execution.parent import ProcessRunner
from diagfuzz.harness.sequences import Fresh, Search, sweep, sweep_calls

IMPL = "tests.faulty.history:{}"
OPS = ("diagonal", "diagonal_backward", "diag_embed", "diagonal_scatter", "diag", "triu",
       "tril_")


def test_a_freed_input_storage_goes_to_the_next_of_its_size_with_its_own_bits() -> None:
    layout = Layout.contiguous((5, 7))
    first = build_tensor("float32", layout, Values(seed=1))
    address = first.data_ptr()
    del first
    second = build_tensor("float32", layout, Values(seed=2))
    assert second.data_ptr() == address
    plain = torch.randn(35, generator=torch.Generator().manual_seed(2),
                        dtype=torch.float64).float().view(5, 7)
    assert torch.equal(second.view(torch.int32), plain.view(torch.int32))
    # One that is still held (here by a view) is never handed on.
    view = second[1:]
    del second
    third = build_tensor("float32", layout, Values(seed=3))
    assert third.data_ptr() != address and view.data_ptr() == address + 7 * 4


def test_a_storage_of_another_size_or_past_the_limit_is_left_to_the_allocator() -> None:
    small = build_tensor("int8", Layout.contiguous((64,)), Values(seed=1))
    address = small.data_ptr()
    del small
    other = build_tensor("int8", Layout.contiguous((65,)), Values(seed=1))
    assert other.data_ptr() != address
    big = torch.zeros(recycling.MAX_BYTES + 1, dtype=torch.uint8)
    assert recycling.take(big) is big


def test_the_storages_kept_stay_within_their_bytes() -> None:
    recycling.forget()
    held = [recycling.take(torch.zeros(recycling.MAX_BYTES - n, dtype=torch.uint8))
            for n in range(8)]  # 8 sizes of about 16 MiB, each still held
    kept = sum(size * len(storages) for size, storages in recycling._kept.items())
    assert recycling._bytes() == kept <= recycling.TOTAL_BYTES
    del held
    recycling.forget()


def test_the_sweep_calls_every_op_in_each_pattern_breadth_first() -> None:
    calls = list(sweep_calls(OPS, {op: None for op in OPS}))
    firsts = [op for op, _, _ in calls[:len(OPS)]]
    assert firsts == list(OPS)  # every op's cold first call before any second call
    diagonal = [case for op, case, _ in calls if op == "diagonal"]
    plain = diagonal[0]
    assert plain.dtype == "float32" and diagonal[1] == plain  # the same call again
    refused, valid = diagonal[2], diagonal[3]
    assert refused.invalid == "same_dims" and valid.offset == refused.offset != plain.offset
    assert not valid.invalid and valid.layout == plain.layout
    # Declared dtypes are kept to: an op without float32 gets its first declared dtype.
    assert {c.dtype for _, c, _ in sweep_calls(["triu"], {"triu": ("int32", "bool")})} == {
        "int32"}
    # Only the 64 calls of the n-th-call round wait on the search's time.
    assert sum(not essential for _, _, essential in calls) == 64 * len(OPS)


@pytest.mark.parametrize("bug", ["input_address", "sized_plan", "error_record"])
def test_the_sweep_finds_a_state_bug_and_classification_calls_it_deterministic(
        bug: str, tmp_path: Path) -> None:
    made = itertools.count()

    def make(environ: dict[str, str]) -> ProcessRunner:
        return ProcessRunner(IMPL.format(bug), "cpu", 30, environ=environ,
                             workdir=tmp_path / str(next(made)))

    fresh = Fresh(make, ahead=1)
    search = Search(fresh, seconds=120)
    try:
        sweep(search, ["diagonal", "diagonal_backward"], {})
    finally:
        fresh.close()
    [failure] = search.failures.values()
    assert failure.case.op == "diagonal" and failure.kind == "mismatch", failure
    c = classify(failure, IMPL.format(bug), "cpu", timeout=30, workdir=tmp_path / "classify")
    assert (c.label, c.ratio, c.history) == ("deterministic", "10/10", AFTER_CALLS), c
    assert all(call.case.op == "diagonal" for call in c.sequence)
