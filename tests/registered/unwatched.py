"""A registration diagfuzz cannot defer: a wrong diag_embed CPU kernel registered through
the dispatcher's own binding (as a C++ extension's ``TORCH_LIBRARY_IMPL`` would), not
through ``torch.library.Library.impl``."""

from __future__ import annotations

import torch

from tests.registered import _kernels


def diag_embed(x: torch.Tensor, offset: int = 0, dim1: int = -2,
               dim2: int = -1) -> torch.Tensor:
    return _kernels.diag_embed(x, offset, dim1, dim2).flip(-1).contiguous()


class _Handle:
    """What the test's fixture destroys (``m``, ``_destroy``), as a ``Library``."""

    def __init__(self) -> None:
        self.m = torch._C._dispatch_library("IMPL", "aten", "CPU", __file__, 1)
        self.m.impl("diag_embed", "CPU", diag_embed, False)

    def _destroy(self) -> None:
        self.m.reset()
        self.m = None


LIB = _Handle()
