"""A plain kernel registered at the AutogradCPU key for diag_embed (no autograd.Function):
it replaces aten's derivative formula, so the output gets no grad_fn."""

from __future__ import annotations

import torch

from tests.registered import _kernels

LIB = torch.library.Library("aten", "IMPL")
LIB.impl("diag_embed", _kernels.diag_embed, "CPU")
LIB.impl("diag_embed", _kernels.diag_embed, "AutogradCPU")
