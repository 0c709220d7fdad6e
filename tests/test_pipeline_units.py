"""diagfuzz.adapters.hypothesis against this Hypothesis: the private API it leans on still behaves.

Phase 2 of a pipelined shard relies on three things: the choice sequence read inside the
test replays the same example, Hypothesis saves a test's failures under
``pipeline.database_key``, and an entry saved by ``save_for_replay`` is replayed first and
then shrunk (not skipped as "already shrunk"). A Hypothesis that changes any of them fails
here, not silently in a fuzz run.
"""

from __future__ import annotations

import pytest
from hypothesis import given, seed, settings
from hypothesis import strategies as st
from hypothesis.database import InMemoryExampleDatabase

from diagfuzz.adapters import hypothesis as pipeline


def test_this_hypothesis_has_what_pipelining_needs() -> None:
    assert pipeline.unavailable() == ""


def test_saved_choices_replay_first_and_shrink() -> None:
    seen: list[list[int]] = []
    remembered: dict[tuple[int, ...], bytes] = {}

    def record(xs: list[int]) -> None:
        remembered.setdefault(tuple(xs), pipeline.current_choices())

    def check(xs: list[int]) -> None:
        seen.append(list(xs))
        assert sum(xs) < 1000

    check._hypothesis_internal_add_digest = b"shard:0"  # type: ignore[attr-defined]
    strategy = st.lists(st.integers(0, 10_000), min_size=3, max_size=6)
    settings(max_examples=60, database=None, deadline=None)(seed(5)(given(strategy)(record)))()
    big = next(xs for xs in remembered if sum(xs) >= 1000 and max(xs) > 1000)
    database = InMemoryExampleDatabase()
    assert not pipeline.remembers(database, check)
    pipeline.save_for_replay(database, check, remembered[big])
    assert pipeline.remembers(database, check)
    replay = settings(max_examples=60, database=database, deadline=None,
                      phases=pipeline.replay_phases(settings.default.phases))
    with pytest.raises(AssertionError):
        replay(seed(5)(given(strategy)(check)))()
    assert seen[0] == list(big)  # replayed first: the same example from its choices
    assert len(seen) > 2 and sum(seen[-1]) == 1000  # then shrunk to the boundary
    # Hypothesis saved the shrunk failure under the key the pipeline computes.
    assert list(database.fetch(pipeline.database_key(check)))


def test_replay_phases_never_generate() -> None:
    from hypothesis import Phase

    phases = pipeline.replay_phases(tuple(Phase))
    assert Phase.generate not in phases and Phase.target not in phases
    assert Phase.reuse in phases and Phase.shrink in phases
