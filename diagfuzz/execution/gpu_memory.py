"""An executor's share of one GPU: cached blocks given back past a share, and a Case that ran
out of memory judged once more after giving them back.

Many executors share one GPU (the gate's suite workers, its stages' pool, classification's
spares), and PyTorch's caching allocator keeps every block a process frees. An autotuner's
benchmark buffers (Triton's ``do_bench`` allocates 256 MiB to flush the L2 cache) and a
large Case's tensors stay reserved, so after a few minutes other executors' caches fill the
GPU and a Case fails with ``OutOfMemoryError`` where it runs alone (H100, FlagGems' triu
autotuning: 9 executors held 0.6-17 GiB each, 106 MiB free): a finding nobody could
observe. So each executor gives its cached blocks back once it holds more than
``RESERVED_SHARE`` of the GPU, and a Case whose impl or oracle ran out of memory is judged
once more after that.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from diagfuzz.core.verdict import Verdict

#: Of the GPU's memory, what one executor may keep reserved between Cases.
RESERVED_SHARE = 1 / 32
#: The exception type a CUDA allocation failure raises (``torch.OutOfMemoryError``).
OOM_TYPE = "OutOfMemoryError"


def ran_out_of_memory(verdict: Verdict) -> bool:
    """Whether the impl's failure was an allocation the GPU could not make."""
    actual = verdict.details.get("actual")
    return (not verdict.ok and isinstance(actual, dict)
            and actual.get("type") == OOM_TYPE)


class MemoryShare:
    """One executor's share of its GPU (nothing to do on another device)."""

    def __init__(self, device: str) -> None:
        self._torch: Any = None
        self.limit = 0
        if str(device).startswith("cuda"):
            import torch

            if torch.cuda.is_available():
                self._torch = torch
                total = torch.cuda.get_device_properties(torch.device(device)).total_memory
                self.limit = int(total * RESERVED_SHARE)
        #: Times the cached blocks were given back, and Cases judged again after an OOM.
        self.released = 0
        self.rejudged = 0

    def give_back(self) -> None:
        """Return every cached block to the GPU, for the other executors."""
        if self._torch is not None:
            self._torch.cuda.empty_cache()
            self.released += 1

    def after_case(self) -> None:
        """Give the cached blocks back if this executor holds more than its share."""
        if self._torch is not None and self._torch.cuda.memory_reserved() > self.limit:
            self.give_back()

    def judge(self, judge: Callable[[], Verdict]) -> Verdict:
        """``judge()``; where it ran out of GPU memory (a verdict that says so, or the
        oracle's own allocation raised), once more after giving the cached blocks back."""
        if self._torch is None:
            return judge()
        try:
            verdict = judge()
        except self._torch.OutOfMemoryError:
            self.give_back()
            self.rejudged += 1
            return judge()
        if ran_out_of_memory(verdict):
            self.give_back()
            self.rejudged += 1
            return judge()
        return verdict


__all__ = ["OOM_TYPE", "RESERVED_SHARE", "MemoryShare", "ran_out_of_memory"]
