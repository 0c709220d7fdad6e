"""Bitwise equality for the foundation tests: dtype, device, shape, strides and raw bits."""

from __future__ import annotations

import torch

from diagfuzz.core.bits import diff, differing


def bitwise_difference(actual: torch.Tensor, expected: torch.Tensor) -> str:
    """Empty when equal in every respect; otherwise what differs, for an assert message."""
    for name in ("dtype", "device", "shape"):
        if getattr(actual, name) != getattr(expected, name):
            return f"{name}: {getattr(actual, name)} != expected {getattr(expected, name)}"
    if actual.stride() != expected.stride():
        return f"strides: {actual.stride()} != expected {expected.stride()}"
    positions = differing(expected, actual)
    if len(positions):
        first = diff(expected, actual, positions)["first"][0]
        return (f"{len(positions)} elements differ; first at {first['index']}: "
                f"{first['actual_bits']} != expected {first['expected_bits']}")
    return ""
