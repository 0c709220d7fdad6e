"""A correct library: diag_embed, diagonal_copy and diagonal_backward registered at the CPU
key, forward and backward separately (as diagfuzz's own kernels are)."""

from __future__ import annotations

import torch

from tests.registered import _kernels

LIB = torch.library.Library("aten", "IMPL")
LIB.impl("diag_embed", _kernels.diag_embed, "CPU")
LIB.impl("diagonal_copy", _kernels.diagonal_copy, "CPU")
LIB.impl("diagonal_backward", _kernels.diagonal_backward, "CPU")
