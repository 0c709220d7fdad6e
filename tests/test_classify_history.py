"""Failures that depend on what ran before: deterministic, with the sequence that makes them.

Each planted bug (``tests.faulty.history``) passes when its Case is judged alone in a fresh
process. Classification must find what it needs (an earlier call of another op, the same
Case called again, a cold first call, the n-th call), measure that sequence in fresh
executors and call it deterministic; a truly random bug stays flaky.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from diagfuzz.core.case import Values
from diagfuzz.core.verdict import Verdict
from diagfuzz.execution import history
from diagfuzz.execution.classification import (
    AFTER_CALLS,
    COLD_FIRST_CALL,
    NOT_REPRODUCED,
    REPEATED_CALL,
    Classifier,
    Rerun,
    classify,
    ddmin,
)
from diagfuzz.execution.history import Call
from diagfuzz.execution.parent import ProcessRunner
from diagfuzz.execution.timeouts import Calibration, KnownFaults
from tests.faulty.cases import square

IMPL = "tests.faulty.history:{}"


def failing_after(impl: str, cases: list, tmp_path: Path) -> Verdict:
    """The last Case's verdict after the others, in one runner (as a run judges them)."""
    with ProcessRunner(IMPL.format(impl), "cpu", timeout=30, workdir=tmp_path / "run") as r:
        verdicts = [r.run(case) for case in cases]
    assert verdicts[-1].kind == "mismatch", verdicts[-1]
    return verdicts[-1]


def noise(count: int) -> list:
    """Cases that pollute nothing: other values, offsets and ops."""
    ops = ("diagonal", "diagonal_backward")
    return [replace(square(o % 3 - 1, n=4, op=ops[i % 2]), values=Values(seed=i))
            for i, o in enumerate(range(count))]


def test_a_polluter_of_another_op_is_found_and_the_failure_is_deterministic(
        tmp_path: Path) -> None:
    polluter = square(2, op="diagonal_backward")
    before = [*noise(9), polluter, *noise(14)]
    failure = failing_after("polluted", [*before, square(0)], tmp_path)
    assert failure.details["history"]["calls"] == len(before)
    assert [c.case for c in history.read(failure.details["history"])] == before
    c = classify(failure, IMPL.format("polluted"), "cpu", timeout=30,
                 workdir=tmp_path / "classify")
    assert (c.label, c.ratio, c.history) == ("deterministic", "10/10", AFTER_CALLS)
    assert [call.case for call in c.sequence] == [polluter]
    assert c.story() == ("passes alone; fails after 1 earlier call (shrunk from the 24 its "
                         "executor made before it)")
    # Twice log2(24) replays shrinking, after up to three shorter parts tried first (the
    # call just before it, the same op's calls with its sizes, the same op's).
    assert c.searched == 24 and 0 < c.replays <= 14
    assert c.to_dict()["sequence"] == [{"oracle": "check", "case": polluter.to_dict()}]


def test_the_same_case_called_again_is_a_repeated_call() -> None:
    with ProcessRunner(IMPL.format("second_call"), "cpu", timeout=30) as r:
        first, second = r.run(square(0)), r.run(square(0))
    assert (first.kind, second.kind) == ("pass", "mismatch")
    c = classify(second, IMPL.format("second_call"), "cpu", timeout=30)
    assert (c.label, c.ratio, c.history) == ("deterministic", "10/10", REPEATED_CALL)
    assert c.sequence == (Call("check", square(0)),)
    assert c.story() == "passes on its first call; fails on its 2nd call in one process"


def test_a_cold_first_call() -> None:
    with ProcessRunner(IMPL.format("cold_first"), "cpu", timeout=30) as r:
        failure = r.run(square(1))
    assert failure.kind == "mismatch" and failure.details["history"]["calls"] == 0
    c = classify(failure, IMPL.format("cold_first"), "cpu", timeout=30)
    assert (c.label, c.ratio, c.history, c.sequence) == (
        "deterministic", "10/10", COLD_FIRST_CALL, ())
    assert "cold first call" in c.story()


def test_the_nth_call_of_a_key(tmp_path: Path) -> None:
    # Wrong from the 12th float32 diagonal of a process: the Case itself, called 12 times.
    cases = [replace(square(0), values=Values(seed=i)) for i in range(12)]
    failure = failing_after("nth_call", cases, tmp_path)
    c = classify(failure, IMPL.format("nth_call"), "cpu", timeout=30)
    assert (c.label, c.ratio, c.history, len(c.sequence)) == (
        "deterministic", "10/10", REPEATED_CALL, 11)
    assert "fails on its 12th call in one process" in c.story()


def test_a_failure_its_history_does_not_bring_back_is_flaky(tmp_path: Path) -> None:
    # A failure whose executor's history holds nothing that makes the Case fail.
    past = history.History(tmp_path)
    past.record("check", square(1))
    claimed = Verdict("mismatch", "bitwise:aten", "planted", square(0),
                      {"history": past.reference(1)})
    c = classify(claimed, IMPL.format("polluted"), "cpu", timeout=30)
    assert (c.label, c.ratio, c.history) == ("flaky", "0/10", NOT_REPRODUCED)


def test_a_hang_left_by_the_call_before_costs_one_replay_to_find(tmp_path: Path) -> None:
    # The call just before a hang left work running that the Case waits on: the first
    # part replayed is that one call, so no replay of the whole history hangs. The op's
    # hang is confirmed already (as the gate's run shares it), so each hang costs the
    # calibrated allowance, not a confirmation.
    polluter = square(2, op="diagonal_backward")
    past = history.History(tmp_path)
    for case in [*noise(30), polluter]:
        past.record("check", case)
    claimed = Verdict("hang", "executor:timeout", "planted", square(0),
                      {"history": past.reference(31)})
    learnt = (Calibration(), KnownFaults())
    learnt[1].add("diagonal", "hang")
    rerun = Rerun(IMPL.format("left_running"), "cpu", 5.0, learnt=learnt,
                  workdir=tmp_path / "classify")
    c = Classifier(rerun, repeats=2).classify(claimed)
    assert c is not None
    assert (c.label, c.ratio, c.history) == ("deterministic", "4/4", AFTER_CALLS)
    assert [call.case for call in c.sequence] == [polluter] and c.replays == 1
    assert "shrunk to 1 calls in 1 replays" in (tmp_path / "classify" /
                                               "classification.log").read_text()


def test_a_random_bug_stays_flaky() -> None:
    # One call in three flips a bit, drawn from the OS: no sequence fails every time.
    # (8 re-runs: the chance that one process's re-runs all fail is 3**-8.)
    failure = Verdict("mismatch", "bitwise:aten", "planted", square(0))
    c = classify(failure, "tests.faulty.flaky:impl", "cpu", repeats=8, timeout=30)
    assert c.label == "flaky" and c.runs == 16 and 0 <= c.failures < 16, c.to_dict()


@pytest.mark.parametrize("needed", [{7}, {3, 30}, {0, 1, 2}, {39}])
def test_ddmin_keeps_exactly_the_calls_the_failure_needs(needed: set[int]) -> None:
    calls = [Call("check", square(i % 3, n=3 + i)) for i in range(40)]
    wanted = {calls[i] for i in needed}
    asked: list[int] = []

    def test(candidates: list[list[Call]]) -> list[bool]:
        asked.append(len(candidates))
        return [wanted <= set(c) for c in candidates]

    assert ddmin(calls, test) == [calls[i] for i in sorted(needed)]
    if len(needed) == 1:
        assert sum(asked) <= 2 * 6  # about twice log2(40) replays


def test_ddmin_stops_when_its_budget_is_spent() -> None:
    calls = [Call("check", square(0, n=3 + i)) for i in range(32)]
    budget = [3]

    def test(candidates: list[list[Call]]) -> list[bool]:
        given = candidates[:budget[0]]
        budget[0] -= len(given)
        return [calls[5] in c for c in given]

    kept = ddmin(calls, test)
    assert calls[5] in kept and len(kept) < 32


def test_a_cache_keyed_on_addresses_is_stale_after_a_freed_blocks_address_is_reused(
        tmp_path: Path) -> None:
    # Same sizes, other values: the second input is staged in the first's freed block, and
    # the cache keyed on its address returns the first input's diagonal.
    first, second = (replace(square(0, n=8), values=Values(seed=s)) for s in (0, 1))
    failure = failing_after("address_reuse", [first, second], tmp_path)
    c = classify(failure, IMPL.format("address_reuse"), "cpu", timeout=30)
    assert (c.label, c.ratio, c.history) == ("deterministic", "10/10", AFTER_CALLS)
    assert [call.case for call in c.sequence] == [first]


def test_a_case_that_fails_alone_another_way_fails_alone_with_no_history_search(
        tmp_path: Path) -> None:
    # The run saw a mismatch (on a GPU: an error raised after a launch that never ends,
    # the synchronisation coming later); alone, the Case hangs on every call. It fails
    # alone, as a hang: its 30-call history is not replayed (each replay would stall).
    past = history.History(tmp_path)
    for case in noise(30):
        past.record("check", case)
    claimed = Verdict("mismatch", "bitwise:aten", "planted", square(-1),
                      {"history": past.reference(30)})
    rerun = Rerun("tests.faulty.hang:impl", "cpu", 3.0, workdir=tmp_path / "classify")
    c = Classifier(rerun, repeats=3).classify(claimed)
    assert c is not None
    assert (c.label, c.ratio, c.kind, c.kinds, c.history) == (
        "deterministic", "3/3", "hang", {"hang": 3}, "")
    assert (c.processes, c.replays, c.story()) == (3, 0, "")
    assert c.example is not None and c.example.kind == "hang"
    log = (tmp_path / "classify" / "classification.log").read_text()
    assert "fails alone as hang, not as the run saw it" in log and "earlier calls" not in log


@pytest.mark.parametrize(("claimed", "kind"), [
    (("crash", "executor:health"), "crash"),  # as the run saw it
    (("mismatch", "bitwise:aten"), "hang"),  # another way: the first re-run's kind
])
def test_a_case_stuck_inside_its_call_or_in_the_health_check_after_is_deterministic(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, claimed: tuple[str, str],
        kind: str) -> None:
    # Each fresh executor that meets offset 1 is left stuck for good; the odd ones wait
    # inside the Case's call (a hang), the even ones in the health check after it (a crash,
    # executor:health), as a launch that never ends is met on a GPU. Every re-run fails,
    # one way or the other: deterministic, not flaky 2/4.
    from tests.faulty.stuck_either_way import COUNTER_ENV

    monkeypatch.setenv(COUNTER_ENV, str(tmp_path / "turns"))
    learnt = (Calibration(), KnownFaults())
    for fault in ("hang", "crash"):
        learnt[1].add("diagonal", fault)
    rerun = Rerun("tests.faulty.stuck_either_way:impl", "cpu", 5.0, learnt=learnt,
                  workdir=tmp_path / "classify")
    c = Classifier(rerun, repeats=4).classify(Verdict(*claimed, "planted", square(1)))
    assert c is not None
    assert c.kinds == {"crash": 2, "hang": 2}, c.to_dict()
    assert (c.label, c.ratio, c.kind, c.processes) == ("deterministic", "4/4", kind, 4)
    assert c.example is not None and c.example.kind == kind
