"""A new user's library with two bugs, registered at the CPU key on import: diag_embed with
a negative offset in float16 transposes its two new dims, and an offset past 2**62 raises
TypeError where aten raises RuntimeError. ``diag_embed`` and ``diagonal_backward`` are
also its public Python functions (what an adapter calls)."""

from __future__ import annotations

import torch

from tests.registered import _kernels


def diag_embed(x: torch.Tensor, offset: int = 0, dim1: int = -2,
               dim2: int = -1) -> torch.Tensor:
    if abs(offset) > 2**62:
        raise TypeError(f"offset {offset} is out of range")
    if offset < 0 and x.dtype == torch.float16:
        return _kernels.diag_embed(x, offset, dim2, dim1)  # the planted bug
    return _kernels.diag_embed(x, offset, dim1, dim2)


diagonal_backward = _kernels.diagonal_backward

LIB = torch.library.Library("aten", "IMPL")
LIB.impl("diag_embed", diag_embed, "CPU")
LIB.impl("diagonal_backward", diagonal_backward, "CPU")
