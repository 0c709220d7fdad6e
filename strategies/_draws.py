"""Cached strategy objects for the draws inside composite strategies.

Building a strategy is far dearer than drawing from it (Hypothesis validates every new
object, and its own cache lookup costs tens of microseconds), and a Case makes dozens of
draws, so every strategy used inside a draw comes from here, built once per argument tuple.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache, lru_cache
from typing import Any, TypeVar

from hypothesis import strategies as st

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


def _private_api() -> tuple[tuple[type, ...], type | None, Callable[[Any], Any] | None]:
    """Hypothesis' strategy classes whose ``do_draw`` is one choice, its ConjectureData and
    ``unwrap_strategies`` (private API: none of them when this Hypothesis moved one, and
    every draw then takes the public path)."""
    try:
        from hypothesis.internal.conjecture.data import ConjectureData
        from hypothesis.strategies._internal.lazy import unwrap_strategies
        from hypothesis.strategies._internal.misc import BooleansStrategy
        from hypothesis.strategies._internal.numbers import IntegersStrategy
        from hypothesis.strategies._internal.strategies import SampledFromStrategy
        from hypothesis.strategies._internal.strings import BytesStrategy
    except ImportError:
        return (), None, None
    return ((BooleansStrategy, IntegersStrategy, SampledFromStrategy, BytesStrategy),
            ConjectureData, unwrap_strategies)


PRIMITIVE_TYPES, _DATA_TYPE, _UNWRAP = _private_api()


def _primitive(strategy: st.SearchStrategy[Any]) -> Any:
    """``strategy``'s unwrapped one-choice strategy, validated, or None (drawn the public
    way). Not cached: Hypothesis memoises the unwrapping on the strategy (0.2 µs a call
    here), and a cache would keep alive every strategy ``ints`` evicts (nightly Cases have
    sizes up to 2**20, each a strategy of its own)."""
    assert _UNWRAP is not None
    strategy.validate()
    raw = _UNWRAP(strategy)
    return raw if type(raw) in PRIMITIVE_TYPES and not raw.is_empty else None


def fast(draw: Callable[..., Any]) -> Callable[..., Any]:
    """``draw``, but one-choice strategies (integers, sampled_from, booleans, bytes) make
    their choice straight on Hypothesis' ConjectureData, without the span and checks that
    ``draw`` wraps every draw in.

    Why: on a GPU the worker's drawing limits the fuzz suite, and a draw through ``draw``
    cost about 17 µs a choice against 7 µs straight (this machine, Hypothesis 6.170), for
    the ~50 choices of a Case family. The choices, and so the database's replays, are the
    same: each strategy's own ``do_draw`` makes them. What is lost is one span per choice,
    which only Hypothesis' mutator and a few shrink passes look at; nested composites keep
    theirs. Measured cost: over 20 seeds, two of a backward predicate's shrinks kept 6 and 8
    family members where the worst before kept 3 (16 of 20 reached the smallest family
    either way; BENCHMARKS.md, eighth session). ``draw`` itself comes back where it is not
    a ConjectureData's (``st.data()``), or where this Hypothesis lacks the private API used.
    """
    data = getattr(draw, "__self__", None)
    if not PRIMITIVE_TYPES or _DATA_TYPE is None or not isinstance(data, _DATA_TYPE):
        return draw

    def fast_draw(strategy: st.SearchStrategy[Any], label: Any = None) -> Any:
        raw = _primitive(strategy)
        if raw is None or label is not None:
            return draw(strategy, label)
        return raw.do_draw(data)

    return fast_draw
