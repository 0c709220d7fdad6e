"""The seed review's anti-pattern: diag_embed's forward and backward as one
``autograd.Function`` registered at the AutogradCPU key (values are right)."""

from __future__ import annotations

from typing import Any

import torch

from tests.registered import _kernels


class _DiagEmbed(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, offset: int, dim1: int, dim2: int) -> torch.Tensor:
        ctx.args = (offset, dim1, dim2)
        with torch._C._AutoDispatchBelowAutograd():
            return _kernels.diag_embed(x, offset, dim1, dim2)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> Any:
        offset, dim1, dim2 = ctx.args
        return torch.diagonal(grad, offset, dim1, dim2).clone(), None, None, None


def _autograd_diag_embed(x: torch.Tensor, offset: int = 0, dim1: int = -2,
                         dim2: int = -1) -> torch.Tensor:
    return _DiagEmbed.apply(x, offset, dim1, dim2)


LIB = torch.library.Library("aten", "IMPL")
LIB.impl("diag_embed", _kernels.diag_embed, "CPU")
LIB.impl("diag_embed", _autograd_diag_embed, "AutogradCPU")
