"""Launch counting (``diagfuzz.core.counters``) and the ``out=`` conventions the ops share.

The counters are how a test proves that a result came from a Triton kernel and not from a
silent fallback to aten (the dispatch proof).
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


def write_generated_out(
    out: torch.Tensor,
    sizes: Sequence[int],
    dtype: torch.dtype,
    device: torch.device,
    reads: Sequence[torch.Tensor],
    fill: Callable[[torch.Tensor], None] | None,
    compute: Callable[[], torch.Tensor],
) -> torch.Tensor:
    """aten's generated ``out=`` wrapper of a functional op (``diag_embed.out``,
    ``diagonal_scatter.out``: CompositeViewCopyKernels' ``resize_out_helper`` and
    ``copy_arg``): the functional result, then ``resize_output`` of ``out`` (aten's warning
    when it held elements), then the dtype and device checks (RuntimeError, after the
    resize), then ``out.copy_``.

    ``fill`` (when given) writes a contiguous ``out`` with one launch instead, where that
    gives the same elements: ``out`` shares no storage with a tensor the op ``reads`` (aten
    computes before it writes, so an aliased ``out`` must not be written while read).
    """
    direct = fill is not None and not any(_shares_storage(out, t) for t in reads)
    result = None if direct else compute()
    sizes = tuple(sizes)
    if tuple(out.shape) != sizes:
        if out.numel() != 0:
            warnings.warn(
                f"An output with one or more elements was resized since it had shape "
                f"{list(out.shape)}, which does not match the required output shape "
                f"{list(sizes)}.", UserWarning, stacklevel=3)
        out.resize_(sizes)
    if out.dtype != dtype:
        raise RuntimeError(f"Expected out tensor to have dtype {dtype}, but got {out.dtype} "
                           "instead")
    if out.device != torch.device(device):
        raise RuntimeError(f"Expected out tensor to have device {device}, but got "
                           f"{out.device} instead")
    if (fill is not None and result is None and out.is_contiguous() and not out.is_conj()
            and not out.is_neg()):
        fill(out)
    else:
        out.copy_(compute() if result is None else result)
    return out


def _shares_storage(a: torch.Tensor, b: object) -> bool:
    """Whether ``b`` is a tensor on ``a``'s storage (two empty storages count as shared)."""
    if not isinstance(b, torch.Tensor) or a.device != b.device:
        return False
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
