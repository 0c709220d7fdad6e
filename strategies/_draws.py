"""Cached strategy objects for the draws inside composite strategies.

Building a strategy is far dearer than drawing from it (Hypothesis validates every new
object, and its own cache lookup costs tens of microseconds), and a Case makes dozens of
draws, so every strategy used inside a draw comes from here, built once per argument tuple.
"""

from __future__ import annotations

from functools import cache, lru_cache
from typing import TypeVar

from hypothesis import strategies as st

from diagfuzz.adapters.hypothesis import PRIMITIVE_TYPES, fast

T = TypeVar("T")

BOOLS = st.booleans()
#: A raw index, reduced modulo a count after drawing; shrinks towards 0.
INDEX = st.integers(0, 2**16 - 1)


@lru_cache(maxsize=4096)
def ints(low: int, high: int) -> st.SearchStrategy[int]:
    """``st.integers(low, high)``, built once."""
    return st.integers(low, high)


@cache
def choice(options: tuple[T, ...]) -> st.SearchStrategy[T]:
    """``st.sampled_from(options)``, built once; the first option is the simplest."""
    return st.sampled_from(options)


def below(draw: st.DrawFn, n: int) -> int:
    """A number in [0, n): 0 without a draw when n == 1."""
    return draw(ints(0, n - 1)) if n > 1 else 0


__all__ = ["BOOLS", "INDEX", "PRIMITIVE_TYPES", "below", "choice", "fast", "ints"]
