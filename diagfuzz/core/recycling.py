"""Input storages handed on, as a caching allocator hands on freed blocks.

A library that keys a cache on ``data_ptr()`` is wrong once a freed tensor's address goes
to a new tensor of the same size: the GPU's caching allocator does that nearly always,
glibc's malloc only in some processes (its arenas, thread caches and ``posix_memalign``
splits vary with what ran before), so on the CPU such a bug came and went between fresh
processes replaying one sequence. The oracle builds every input storage on the host
through ``take``: a storage whose every tensor is gone is handed to the next storage of
its byte size, in one fixed order, so a replayed sequence meets the same addresses in any
process. Storages above ``MAX_BYTES`` are left to the allocator.
"""

from __future__ import annotations

from collections import OrderedDict

import torch

#: Largest storage handed on: fuzz Cases are far below it, the huge tier far above.
MAX_BYTES = 1 << 24
#: Byte sizes kept at most (least recently used dropped), storages per size, and bytes
#: kept in all (past it, the least recently used sizes are dropped).
SIZES = 64
PER_SIZE = 4
TOTAL_BYTES = 1 << 26

_count = getattr(torch._C, "_storage_Use_Count", None)
#: nbytes -> storages built earlier (their Python objects hold one reference each)
_kept: OrderedDict[int, list[torch.UntypedStorage]] = OrderedDict()
#: Bytes of every kept storage, kept up to date as storages come and go (not summed over
#: ``_kept`` on every ``take``).
_total = 0


def _free(storage: torch.UntypedStorage) -> bool:
    """Whether nothing but this module holds ``storage`` (no tensor, no view, no alias)."""
    return _count is not None and _count(storage._cdata) == 1


def take(fresh: torch.Tensor) -> torch.Tensor:
    """``fresh`` (a contiguous 1-D CPU tensor that no one else holds), or its bytes copied
    into a kept storage of the same size whose tensors are all gone: the same bits, at
    the address a caching allocator would give."""
    nbytes = fresh.untyped_storage().nbytes()
    if (_count is None or fresh.device.type != "cpu" or nbytes == 0
            or nbytes > MAX_BYTES or fresh.storage_offset() != 0):
        return fresh
    kept = _kept.setdefault(nbytes, [])
    _kept.move_to_end(nbytes)
    for storage in kept:
        if _free(storage):
            target = torch.empty(0, dtype=fresh.dtype).set_(storage, 0, fresh.shape,
                                                            fresh.stride())
            return target.copy_(fresh)
    global _total
    if len(kept) < PER_SIZE:
        kept.append(fresh.untyped_storage())
        _total += nbytes
    while len(_kept) > SIZES or (len(_kept) > 1 and _total > TOTAL_BYTES):
        size, dropped = _kept.popitem(last=False)
        _total -= size * len(dropped)
    return fresh


def _bytes() -> int:
    """Bytes of every kept storage."""
    return _total


def forget() -> None:
    """Drop every kept storage (tests that count the process's live storages)."""
    global _total
    _kept.clear()
    _total = 0


__all__ = ["MAX_BYTES", "forget", "take"]
