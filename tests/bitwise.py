"""Bitwise equality for the foundation tests: dtype, device, shape, strides and raw bits."""

from __future__ import annotations

import torch

_INT_OF_SIZE = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def raw_bits(t: torch.Tensor) -> torch.Tensor:
    """The tensor's elements as same-width integers (complex128 as int64 pairs)."""
    t = t.resolve_conj().resolve_neg().contiguous()
    if t.dtype.itemsize == 16:
        return torch.view_as_real(t).view(torch.int64)
    return t.view(_INT_OF_SIZE[t.dtype.itemsize])


def bitwise_difference(actual: torch.Tensor, expected: torch.Tensor) -> str:
    """Empty when equal in every respect; otherwise what differs, for an assert message."""
    for name in ("dtype", "device", "shape"):
        if getattr(actual, name) != getattr(expected, name):
            return f"{name}: {getattr(actual, name)} != expected {getattr(expected, name)}"
    if actual.stride() != expected.stride():
        return f"strides: {actual.stride()} != expected {expected.stride()}"
    a, e = raw_bits(actual).cpu(), raw_bits(expected).cpu()
    bad = (a != e).nonzero()
    if len(bad):
        first = tuple(bad[0].tolist())
        return (f"{len(bad)} elements differ; first at {first}: "
                f"{a[first].item():#x} != expected {e[first].item():#x}")
    return ""
