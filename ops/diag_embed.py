"""diag_embed as one launch of diagonal_backward's kernel.

aten's ``diag_embed(x, offset, dim1, dim2)`` makes ``zeros(sizes)`` and copies ``x`` into its
diagonal view ``(offset, dim1, dim2)``, where ``sizes`` is ``x.shape[:-1]`` with
``|offset| + x.shape[-1]`` inserted at the smaller and then the larger of the two dims
(wrapped for rank ``x.dim() + 1``). That diagonal has exactly ``x``'s shape, so the result
is ``diagonal_backward(x, sizes, offset, dim1, dim2)`` bit for bit, for any dims (negative
or swapped: both ops read the same diagonal view of the same zeros). This launcher
validates like aten, computes ``sizes`` and runs diagonal_backward's planner and kernel
(one launch writing every element of a ``torch.empty`` result), counted as ``diag_embed``.

aten computes the new dim's length in int64: where ``|offset| + x.shape[-1]`` wraps it raises
c10's SymInt range error; sizes too large to allocate raise ``torch.empty``'s own errors,
which are aten's (``at::zeros`` allocates the same way).
"""

from __future__ import annotations

import importlib

import torch

from diagfuzz.core.geometry import Diagonal, diagonal_of, wrap_dim
from diagfuzz.ops import _counters
from diagfuzz.ops._runtime import check_device
from diagfuzz.ops._tiling import remember

#: diagonal_backward's module, looked up at each call (tests replace its ``_launch``).
_backward = importlib.import_module("diagfuzz.ops.diagonal_backward")

#: c10's SymInt range: an IntArrayRef holding a smaller int cannot become SymInts.
_MIN_SYMINT = -(2**62)


def diag_embed(
    input: torch.Tensor, offset: int = 0, dim1: int = -2, dim2: int = -1
) -> torch.Tensor:
    """``aten::diag_embed``: a contiguous tensor of zeros with ``input`` on its diagonal
    ``(offset, dim1, dim2)``; the result has one dim more than ``input``."""
    key = _key(input, offset, dim1, dim2)
    known = _PLANS.get(key) if key is not None else None
    if known is None:  # first call with this signature: validate, allocate, plan
        sizes, diag, source = _prepare(input, offset, dim1, dim2)
        out = torch.empty(sizes, dtype=source.dtype, device=source.device)  # aten's errors
        plan = _backward._plan(sizes, source, diag)
        remember(_PLANS, key, (sizes, plan))
    else:  # validated before; input's pointer is all the launch needs of it
        source = input
        sizes, plan = known
        out = torch.empty(sizes, dtype=source.dtype, device=source.device)
    if plan is not None:
        _counters.count("diag_embed")
        _backward._launch(plan, (out, source))
    return out


#: (sizes, plan) by call signature (see ``_key``).
_PLANS: dict = {}


def _key(input: object, offset: int, dim1: int, dim2: int) -> tuple | None:
    """What determines validation, result and plan; None where the fast path does not apply
    (a tensor subclass, conj/neg bits)."""
    if type(input) is not torch.Tensor or input.is_conj() or input.is_neg():
        return None
    return (input.shape, input.stride(), input.dtype, input.device, offset, dim1, dim2)


def diag_embed_out(
    input: torch.Tensor, offset: int = 0, dim1: int = -2, dim2: int = -1, *,
    out: torch.Tensor,
) -> torch.Tensor:
    """The ``.out`` overload: aten's generated out= wrapper (``write_generated_out``); a
    contiguous ``out`` is written by the one launch directly."""
    sizes, diag, source = _prepare(input, offset, dim1, dim2)

    def fill(o: torch.Tensor) -> None:
        plan = _backward._plan(sizes, source, diag)
        if plan is not None:
            _counters.count("diag_embed")
            _backward._launch(plan, (o, source))

    return _counters.write_generated_out(
        out, sizes, source.dtype, source.device, reads=(input,), fill=fill,
        compute=lambda: diag_embed(source, offset, dim1, dim2))


def embed_sizes(shape: tuple[int, ...], offset: int, dim1: int, dim2: int) -> tuple[int, ...]:
    """The result's sizes for an input of ``shape``, validated like aten (IndexError for a
    dim out of range for rank ``len(shape) + 1``, RuntimeError for identical dims or a
    length that wraps int64)."""
    rank = len(shape) + 1
    d1, d2 = wrap_dim(dim1, rank), wrap_dim(dim2, rank)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    # (A 0-d input never gets here: for rank 1 both dims wrap to 0, or one is out of range.)
    length = _int64(_int64(abs(offset)) + shape[-1])  # std::abs, then +, in int64
    sizes = list(shape[:-1])
    sizes.insert(min(d1, d2), length)
    sizes.insert(max(d1, d2), length)
    for size in sizes:
        if size < _MIN_SYMINT:
            raise RuntimeError(
                f"IntArrayRef contains an int that cannot be represented as a SymInt: {size}")
    return tuple(sizes)


def _prepare(input: torch.Tensor, offset: int, dim1: int,
             dim2: int) -> tuple[tuple[int, ...], Diagonal, torch.Tensor]:
    """Validate like aten; return the result's sizes, its diagonal, and input as read."""
    if not isinstance(input, torch.Tensor):
        raise TypeError(f"input must be a Tensor, got {type(input).__name__}")
    sizes = embed_sizes(tuple(input.shape), offset, dim1, dim2)
    check_device(input, "input")
    return sizes, diagonal_of(sizes, offset, dim1, dim2), input.resolve_conj().resolve_neg()


def _int64(value: int) -> int:
    """``value`` wrapped to int64, as C++ arithmetic on int64_t wraps on these platforms."""
    return (value + 2**63) % 2**64 - 2**63
