"""Verdicts for one Case: bitwise comparison against references (PROVISIONAL placeholder).

``check(case, impl, device) -> Verdict`` is the entry point every runner calls. This first
version only compares with aten bitwise; the oracles issue replaces it with the full set.
"""

from __future__ import annotations

from typing import Any

import torch

import diagfuzz.ops as ops
from diagfuzz.case import Case, call_arguments
from diagfuzz.verdict import Verdict


def _call(impl: Any, case: Case, args: dict[str, Any]) -> torch.Tensor:
    if case.op == "diagonal":
        return impl.diagonal(args["input"], args["offset"], args["dim1"], args["dim2"])
    return impl.diagonal_backward(args["grad_output"], args["input_sizes"], args["offset"],
                                  args["dim1"], args["dim2"])


def check(case: Case, impl: Any, device: str = ops.DEVICE) -> Verdict:
    """Run ``case`` through ``impl`` and aten; pass only if bits, dtype, shape, strides match."""
    args = call_arguments(case, device)
    with ops.use_triton(False):
        expected = _call(_AtenOps(), case, args)
    actual = _call(impl, case, args)
    same = (actual.dtype == expected.dtype and actual.shape == expected.shape
            and actual.stride() == expected.stride()
            and torch.equal(_bits(actual), _bits(expected)))
    if same:
        return Verdict.passed(case)
    return Verdict("mismatch", "reference:aten", "result differs from aten", case)


class _AtenOps:
    def diagonal(self, x, offset, dim1, dim2):
        return torch.ops.aten.diagonal_copy(x, offset, dim1, dim2)

    def diagonal_backward(self, g, sizes, offset, dim1, dim2):
        return torch.ops.aten.diagonal_backward(g, sizes, offset, dim1, dim2)


def _bits(t: torch.Tensor) -> torch.Tensor:
    t = t.contiguous()
    if t.dtype.itemsize == 16:
        return torch.view_as_real(t).view(torch.int64)
    return t.view({1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.dtype.itemsize])
