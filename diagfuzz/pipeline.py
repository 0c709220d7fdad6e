"""Hypothesis plumbing for pipelined shards: remember a family, replay it through the database.

A pipelined shard (``diagfuzz.plugin.Shard.fuzz``) runs in two phases. Phase 1 draws Case
families with ``@given`` and only *submits* their members to the executor, so drawing the
next family overlaps checking the last; a verdict arrives after its example has returned,
too late for Hypothesis to shrink it. So phase 1 remembers each family's choice sequence
(``current_choices``), and phase 2 stores the first failing one where the synchronous test's
reuse phase looks (``save_for_replay``) and runs that test: Hypothesis replays it first,
sees it fail, and shrinks and reports it exactly as a synchronous shard would.

The entry goes under the test's *secondary* key, not its primary one: Hypothesis skips
shrinking when a primary entry replays exactly ("already shrunk"), and a secondary entry is
replayed and then shrunk. Private Hypothesis API (``BuildContext.data``, ``choices_to_bytes``,
``function_digest``); ``unavailable`` says when this Hypothesis lacks it, and the plugin
then runs shards synchronously. tests/test_pipeline_units.py checks the database key
against what Hypothesis itself saves.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

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
