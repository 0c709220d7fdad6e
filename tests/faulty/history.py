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
- ``input_address``: a result cache keyed on the input's own ``data_ptr()`` (and its
  layout): a new input at a freed one's address, with other values, gets the freed one's
  result. Whether the address comes back is the allocator's doing, not this library's.
- ``sized_plan``: an index map cached per (sizes, offset, dims, dtype) but not strides or
  storage offset: the same sizes in another layout gather the first layout's elements.
- ``offset_blind``: a result cache keyed on the input's layout and dims but not the
  offset: a call at another offset of an input laid out the same way gets the earlier
  call's diagonal.
- ``left_running``: work a call leaves running. A ``diagonal_backward`` call with offset 2
  returns aten's result but leaves a job that the next call of any op waits on forever (a
  kernel that never ends, found at the next synchronisation): a hang that needs the call
  just before it.
- ``error_record``: the offset a call is for recorded before the dims are checked, the
  diagonal's start derived after: a refused call leaves the record ahead of the start,
  and the next valid call at that offset reads the previous offset's diagonal.
"""

from __future__ import annotations

import time
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


class InputAddress(Faulty):
    """Results cached by where the input lives and how it is laid out, not by its values."""

    cache: ClassVar[dict[tuple[Any, ...], torch.Tensor]] = {}

    def fault(self, result, offset):
        return result

    def diagonal(self, x, offset=0, dim1=0, dim2=1):
        key = (x.data_ptr(), tuple(x.shape), x.stride(), x.dtype, offset, dim1, dim2)
        if key not in self.cache:
            self.cache[key] = aten.diagonal(x, offset, dim1, dim2).clone()
        return self.cache[key].clone()


class SizedPlan(Faulty):
    """A gather plan (the diagonal view's strides and storage offset) per sizes."""

    plans: ClassVar[dict[tuple[Any, ...], tuple[Any, ...]]] = {}

    def fault(self, result, offset):
        return result

    def diagonal(self, x, offset=0, dim1=0, dim2=1):
        key = (tuple(x.shape), x.dtype, offset, dim1, dim2)
        view = torch.diagonal(x, offset, dim1, dim2)
        plan = self.plans.setdefault(key, (view.shape, view.stride(), view.storage_offset()))
        if plan[2] + sum((n - 1) * st for n, st in zip(plan[0], plan[1], strict=True)) \
                >= x.untyped_storage().nbytes() // x.element_size():
            plan = self.plans[key] = (view.shape, view.stride(), view.storage_offset())
        return torch.as_strided(x, *plan).clone(memory_format=torch.contiguous_format)


class OffsetBlind(Faulty):
    """Results cached per layout and dims, the offset left out of the key."""

    cache: ClassVar[dict[tuple[Any, ...], torch.Tensor]] = {}

    def fault(self, result, offset):
        return result

    def diagonal(self, x, offset=0, dim1=0, dim2=1):
        key = (tuple(x.shape), x.stride(), x.storage_offset(), x.dtype, dim1, dim2)
        if key not in self.cache:
            self.cache[key] = aten.diagonal(x, offset, dim1, dim2).clone()
        return self.cache[key].clone()


class LeftRunning(_Diagonal):
    pending = False

    def _wait(self) -> None:
        while LeftRunning.pending:
            time.sleep(0.05)

    def diagonal_backward(self, grad_output, input_sizes, offset, dim1, dim2):
        self._wait()
        LeftRunning.pending = offset == 2
        return aten.diagonal_backward(grad_output, input_sizes, offset, dim1, dim2)

    def wrong(self, x, args):
        self._wait()
        return False


class ErrorRecord(Faulty):
    """The diagonal's start, derived per offset; the record of which offset it is for is
    written before the dims are checked."""

    record: ClassVar[dict[str, int]] = {"offset": 0, "start": 0}

    def fault(self, result, offset):
        return result

    def diagonal(self, x, offset=0, dim1=0, dim2=1):
        if offset != self.record["offset"]:
            self.record["offset"] = offset
            torch.diagonal(x, offset, dim1, dim2)  # aten's checks: may raise here
            self.record["start"] = offset
        view = torch.diagonal(x, self.record["start"], dim1, dim2)
        want = torch.diagonal(x, offset, dim1, dim2).shape
        out = torch.zeros(want, dtype=x.dtype, device=x.device)
        n = min(view.shape[-1], want[-1])
        out[..., :n] = view[..., :n]
        return out


polluted = Polluted()
second_call = SecondCall()
cold_first = ColdFirst()
address_reuse = AddressReuse()
nth_call = NthCall()
input_address = InputAddress()
sized_plan = SizedPlan()
offset_blind = OffsetBlind()
left_running = LeftRunning()
error_record = ErrorRecord()
