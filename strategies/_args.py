"""Validation of the narrowing arguments every strategy shares.

Strategies check their arguments when called, not when first drawn from, so a typo fails at
the line that wrote it, with a message naming the argument (Hypothesis' ``InvalidArgument``).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import torch
from hypothesis.errors import InvalidArgument

from diagfuzz.core.case import available_dtypes
from diagfuzz.core.names import MAX_RANK as MAX_RANK  # re-exported

#: Storage-element budget of the default (CPU) profile; a GPU profile passes a larger one.
DEFAULT_MAX_ELEMENTS = 4096
#: Ranks drawn by default (inclusive).
DEFAULT_RANKS = (2, 8)


def check_ranks(ranks: int | Sequence[int], minimum: int = 2) -> tuple[int, int]:
    """``ranks`` as an inclusive (low, high) pair: an int means exactly that rank."""
    if isinstance(ranks, bool):
        raise InvalidArgument(f"ranks={ranks!r} must be an int or a (low, high) pair")
    pair = (ranks, ranks) if isinstance(ranks, int) else tuple(ranks)
    if len(pair) != 2 or not all(isinstance(r, int) and not isinstance(r, bool) for r in pair):
        raise InvalidArgument(f"ranks={ranks!r} must be an int or a (low, high) pair of ints")
    low, high = pair
    if not minimum <= low <= high <= MAX_RANK:
        raise InvalidArgument(
            f"ranks={ranks!r} must satisfy {minimum} <= low <= high <= {MAX_RANK}")
    return low, high


def check_dtypes(dtypes: Sequence[str | torch.dtype] | None) -> tuple[str, ...]:
    """dtype names, in the given order (the first is where draws shrink to).

    The default is every available dtype with float32 first.
    """
    available = available_dtypes()
    if dtypes is None:
        return ("float32", *(d for d in available if d != "float32"))
    if isinstance(dtypes, (str, torch.dtype)):
        dtypes = (dtypes,)
    names: list[str] = []
    for dtype in dtypes:
        name = str(dtype).removeprefix("torch.") if isinstance(dtype, torch.dtype) else dtype
        if name not in available:
            raise InvalidArgument(
                f"dtypes: {dtype!r} is not one of the available dtypes {available}")
        if name not in names:
            names.append(name)
    if not names:
        raise InvalidArgument("dtypes=() leaves nothing to draw")
    return tuple(names)


def check_max_elements(max_elements: int, argument: str = "max_elements") -> int:
    """An element budget (``argument`` names it in the error): a positive int."""
    if isinstance(max_elements, bool) or not isinstance(max_elements, int) or max_elements < 1:
        raise InvalidArgument(f"{argument}={max_elements!r} must be a positive int")
    return max_elements


def check_kinds(argument: str, kinds: Collection[str] | None,
                allowed: Sequence[str]) -> tuple[str, ...]:
    """A non-empty subset of ``allowed``, returned in ``allowed``'s (simplest-first) order."""
    if kinds is None:
        return tuple(allowed)
    if isinstance(kinds, str):
        kinds = (kinds,)
    unknown = [k for k in kinds if k not in allowed]
    if unknown:
        raise InvalidArgument(f"{argument}: unknown {unknown}; choose from {tuple(allowed)}")
    chosen = tuple(k for k in allowed if k in kinds)
    if not chosen:
        raise InvalidArgument(f"{argument}={kinds!r} leaves nothing to draw")
    return chosen


def check_flag(argument: str, value: bool) -> bool:
    """A plain bool (not merely truthy: ``specials="no"`` is a mistake, not True)."""
    if not isinstance(value, bool):
        raise InvalidArgument(f"{argument}={value!r} must be True or False")
    return value
