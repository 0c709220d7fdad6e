"""Writes one element past the end of its result (an unmasked tail), where memory allows.

Without guard regions the extra write lands in someone else's memory (or is refused by
torch's bounds check); inside the oracle's guarded allocations it changes guard bytes.
"""

import torch

from tests.mutants._base import Correct


class OverrunsBuffer(Correct):
    def finish(self, result: torch.Tensor) -> torch.Tensor:
        n = result.numel()
        if n:
            try:
                tail = result.as_strided((n + 1,), (1,), result.storage_offset())
            except RuntimeError:
                return result  # storage ends exactly here: nothing to overrun into
            tail[n:].zero_()
        return result


impl = OverrunsBuffer()
