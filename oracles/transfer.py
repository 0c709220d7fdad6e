"""Moving a Case's bytes between host and device: one copy each way, raw bytes only.

Why: on a GPU every small op costs ~5-10 us of launch and every host read of a device value
(``torch.equal``, ``.item()``, ``bool(t)``) a synchronisation; the oracle's judgement is
dozens of such ops on tiny tensors. So the oracle moves storages, not values: the input's
storage goes to the device in one copy the host does not wait for (``to_device``), and
every storage the judgement needs comes back in one copy (``to_host``), the Case's one
synchronisation, after which all comparisons are host work. Bytes
are moved, never values, so nothing (NaN payloads, signed zeros, bool bytes) can change on
the way. On the CPU both are no-ops: the same code runs, on the same memory.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from diagfuzz.core import progress
from diagfuzz.core.case import upload

#: Every chunk of the copy back starts at a multiple of this (the widest element), so any
#: dtype can be viewed in place at its offset.
ALIGN = 16


def storage_bytes(t: torch.Tensor) -> torch.Tensor:
    """All of ``t``'s storage as a flat uint8 tensor on ``t``'s device (a view, no copy)."""
    return torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage())


def to_device(t: torch.Tensor, device: torch.device | str) -> torch.Tensor:
    """``t`` (whole storage, same view geometry) on ``device``: one copy; ``t`` if there."""
    device = torch.device(device)
    if t.device == device or (device.index is None and t.device.type == device.type):
        return t
    flat = torch.empty(0, dtype=t.dtype).set_(t.untyped_storage())
    return upload(flat, device).as_strided(t.shape, t.stride(), t.storage_offset())


def to_host(tensors: list[torch.Tensor],
            copy: Callable[[torch.Tensor], torch.Tensor] | None = None,
            keep_host: bool = True) -> list[torch.Tensor]:
    """Each tensor's view (same dtype, shape, strides, offset) over a host copy of its storage.

    One copy and one synchronisation per device (``gather``): normally one, as a result on
    another device is a metadata failure for the judgement to report, not an error here; an
    impl may also allocate host temporaries under the sentinel. CPU tensors come back as
    they are (same memory: callers that compare before and after keep their own copy),
    unless ``keep_host`` is False (tests copy them too, with ``copy``).
    """
    copy = copy or download
    out = list(tensors)
    groups: dict[torch.device, list[int]] = {}
    for i, t in enumerate(tensors):
        if not (keep_host and t.device.type == "cpu"):
            groups.setdefault(t.device, []).append(i)
    for indices in groups.values():
        copies = gather([tensors[i] for i in indices], copy)
        for i, host in zip(indices, copies, strict=True):
            out[i] = host
    if groups:
        progress.tick()  # the device's work, a stuck kernel's included, ends here
    return out


def download(t: torch.Tensor) -> torch.Tensor:
    """A host copy of ``t``, waited for without spinning a core (CUDA), else ``.cpu()``.

    Why: a plain ``.cpu()`` waits in a busy loop (CUDA's default while a process has fewer
    contexts than the host has cores). With four workers and eight executors on one H200 host
    the 16 cores were at times all busy, mostly in executors, while the workers, whose drawing
    limits the suite, got about 0.7 of a core each (benchmarks/probes/cpu_sampler.py,
    BENCHMARKS.md). A blocking-sync event puts the waiting thread to sleep instead; the copy
    lands in pinned memory. Measured side by side on one H200 host (tools/gpu_ab, two rounds),
    alone it did not move the pace beyond the runs' spread; with executors on one intra-op
    thread (diagfuzz.execution.parent) the executors used ~6 cores instead of ~8 while fuzzing
    and the pace rose (BENCHMARKS.md, "Fuzz throughput and gate time").
    """
    if t.device.type != "cuda":
        return t.cpu()
    host = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
    with torch.cuda.device(t.device):  # the copy and the event on t's GPU's stream
        host.copy_(t, non_blocking=True)
        done = torch.cuda.Event(blocking=True)
        done.record(torch.cuda.current_stream(t.device))
        done.synchronize()
    return host


def gather(tensors: list[torch.Tensor],
           copy: Callable[[torch.Tensor], torch.Tensor]) -> list[torch.Tensor]:
    """``to_host``'s work with the copy given: join, ``copy`` once, view each tensor there.

    The distinct storages (each whole, padded to ``ALIGN`` bytes) are joined on their device
    by a single ``cat``, ``copy`` makes the one copy of the joined bytes, and every tensor
    is viewed over its storage's part of it. (Tests run it on the CPU with a clone.)
    """
    device = tensors[0].device
    keys = [_storage_key(t) for t in tensors]
    chunks: dict[tuple[int, int], torch.Tensor] = {}
    for t, key in zip(tensors, keys, strict=True):
        if t.device != device:
            raise ValueError(f"to_host: tensors on {device} and {t.device}")
        if key not in chunks:  # a storage several tensors share is copied once
            chunks[key] = storage_bytes(t)
    parts, starts, start = [], {}, 0
    pad = torch.empty(ALIGN, dtype=torch.uint8, device=device)
    for key, chunk in chunks.items():
        parts.append(chunk)
        starts[key] = start
        padded = -(-chunk.numel() // ALIGN) * ALIGN
        if padded > chunk.numel():
            parts.append(pad[:padded - chunk.numel()])
        start += padded
    host = copy(parts[0] if len(parts) == 1 else torch.cat(parts))
    return [host_view(host[starts[key]:starts[key] + chunks[key].numel()], t)
            for t, key in zip(tensors, keys, strict=True)]


def _storage_key(t: torch.Tensor) -> tuple[int, int]:
    """Which storage ``t`` lives in (an empty storage may share a pointer with another)."""
    storage = t.untyped_storage()
    return storage.data_ptr(), storage.nbytes()


def host_view(host: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """``t``'s view (dtype, shape, strides, offset) over ``host``, its storage's host bytes."""
    base, size = host.storage_offset(), t.element_size()
    if base % size:
        raise ValueError(f"host_view: storage copy at byte {base} is not aligned for {t.dtype}")
    return torch.empty(0, dtype=t.dtype).set_(host.untyped_storage(),
                                              base // size + t.storage_offset(),
                                              t.shape, t.stride())
