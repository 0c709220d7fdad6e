"""Prove a result fully written: every allocation the implementation makes holds a sentinel.

Why a dispatcher override and not "allocate, fill, free": on CPU ``torch.empty`` is malloc,
which may hand back fresh zero pages, reuse a freed block only when the size class matches,
or return memory from another arena; nothing guarantees that a freed, sentinel-filled block
is what the next ``empty`` gets, so a kernel leaving an element unwritten could pass by luck
(fresh pages are zero, which is exactly right off a backward's diagonal). Instead, while
``SentinelAllocations`` is active, ``aten::empty.memory_format`` and ``aten::empty_strided``
are overridden at the BackendSelect key (every factory call passes there, from Python and
from C++, on CPU and CUDA, before the backend allocator runs). The override allocates the
real buffer, fills every byte with the sentinel, and places the tensor inside a larger
buffer whose ``GUARD`` bytes on either side also hold the sentinel. Everything built on
them (``empty_like``, ``new_empty``, ``zeros``, the Triton launchers' ``torch.empty``) is
covered; memory obtained without aten's factories (``resize_``, raw storages) is not.

The tensor handed out has a storage that starts at its first byte: a slice of the buffer's
storage from there to the buffer's end (the slice keeps the buffer alive), so it looks like
a fresh allocation, storage offset 0, and code that addresses a fresh storage from its
start sees what it would see anywhere. ``clone_preserve_strides`` (diagonal_scatter)
clones a storage and views it at the input's storage offset: inside a storage that began
with the guard bytes that view would start in them. The trailing guard bytes stay in the
slice, so a write one element past the end (``as_strided`` allows it, as a kernel's
pointer does) still lands in them; the slice itself cannot be resized.

Why one run suffices: the oracle picks the sentinel byte *after* computing the reference,
as a byte ``b`` such that no reference element's bits are ``b`` repeated
(``choose_sentinel``). An element the implementation never wrote then holds ``b...b``,
which differs from the reference there, so the bitwise comparison fails, whatever the
allocator happened to contain. If every byte value occurs (only possible for 1-byte dtypes
with at least 256 elements), ``choose_sentinel`` gives None and the oracle runs the
implementation twice with two different sentinels: an unwritten element cannot equal the
reference in both runs. After the call, the guard bytes are checked: a write past either
end of a buffer changes them (an out-of-bounds write).
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import torch

from diagfuzz.core.bits import bits, sentinel_word

#: Bytes of sentinel on either side of every allocation (a multiple of every element size).
GUARD = 64

#: Sentinel bytes in order of preference: no small integer, no common float, not zero.
PREFERRED = (0xA5, 0x5A, 0xC3, 0x3C, 0x96, 0x69, 0xE7, 0x7E)

_aten = torch.ops.aten
#: Whether torch's once-per-process warning about overriding aten's kernels was caught.
_warned = False
_BACKEND_KEYS = {"cpu": torch._C.DispatchKey.CPU, "cuda": torch._C.DispatchKey.CUDA,
                 "meta": torch._C.DispatchKey.Meta}


def choose_sentinel(reference: torch.Tensor) -> int | None:
    """A byte whose repetition is no element of ``reference``; None when all 256 occur."""
    if reference.numel() == 0:
        return PREFERRED[0]
    words = bits(reference)
    # Nearly always the first preference is free: one comparison decides (no unique/sort).
    hits = words == sentinel_word(PREFERRED[0], reference.dtype)
    if not bool((hits if hits.shape[1] == 1 else hits.all(dim=1)).any()):
        return PREFERRED[0]
    words = words.cpu()
    raw = words.view(torch.uint8).reshape(words.shape[0], -1)
    uniform = (raw == raw[:, :1]).all(dim=1)
    taken = set(raw[uniform, 0].unique().tolist())
    for byte in (*PREFERRED, *range(256)):
        if byte not in taken:
            return byte
    return None


@dataclass
class _Allocation:
    """One guarded buffer: ``GUARD`` sentinel bytes, the tensor's bytes, ``GUARD`` more.

    ``tensor`` (held until the check ends) and its original geometry tell a legitimate
    in-place ``resize_``/``set_`` (torch may grow a tensor inside its storage, which here
    includes the trailing guard bytes) from an out-of-bounds write, which changes no
    metadata.
    """

    buffer: torch.Tensor
    nbytes: int
    tensor: torch.Tensor
    geometry: tuple[Any, ...]

    def regrown(self) -> bool:
        """Whether the handed-out tensor was resized or re-pointed since allocation."""
        return _geometry(self.tensor) != self.geometry


#: The module of ``torch.compiler.disable``'s wrapper, between a caller and its kernel.
_NO_COMPILE_WRAPPER = "torch._dynamo.eval_frame"


def _no_compile(kernel: Any) -> Any:
    """``kernel`` as Dynamo runs it: eagerly, never traced or compiled (where Dynamo is
    loaded at all: only then can its frame hook be active, and loading it costs a process
    a third of a second)."""
    if "torch._dynamo" not in sys.modules:
        return kernel
    return torch.compiler.disable(kernel, recursive=True)


@dataclass
class SentinelAllocations:
    """Context manager: aten's empty factories return sentinel-filled, guarded memory.

    ``allocations`` counts what was handed out; ``guard_violations()`` lists buffers whose
    guard bytes changed (out-of-bounds writes) after the block.
    """

    byte: int
    allocations: list[_Allocation] = field(default_factory=list)
    _library: Any = None
    #: Where allocations are recorded and which byte fills them (``record_into``).
    _target: SentinelAllocations | None = None

    def record_into(self, target: SentinelAllocations) -> None:
        """While active, hand out ``target``'s byte and record into ``target``: a batch of
        runs shares one registration (its cost, ~0.3 ms a switch on an H200 host, was a
        third of a Case's) while each run keeps its own sentinel and evidence."""
        self._target = target

    def __enter__(self) -> SentinelAllocations:
        # The dispatcher's own library object, not torch.library.Library: the Python wrapper
        # (bookkeeping, a finalizer) doubled the cost of a registration, paid on every Case.
        # A registration kept for the whole process and switched by a flag would cost more:
        # every allocation outside the block (references, materialise: 14-23 a Case) would
        # pass through a Python override, ~4 us each (the probe that timed it: `git show
        # c3eac45:benchmarks/registration_cost.py`).
        library = torch._C._dispatch_library("IMPL", "aten", "", __file__, 0)
        global _warned
        with warnings.catch_warnings() if not _warned else nullcontext():
            # Overriding aten's factories is the point; torch warns once per process.
            warnings.filterwarnings("ignore", message=".*[Oo]verrid.*")
            # (the dispatcher's own signature: op, kind, kernel, with_keyset)
            # Never compiled by Dynamo: a compiled implementation that falls back to eager
            # code allocates through these frames with Dynamo's frame hook active, and
            # Dynamo cannot trace them (DispatchKey arguments). Seen on an H200 after
            # hundreds of compiles in one executor: InternalTorchDynamoError in
            # torch.compile'd code, a finding of the oracle's, not of the implementation.
            library.impl("empty.memory_format", "BackendSelect",  # type: ignore[call-arg]
                         _no_compile(self._empty), True)
            library.impl("empty_strided", "BackendSelect",  # type: ignore[call-arg]
                         _no_compile(self._empty_strided), True)
            _warned = True
        self._library = library
        return self

    def __exit__(self, *exc: object) -> None:
        self._library.reset()
        self._library = None
        self._target = None

    # --- the overrides ---------------------------------------------------------------
    @staticmethod
    def _backend(keyset: Any, device: Any) -> Any | None:
        device = torch.device(device) if device is not None else torch.get_default_device()
        key = _BACKEND_KEYS.get(device.type)
        if key is None:
            return None
        after = torch._C._dispatch_keyset_full_after(torch._C.DispatchKey.BackendSelect)
        # Not through the Python dispatcher again (torch.compile enables it while tracing):
        # its decompositions would allocate through this override, recursively.
        keys = (keyset & after).remove(torch._C.DispatchKey.PythonDispatcher)
        return keys | torch._C.DispatchKeySet(key)

    def _empty(self, keyset: Any, size: Any, **kwargs: Any) -> torch.Tensor:
        ks = self._backend(keyset, kwargs.get("device"))
        if ks is None:
            raise RuntimeError(f"SentinelAllocations: cannot allocate on {kwargs.get('device')}")
        real = _aten.empty.memory_format.redispatch(ks, size, **kwargs)
        return self._guarded(ks, real, kwargs)

    def _empty_strided(self, keyset: Any, size: Any, stride: Any,
                       **kwargs: Any) -> torch.Tensor:
        ks = self._backend(keyset, kwargs.get("device"))
        if ks is None:
            raise RuntimeError(f"SentinelAllocations: cannot allocate on {kwargs.get('device')}")
        real = _aten.empty_strided.default.redispatch(ks, size, stride, **kwargs)
        return self._guarded(ks, real, kwargs)

    def _guarded(self, ks: Any, real: torch.Tensor, kwargs: dict[str, Any]) -> torch.Tensor:
        """``real``'s shape and strides, placed inside a sentinel-filled guarded buffer."""
        if _machinery_request():
            return real  # torch's own bookkeeping, not the implementation's result
        target = self._target or self
        if (real.numel() == 0 or real.layout != torch.strided or kwargs.get("pin_memory")
                or real.device.type == "meta"):
            # Nothing to guard, and torch often grows an empty result in place by resize_.
            if real.numel() and real.layout == torch.strided and real.device.type != "meta":
                real.untyped_storage().fill_(target.byte)  # type: ignore[attr-defined]
            return real
        span = 0
        if real.numel():
            span = 1 + sum((n - 1) * s for n, s in zip(real.shape, real.stride(), strict=True))
        nbytes = span * real.element_size()
        buffer = _aten.empty.memory_format.redispatch(
            ks, [2 * GUARD + nbytes], dtype=torch.uint8, device=real.device)
        buffer.fill_(target.byte)
        own = buffer.untyped_storage()[GUARD:]  # shares (and keeps) the buffer's memory
        tensor = real.set_(own, 0, tuple(real.shape), real.stride())  # real's memory freed
        target.allocations.append(_Allocation(buffer, nbytes, tensor, _geometry(tensor)))
        return tensor

    # --- evidence --------------------------------------------------------------------
    def guard_violations(self, copies: Sequence[torch.Tensor | None] | None = None
                         ) -> list[dict[str, Any]]:
        """Buffers whose guard bytes no longer all hold the sentinel, with where they changed.

        ``copies`` (one per allocation, in order) are the buffers' bytes as brought to the
        host after the call, so the check runs on the host; None reads the buffers
        themselves. Allocations the implementation regrew (resize_/set_) are not judged.
        """
        found = []
        intact = bytes([self.byte]) * GUARD
        for index, a in enumerate(list(self.allocations)):  # checking allocates while active
            if a.regrown():
                continue
            buffer = a.buffer if copies is None else copies[index]
            if buffer is None:
                continue
            before = buffer[:GUARD]
            after = buffer[GUARD + a.nbytes:]
            if _raw(before) == intact and _raw(after) == intact:
                continue  # the common case: no nonzero/tolist
            bad_before = (before != self.byte).nonzero().reshape(-1).tolist()
            bad_after = (after != self.byte).nonzero().reshape(-1).tolist()
            if bad_before or bad_after:
                found.append({
                    "buffer_bytes": a.nbytes,
                    "bytes_before_start": [GUARD - i for i in bad_before][:8],
                    "bytes_after_end": [i for i in bad_after][:8],
                })
        return found


#: Modules of torch's own machinery whose allocations are no result of the implementation:
#: generator states (torch reads a state back from its storage's first byte, so a state
#: placed after guard bytes is refused: "Invalid mt19937 state"; torch.compile saves and
#: restores them around every compile) and the compilers' bookkeeping. Code inductor
#: generates runs from modules of its own, so what it allocates stays guarded.
_UNGUARDED_CALLERS = ("torch.random", "torch.cuda.random", "torch._dynamo", "torch._functorch",
                      "torch._inductor", "torch._subclasses", "torch.fx", "torch._guards")


def _machinery_request() -> bool:
    """Whether the Python code that asked for the allocation is torch's machinery
    (``_UNGUARDED_CALLERS``) rather than the implementation."""
    frame: Any = sys._getframe(3)  # _machinery_request < _guarded < _empty* < the caller
    while frame is not None and frame.f_globals.get("__name__") == _NO_COMPILE_WRAPPER:
        frame = frame.f_back  # the frame of _no_compile's wrapper: not the caller
    name = (frame.f_globals.get("__name__") if frame is not None else "") or ""
    return name.startswith(_UNGUARDED_CALLERS)


def _raw(t: torch.Tensor) -> bytes:
    """A uint8 tensor's bytes (one copy to the host when on a device)."""
    return t.cpu().numpy().tobytes()


def _geometry(t: torch.Tensor) -> tuple[Any, ...]:
    """What a resize or set_ would change: storage, offset, shape, strides."""
    return (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), t.stride())
