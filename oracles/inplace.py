"""What the oracle needs for an in-place op (``OpSpec.inplace``: ``triu_``, ``tril_``).

An in-place op's result is its input: the same tensor object, its storage, strides and
offset, with every element of the view right bitwise, nothing outside the view written and
the version counter moved. So the references run on *twins*, copies of the input's whole
storage viewed alike (a reference never writes the Case's own memory, and the expected
storage is a whole storage to compare with), and the implementation gets a twin of its own
on the device, even on the CPU where uploads are otherwise no-ops.

An input whose elements share memory (an expanded dim) has no order-free result: aten
accepts ``torch.ones(3, 1).expand(3, 3).triu_()`` and the bits left where a zeroed and a
kept element meet depend on the order of writes (the CPU's loop, a GPU's blocks). For such
a view, ``overlap_violations`` asks only what every order gives: each memory location
holds the bits the op gives one of the elements that live there (an element it keeps is
given its own bits).
"""

from __future__ import annotations

from typing import Any

import torch

from diagfuzz.core.bits import bits


def twin(t: torch.Tensor) -> torch.Tensor:
    """A copy of ``t``'s whole storage, viewed as ``t`` (same shape, strides, offset)."""
    storage = torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage())
    copy = storage.clone()
    return torch.empty(0, dtype=t.dtype, device=t.device).set_(
        copy.untyped_storage(), t.storage_offset(), t.shape, t.stride())


def twin_arguments(args: dict[str, Any], name: str) -> dict[str, Any]:
    """``args`` with the in-place operand ``name`` replaced by its twin."""
    twinned = dict(args)
    twinned[name] = twin(args[name])
    return twinned


def locations(t: torch.Tensor) -> torch.Tensor:
    """Each element's storage index (elements of ``t``'s dtype), row-major, on the CPU."""
    index = torch.full((), int(t.storage_offset()), dtype=torch.int64)
    for size, stride in zip(t.shape, t.stride(), strict=True):
        index = index.unsqueeze(-1) + torch.arange(size, dtype=torch.int64) * stride
    return index.reshape(-1)


def overlaps(t: torch.Tensor) -> bool:
    """Whether two elements of ``t`` share memory (exact, by their storage indices:
    torch's own test answers "too hard" for any view with gaps)."""
    if t.numel() < 2 or t.is_contiguous():
        return False
    if any(n > 1 and s == 0 for n, s in zip(t.shape, t.stride(), strict=True)):
        return True
    where = locations(t)
    return int(where.unique().numel()) != int(where.numel())


def overlap_violations(view: torch.Tensor, after: torch.Tensor,
                       values: torch.Tensor) -> list[int]:
    """Storage indices of ``view``'s memory (host tensors; ``after`` the storage's bytes)
    not holding the bits the op gives (``values``, shaped like ``view``) one of the
    elements that live there. An element the op leaves as it was is given its own bits,
    so a location may keep them only where such an element lives."""
    where = locations(view)
    now = bits(_elements(after, view.dtype))[where]
    given = bits(values.contiguous().reshape(-1))
    fine = (now == given).all(dim=1).to(torch.int64)
    count = int(where.max()) + 1 if where.numel() else 0
    ok = torch.zeros(count, dtype=torch.int64).scatter_reduce(0, where, fine, "amax")
    touched = torch.zeros(count, dtype=torch.bool)
    touched[where] = True
    return (touched & (ok == 0)).nonzero().reshape(-1).tolist()


def outside_view(view: torch.Tensor, before: torch.Tensor, after: torch.Tensor) -> list[int]:
    """Storage indices (elements of ``view``'s dtype) outside ``view`` whose bytes differ
    between ``before`` and ``after`` (the storage's bytes, host tensors)."""
    was = bits(_elements(before, view.dtype))
    now = bits(_elements(after, view.dtype))
    changed = (was != now).any(dim=1)
    changed[locations(view)] = False
    return changed.nonzero().reshape(-1).tolist()


def _elements(storage: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A storage's bytes (uint8) as elements of ``dtype``."""
    width = torch.empty(0, dtype=dtype).element_size()
    return storage[:storage.numel() - storage.numel() % width].view(dtype)
