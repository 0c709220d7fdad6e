"""torch.compile parity: passes for diagfuzz's kernels (a Case of every op), fails on a
hand-made wrong compile."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import diagfuzz.ops as ops
from diagfuzz import oracles
from diagfuzz.core.case import Case, Layout, Values
from diagfuzz.impl import triton_aten

CASES = [
    Case("diagonal", (3, 4, 5), 1, 2, 0, "float32", Layout.contiguous((3, 4, 5)),
         Values(seed=1, mode="bits")),
    Case("diagonal_backward", (3, 4), -1, 0, 1, "float32", Layout((2,), (2,), 1, ("sliced",)),
         Values(seed=2, specials=((1, 0x80000000),))),
    Case("diag_embed", (2, 5, 5), -2, 2, 1, "float32", Layout.contiguous((2, 3)),
         Values(seed=3, mode="bits")),
    Case("diagonal_scatter", (4, 3), -1, 1, 0, "float32",
         Layout((4, 3), (6, 2), 1, ("sliced", "offset")), Values(seed=4),
         others=(("src", Layout((2,), (3,), 0, ("sliced",)),
                  Values(seed=5, specials=((0, 0x80000000),))),)),
    Case("diag", (5, 3), 1, 0, 1, "float32", Layout((5, 3), (1, 5), 0, ("permuted",)),
         Values(seed=6, mode="bits")),
    Case("diag_1d", (5, 5), -2, 0, 1, "float32", Layout.contiguous((3,)), Values(seed=7)),
]


@pytest.mark.compile
@pytest.mark.parametrize("case", CASES, ids=Case.describe)
def test_compiled_forward_and_backward_match_eager(case: Case) -> None:
    verdict = oracles.check_compile(case, triton_aten, ops.DEVICE)
    assert verdict.ok and not verdict.details.get("skipped"), f"{verdict}\n{verdict.details}"


def test_a_compile_that_changes_one_bit_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    def wrong_compile(fn: Any, **_: Any) -> Any:
        def compiled(x: torch.Tensor) -> torch.Tensor:
            y = fn(x)
            first = torch.arange(y.numel(), device=y.device).reshape(y.shape) == 0
            return y + torch.where(first, torch.ones_like(y), torch.zeros_like(y))
        return compiled

    monkeypatch.setattr(torch, "compile", wrong_compile)
    verdict = oracles.check_compile(CASES[1], triton_aten, ops.DEVICE)
    assert verdict.kind == "mismatch", str(verdict)
    assert verdict.check.startswith("compile:forward"), str(verdict)
    assert verdict.details["differing"] == 1


def test_non_differentiable_cases_are_reported_as_skipped() -> None:
    case = CASES[0].replace(dtype="int32")
    verdict = oracles.check_compile(case, triton_aten, ops.DEVICE)
    assert verdict.ok and verdict.details["skipped"] == "dtype"
