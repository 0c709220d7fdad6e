"""``adapters.hypothesis.fast``: the same choices and Cases as Hypothesis' own ``draw``, only
cheaper, and the public ``draw`` wherever the shortcut cannot apply."""

from __future__ import annotations

from random import Random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.internal.conjecture.data import ConjectureData

from diagfuzz.adapters import hypothesis as hypothesis_adapter
from diagfuzz.strategies import (
    diagonal_backward_case_families,
    diagonal_case_families,
    invalid_case_families,
)
from diagfuzz.strategies._draws import BOOLS, choice, fast, ints

FAMILIES = {
    "diagonal": diagonal_case_families,
    "diagonal_backward": diagonal_backward_case_families,
    "invalid": invalid_case_families,
}


def _draw_fresh(strategy: st.SearchStrategy, seed: int) -> tuple[object, tuple]:
    """A value drawn from ``strategy`` with fresh randomness, and the choices it made."""
    data = ConjectureData(random=Random(seed))
    value = data.draw(strategy)
    return value, tuple(data.choices)


def _replay(strategy: st.SearchStrategy, choices: tuple) -> object:
    return ConjectureData.for_choices(choices).draw(strategy)


@pytest.mark.parametrize("stream", sorted(FAMILIES))
def test_families_drawn_fast_replay_identically_the_public_way(
        stream: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure saved by a fast run (its choice sequence) replays to the same family with
    fast draws off, and the other way round: the example database stays valid."""
    make = FAMILIES[stream]
    drawn = [_draw_fresh(make(), seed) for seed in range(40)]
    with monkeypatch.context() as m:
        m.setattr(hypothesis_adapter, "PRIMITIVE_TYPES", ())  # every draw the public way
        draw = ConjectureData(random=Random(0)).draw
        assert fast(draw) is draw
        public = [_draw_fresh(make(), seed) for seed in range(40)]
        assert [_replay(make(), choices) for _, choices in drawn] == [v for v, _ in drawn]
    assert [_replay(make(), choices) for _, choices in public] == [v for v, _ in public]
    assert sum(len(v) for v, _ in drawn) > 40  # families, not single Cases


def test_fast_draws_make_no_span_per_choice() -> None:
    """The saving itself: one-choice strategies drawn fast open no span of their own (a
    Hypothesis without the private API gets the public draw back, spans and all)."""
    def spans(draw_with: str) -> int:
        @st.composite
        def some(draw: st.DrawFn) -> list:
            d = fast(draw) if draw_with == "fast" else draw
            return [d(ints(0, 9)), d(choice(("a", "b"))), d(BOOLS), d(st.binary(min_size=3,
                                                                                 max_size=3))]
        data = ConjectureData(random=Random(1))
        data.draw(some())
        data.freeze()
        return len(data.spans)

    if hypothesis_adapter.PRIMITIVE_TYPES and hypothesis_adapter._DATA_TYPE is not None:
        assert spans("fast") + 4 <= spans("public")
    else:
        assert spans("fast") == spans("public")


def test_fast_gives_other_draw_functions_back_unchanged() -> None:
    """st.data()'s draw is not a ConjectureData's: fast must not touch it."""
    @settings(max_examples=3, database=None, suppress_health_check=list(HealthCheck))
    @given(st.data())
    def run(data: st.DataObject) -> None:
        draw = data.draw
        assert fast(draw) is draw
        assert 0 <= fast(draw)(ints(0, 3)) <= 3

    run()

    def plain(strategy: st.SearchStrategy, label: object = None) -> int:
        return 7

    assert fast(plain) is plain
    assert fast(fast(plain)) is plain
