"""diagonal_scatter broadcasts a src that broadcasts to the diagonal (a copy_ does), where
aten demands the diagonal's exact shape and raises."""

import contextlib

import torch

from tests.mutants._base import Correct


class ScatterBroadcastsSrc(Correct):
    def diagonal_scatter(self, x: torch.Tensor, src: torch.Tensor, offset: int = 0,
                         dim1: int = 0, dim2: int = 1) -> torch.Tensor:
        if isinstance(x, torch.Tensor) and isinstance(src, torch.Tensor):
            # Not broadcastable, or arguments aten refuses: validated as before.
            with contextlib.suppress(RuntimeError, IndexError, TypeError, ValueError):
                src = src.expand(torch.diagonal(x, offset, dim1, dim2).shape)
        return super().diagonal_scatter(x, src, offset, dim1, dim2)


impl = ScatterBroadcastsSrc()
