"""diagonal_scatter clones its input's storage from the view's first element and views the
clone at storage offset 0: the right values and strides, the wrong storage offset."""

import torch

from tests.mutants._base import Correct


class ScatterDropsStorageOffset(Correct):
    def clone_input(self, x: torch.Tensor) -> torch.Tensor:
        if x.numel() and any(n > 1 and s == 0 for n, s in zip(x.shape, x.stride(),
                                                               strict=True)):
            return super().clone_input(x)  # an expanded input: a dense clone, as aten's
        numel = x.untyped_storage().nbytes() // x.element_size() - x.storage_offset()
        storage = self.allocate((numel,), x.dtype, x.device)
        self.write(storage, x.as_strided((numel,), (1,), x.storage_offset()))
        return storage.as_strided(x.shape, x.stride(), 0)


impl = ScatterDropsStorageOffset()
