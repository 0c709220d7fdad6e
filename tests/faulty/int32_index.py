"""diagonal and diagonal_backward as real Triton kernels whose element index is narrow.

The planted bug is the classic one of Triton kernels: ``i = pid * BLOCK + tl.arange(0,
BLOCK)`` in int32. Below 2**31 elements it is right; past them it wraps, which only the
huge tier (``diagfuzz gate --huge``) reaches. Both ops use one strided-copy kernel (rank 4
at most) and diagonal_backward zero-fills its result with the same index.

On a GPU the index is int32, the real bug: past 2**31 it goes negative, so loads and stores
land before the buffer (a wrong value or an illegal address, a crash). Where the huge
threshold is lowered (``DIAGFUZZ_HUGE_THRESHOLD``, CPU tests under Triton's interpreter)
the index is uint16 instead: it wraps past 2**16 elements back into the buffer (an
interpreted kernel writing before a host buffer would corrupt the test process), so every
element from 2**16 on is never written. There each allocation is filled with the byte 0xA5
first: memory left as allocated sometimes held the right values (a re-run got the freed
buffer of the run before), which made the finding flaky.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import torch
import triton
import triton.language as tl

from diagfuzz.core import huge

BLOCK = 1024
RANK = 4


@triton.jit
def _copy_kernel(out_ptr, in_ptr, n,
                 size0, size1, size2, size3, in0, in1, in2, in3, out0, out1, out2, out3,
                 BLOCK: tl.constexpr, INDEX: tl.constexpr):
    pid = tl.program_id(0)
    # The bug: the index made in a narrow type; everything after it is 64-bit.
    i = (pid.to(INDEX) * BLOCK + tl.arange(0, BLOCK).to(INDEX)).to(tl.int64)
    mask = i < n
    k3 = i % size3
    rest = i // size3
    k2 = rest % size2
    rest = rest // size2
    k1 = rest % size1
    k0 = rest // size1
    src = k0 * in0 + k1 * in1 + k2 * in2 + k3 * in3
    dst = k0 * out0 + k1 * out1 + k2 * out2 + k3 * out3
    tl.store(out_ptr + dst, tl.load(in_ptr + src, mask=mask), mask=mask)


@triton.jit
def _zero_kernel(out_ptr, n, BLOCK: tl.constexpr, INDEX: tl.constexpr):
    pid = tl.program_id(0)
    # The bug: the index made in a narrow type; everything after it is 64-bit.
    i = (pid.to(INDEX) * BLOCK + tl.arange(0, BLOCK).to(INDEX)).to(tl.int64)
    mask = i < n
    tl.store(out_ptr + i, tl.zeros((BLOCK,), dtype=out_ptr.dtype.element_ty), mask=mask)


def _index_type() -> tl.dtype:
    """int32 (the real bug) unless the huge threshold is lowered: then uint16."""
    lowered = os.environ.get(huge.THRESHOLD_ENV) and huge.lowered()
    return tl.uint16 if lowered else tl.int32


def _allocate(sizes: Sequence[int], like: torch.Tensor) -> torch.Tensor:
    """``torch.empty``; filled with 0xA5 bytes where the threshold is lowered (see above)."""
    out = torch.empty(tuple(sizes), dtype=like.dtype, device=like.device)
    if _index_type() is tl.uint16:
        out.untyped_storage().fill_(0xA5)
    return out


def _words(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.int8) if t.dtype is torch.bool else t


def _padded(t: torch.Tensor) -> tuple[list[int], list[int]]:
    pad = RANK - t.dim()
    return [1] * pad + list(t.shape), [0] * pad + list(t.stride())


def _copy(dest: torch.Tensor, source: torch.Tensor) -> None:
    """``dest.copy_(source)`` (same shape, rank 4 at most) by the narrow-index kernel."""
    if dest.dim() > RANK or dest.numel() == 0:
        dest.copy_(source)
        return
    sizes, ins = _padded(source)
    _, outs = _padded(dest)
    n = dest.numel()
    _copy_kernel[(triton.cdiv(n, BLOCK),)](_words(dest), _words(source), n, *sizes, *ins,
                                            *outs, BLOCK=BLOCK, INDEX=_index_type())


class Int32Index:
    """diagonal and diagonal_backward through the narrow-index kernels."""

    uses_triton_registration = False

    def diagonal(self, x: torch.Tensor, offset: int = 0, dim1: int = 0,
                 dim2: int = 1) -> torch.Tensor:
        view = torch.diagonal(x, offset, dim1, dim2)  # aten's checks and messages
        out = _allocate(view.shape, x)
        _copy(out, view)
        return out

    def diagonal_backward(self, grad_output: torch.Tensor, input_sizes: Sequence[int],
                          offset: int, dim1: int, dim2: int) -> torch.Tensor:
        result = _allocate(input_sizes, grad_output)
        view = torch.diagonal(result, offset, dim1, dim2)
        source = grad_output.expand(view.shape)
        if result.numel():
            n = result.numel()
            _zero_kernel[(triton.cdiv(n, BLOCK),)](_words(result), n, BLOCK=BLOCK,
                                                   INDEX=_index_type())
        _copy(view, source)
        return result


impl = Int32Index()
