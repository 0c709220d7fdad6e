"""Reads grad_output as if it were contiguous: right for dense grads, wrong for strided ones."""

import torch

from tests.mutants._base import Correct


class IgnoresGradStrides(Correct):
    def read_grad(self, grad: torch.Tensor) -> torch.Tensor:
        if grad.is_contiguous() or grad.numel() == 0:
            return grad
        # The storage from the view's start, walked linearly (wrapping inside the storage).
        storage = grad.as_strided((grad.untyped_storage().nbytes() // grad.element_size(),),
                                  (1,), 0)
        index = (grad.storage_offset() + torch.arange(grad.numel())) % storage.numel()
        return storage[index].reshape(grad.shape)


impl = IgnoresGradStrides()
