"""triu and tril assume the batch dims are laid out as a contiguous tensor's, one step of
``stride(-3)`` per matrix: batches of a permuted or sliced input of rank 4 or more are
read from the wrong places (where they lie outside the storage, the read fails)."""

import math

import torch

from tests.mutants._base import Correct


class TriangleBatchStrides(Correct):
    def read_matrices(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() <= 3:
            return x
        batch = x.shape[:-2]
        strides = [x.stride(-3) * math.prod(batch[d + 1:]) for d in range(len(batch))]
        return x.as_strided(x.shape, (*strides, x.stride(-2), x.stride(-1)),
                            x.storage_offset())


impl = TriangleBatchStrides()
