"""A planted override of every aten op the oracle's references, copies and comparisons
reach on the CPU, each returning wrong bits or raising: with it loaded, a reference
computed inside ``aten_only`` must not change a bit."""

from __future__ import annotations

from typing import Any

import torch

LIB = torch.library.Library("aten", "IMPL")


def _raise(name: str) -> Any:
    def kernel(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"planted override of aten::{name} ran")

    return kernel


for name in ("diag_embed", "diagonal_copy", "diagonal_backward", "diagonal_scatter", "diag",
             "copy_", "clone", "fill_.Scalar", "zero_", "eq.Tensor", "ne.Tensor", "equal",
             "gather", "scatter.src", "index_select", "arange.start_out", "_to_copy",
             "view_as_real", "bitwise_xor.Tensor", "nonzero", "masked_select",
             "empty_strided", "cat", "add.Tensor", "mul.Tensor"):
    LIB.impl(name, _raise(name), "CPU")
