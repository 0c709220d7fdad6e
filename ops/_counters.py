"""Launch counting (``diagfuzz.core.counters``) and the ``out=`` convention every op shares.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence

import torch

from diagfuzz.core.counters import LAUNCHES, count, launches

__all__ = ["LAUNCHES", "count", "launches", "write_out"]


def write_out(
    out: torch.Tensor,
    sizes: Sequence[int],
    dtype: torch.dtype,
    device: torch.device,
    fill: Callable[[torch.Tensor], None],
    compute: Callable[[], torch.Tensor],
) -> torch.Tensor:
    """aten's ``out=`` rules: same dtype, resize (keeping strides that already fit), write.

    A contiguous ``out`` is written by the kernel directly (``fill``); any other layout gets
    the kernel's result (``compute``) copied in, which is what aten does too.
    """
    if out.dtype != dtype:
        raise RuntimeError(f"Expected out tensor to have dtype {dtype}, but got {out.dtype} "
                           "instead")
    _resize_output(out, tuple(sizes), device)
    if out.is_contiguous() and not out.is_conj() and not out.is_neg():
        fill(out)
    else:
        out.copy_(compute())
    return out


def _resize_output(out: torch.Tensor, sizes: tuple[int, ...], device: torch.device) -> None:
    """aten's ``resize_output``: device must match; a wrong shape is resized (with aten's
    warning when ``out`` held elements); a right shape keeps its strides."""
    if out.device != torch.device(device):
        raise RuntimeError(f"Expected out tensor to have device {device}, but got "
                           f"{out.device} instead")
    if tuple(out.shape) == sizes:
        return
    if out.numel() != 0:
        warnings.warn(
            f"An output with one or more elements was resized since it had shape "
            f"{list(out.shape)}, which does not match the required output shape "
            f"{list(sizes)}.", UserWarning, stacklevel=3)
    out.resize_(sizes)
