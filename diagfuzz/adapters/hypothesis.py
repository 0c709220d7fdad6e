"""Every use of Hypothesis' private API, in one place.

diagfuzz leans on four things Hypothesis does not promise:

* **Pipelined shards and per-signature shrinking** (``diagfuzz.harness.shard``) remember a
  family's choice sequence (``current_choices``: ``BuildContext.data``,
  ``choices_to_bytes``) and store it where a later ``@given`` run's reuse phase replays it
  first (``save_for_replay``: ``function_digest``, the ``.secondary`` database key).
  Hypothesis skips shrinking when a primary entry replays exactly ("already shrunk"); a
  secondary entry is replayed and then shrunk.
* **Determinism** (``pin_constant_pool``): Hypothesis mixes literals of every local module
  in ``sys.modules`` into its draws, so a seed would draw other Cases on another install
  or worker; the pool is emptied for the whole process.
* **Cheap draws** (``fast``): one-choice strategies draw straight on ``ConjectureData``
  (about 7 instead of 17 us a choice), with the same choices.
* **A shard's own database key** (``set_database_key``): each shard and each signature
  saves and replays under a key of its own (``_hypothesis_internal_add_digest``).

Each feature checks what it needs and falls back to the public path where this Hypothesis
lacks it (``unavailable``); tests/test_adapters.py fails loudly when the API moves, and
pyproject.toml bounds Hypothesis to the versions proven to work.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from hypothesis import strategies as st

#: Phases of the replay run (phase 2): replay the saved family, shrink it, explain it.
#: No generation: a replay that passes (a flaky failure) must not start a new search.
REPLAY_PHASES = ("explicit", "reuse", "shrink", "explain")


def unavailable() -> str:
    """'' when this Hypothesis has what pipelining needs, else what is missing (one line)."""
    try:
        from hypothesis.control import BuildContext, current_build_context  # noqa: F401
        from hypothesis.database import choices_from_bytes, choices_to_bytes  # noqa: F401
        from hypothesis.internal.conjecture.data import ConjectureData
        from hypothesis.internal.reflection import function_digest  # noqa: F401
    except ImportError as exc:
        return f"Hypothesis lacks {exc.name or exc}"
    if not isinstance(getattr(ConjectureData, "choices", None), property):
        return "Hypothesis' ConjectureData has no choices property"
    return ""


def current_choices() -> bytes:
    """The running example's choice sequence, as Hypothesis' example database stores it.

    Called from inside the ``@given`` test function, after its arguments were drawn: the
    sequence is complete, and replaying it draws the same family.
    """
    from hypothesis.control import current_build_context
    from hypothesis.database import choices_to_bytes

    return choices_to_bytes(current_build_context().data.choices)


def database_key(test_function: Callable[..., Any]) -> bytes:
    """The key Hypothesis saves ``test_function``'s failures under (``@given`` on it).

    ``function_digest`` of the undecorated function: its source, signature and
    ``_hypothesis_internal_add_digest`` (the plugin sets one per shard), as
    ``StateForActualGivenExecution.run_engine`` computes it.
    """
    from hypothesis.internal.reflection import function_digest

    return function_digest(test_function)


def save_for_replay(database: Any, test_function: Callable[..., Any], choices: bytes) -> None:
    """Store ``choices`` so the next ``@given`` run of ``test_function`` replays it first."""
    database.save(database_key(test_function) + b".secondary", choices)


def remembers(database: Any, test_function: Callable[..., Any]) -> bool:
    """Whether ``database`` holds examples of ``test_function`` its reuse phase would
    replay (earlier failures): then the shard runs synchronously, replaying them first."""
    if database is None:
        return False
    key = database_key(test_function)
    return any(_first(database.fetch(k)) for k in (key, key + b".secondary"))


def replay_phases(phases: Iterable[Any]) -> tuple[Any, ...]:
    """``phases`` without generation and targeting (REPLAY_PHASES), reuse and shrink kept."""
    from hypothesis import Phase

    wanted = {Phase[name] for name in REPLAY_PHASES}
    kept = tuple(p for p in phases if p in wanted)
    return tuple(dict.fromkeys((*kept, Phase.reuse, Phase.shrink)))


def _first(entries: Iterable[bytes]) -> bool:
    return next(iter(entries), None) is not None


# --- determinism ----------------------------------------------------------------------

_pinned = False


def pin_constant_pool() -> bool:
    """Stop Hypothesis drawing literals of imported local modules (idempotent).

    Returns whether this Hypothesis has the pool (False: nothing to pin, draws never
    depended on it). The pool is private Hypothesis API, hence the checks; a Hypothesis that
    renames it makes tests/test_determinism.py fail rather than silently reintroduce it.
    """
    global _pinned
    try:
        from hypothesis.internal.conjecture import providers
    except ImportError:  # pragma: no cover - a Hypothesis without the module
        return False
    if not hasattr(providers, "_get_local_constants"):
        return False
    if not _pinned:
        empty = providers.Constants()

        def no_local_constants() -> Any:
            return empty

        providers._get_local_constants = no_local_constants
        cache = getattr(providers, "CONSTANTS_CACHE", None)
        if cache is not None and hasattr(cache, "cache"):
            cache.cache.clear()  # pools computed before the pin held local constants
        _pinned = True
    return True

def set_database_key(test_function: Callable[..., Any], key: str) -> None:
    """Make ``@given(...)(test_function)`` save and replay under a key of its own: the
    function's digest includes ``key`` (what pytest's parametrize does for its items)."""
    test_function._hypothesis_internal_add_digest = key.encode()  # type: ignore[attr-defined]


# --- fast draws -----------------------------------------------------------------------

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


def fast(draw: Any) -> Any:
    """``draw``, but one-choice strategies (integers, sampled_from, booleans, bytes) make
    their choice straight on Hypothesis' ConjectureData, without the span and checks that
    ``draw`` wraps every draw in.

    Why: on a GPU the worker's drawing limits the fuzz suite, and a draw through ``draw``
    cost about 17 µs a choice against 7 µs straight (this machine, Hypothesis 6.170), for
    the ~50 choices of a Case family. The choices, and so the database's replays, are the
    same: each strategy's own ``do_draw`` makes them. What is lost is one span per choice,
    which only Hypothesis' mutator and a few shrink passes look at; nested composites keep
    theirs. Measured cost: over 20 seeds, two of a backward predicate's shrinks kept 6 and 8
    family members where the worst through ``draw`` kept 3 (16 of 20 reached the smallest
    family either way; BENCHMARKS.md, "Fuzz throughput and gate time"). ``draw`` itself comes
    back where it is not a ConjectureData's (``st.data()``), or where this Hypothesis lacks
    the private API used.
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
