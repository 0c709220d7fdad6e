"""Where the kernels run (decided in ``diagfuzz.core.runtime``, before Triton is imported),
and the check that refuses a tensor they cannot read."""

from __future__ import annotations

import torch

from diagfuzz.core.runtime import COMPILE_ONLY, COMPILE_ONLY_ENV, DEVICE, DISPATCH_KEY, INTERPRET

__all__ = ["COMPILE_ONLY", "COMPILE_ONLY_ENV", "DEVICE", "DISPATCH_KEY", "INTERPRET",
           "check_device"]


def check_device(tensor: torch.Tensor, argument: str) -> None:
    """Refuse a tensor the kernels cannot read, naming the argument."""
    if tensor.device.type != DEVICE:
        raise RuntimeError(
            f"diagfuzz kernels run on {DEVICE!r} tensors here "
            f"({'Triton interpreter' if INTERPRET else 'CUDA'}), but {argument} is on "
            f"{tensor.device}"
        )
