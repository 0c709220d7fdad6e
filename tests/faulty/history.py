"""Bugs that depend on what the process ran before: each deterministic, none fails alone.

The state kernel libraries keep between calls, each planted on aten's ``diagonal``:

- ``polluted``: a flag one op leaves for another. A ``diagonal_backward`` call with
  offset 2 sets it and nothing resets it; every later ``diagonal`` then flips a bit. The
  polluter is one earlier call of another op.
- ``second_call``: a result cache keyed on the call's arguments (shape, strides, offset,
  dims, dtype) whose hit path is wrong: a Case passes on its first call and fails on every
  later call of the same arguments (a non-idempotent outcome).
- ``cold_first``: lazy initialisation done after the first launch: the first ``diagonal``
  of a process is wrong, every later one right.
- ``address_reuse``: a result cache keyed on the address of the buffer an input is staged
  in, from a free list that hands a freed block of the same size to the next request (as
  PyTorch's CUDA caching allocator does): a later input of the same size with other values
  gets the earlier one's stale result.
- ``nth_call``: an autotuner that switches to a wrong config on the 12th ``diagonal`` call
  of a dtype in the process.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch

from diagfuzz.impl import aten
from tests.faulty._base import Faulty, flip_first_bit


class _Diagonal(Faulty):
    """aten's ops; ``diagonal`` through ``wrong(x, result, args) -> bool``."""

    def fault(self, result: torch.Tensor, offset: int) -> torch.Tensor:
        return result

    def wrong(self, x: torch.Tensor, args: tuple[Any, ...]) -> bool:
        raise NotImplementedError

    def diagonal(self, x, offset=0, dim1=0, dim2=1):
        result = aten.diagonal(x, offset, dim1, dim2)
        return flip_first_bit(result) if self.wrong(x, (offset, dim1, dim2)) else result


class Polluted(_Diagonal):
    leaked = False

    def diagonal_backward(self, grad_output, input_sizes, offset, dim1, dim2):
        if offset == 2:
            Polluted.leaked = True
        return aten.diagonal_backward(grad_output, input_sizes, offset, dim1, dim2)

    def wrong(self, x, args):
        return Polluted.leaked


def _key(x: torch.Tensor, args: tuple[Any, ...]) -> tuple[Any, ...]:
    return (tuple(x.shape), x.stride(), x.storage_offset(), x.dtype, *args)


class SecondCall(_Diagonal):
    seen: ClassVar[set[tuple[Any, ...]]] = set()

    def wrong(self, x, args):
        key = _key(x, args)
        hit = key in self.seen
        self.seen.add(key)
        return hit


class ColdFirst(_Diagonal):
    warm = False

    def wrong(self, x, args):
        cold, ColdFirst.warm = not ColdFirst.warm, True
        return cold


class AddressReuse(Faulty):
    """Stages each input in a buffer of a size-keyed free list, as PyTorch's CUDA caching
    allocator hands a freed block of the same size to the next request, and caches results
    keyed on the buffer's address."""

    free: ClassVar[dict[tuple[int, torch.dtype], list[torch.Tensor]]] = {}
    cache: ClassVar[dict[tuple[Any, ...], torch.Tensor]] = {}

    def fault(self, result, offset):
        return result

    def diagonal(self, x, offset=0, dim1=0, dim2=1):
        pool = self.free.setdefault((x.numel(), x.dtype), [])
        staged = pool.pop() if pool else torch.empty(x.numel(), dtype=x.dtype)
        view = staged.view(x.shape) if x.numel() else staged.reshape(x.shape)
        view.copy_(x)
        key = (staged.data_ptr(), tuple(x.shape), x.dtype, offset, dim1, dim2)
        try:
            if key not in self.cache:
                self.cache[key] = aten.diagonal(view, offset, dim1, dim2).clone()
            return self.cache[key].clone()
        finally:
            pool.append(staged)  # freed: the next input of this size gets its address


class NthCall(_Diagonal):
    calls: ClassVar[dict[torch.dtype, int]] = {}

    def wrong(self, x, args):
        self.calls[x.dtype] = self.calls.get(x.dtype, 0) + 1
        return self.calls[x.dtype] >= 12


polluted = Polluted()
second_call = SecondCall()
cold_first = ColdFirst()
address_reuse = AddressReuse()
nth_call = NthCall()
