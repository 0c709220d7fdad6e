"""Pipelined executor and journal: several Cases in flight, every verdict still its own Case's.

``ProcessRunner.submit`` sends without waiting; the executor serves in order, so a crash or
hang is the oldest unanswered Case's, and the Cases queued behind it run in a replacement.
The journal names the oldest Case without a verdict as the one running.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from diagfuzz.core.verdict import Verdict
from diagfuzz.execution.journal import Journal, JournaledRunner, last_unfinished, read
from diagfuzz.execution.parent import ExecutorError, ProcessRunner
from tests.faulty.cases import square, unplaced

ENV = {"torch": "t", "triton": "tr", "gpu": ""}  # skip version probing in unit tests


def test_crash_is_the_right_cases_and_the_queue_behind_it_still_runs(tmp_path: Path) -> None:
    """Cases judged alone (no batches: ``tests/test_batch_executor.py`` has those)."""
    offsets = [0, 2, 1, 0, -1, 2]  # abort.py dies on offset 1, the third Case
    with ProcessRunner("tests.faulty.abort:impl", "cpu", timeout=30,
                       workdir=tmp_path, batch=False) as runner:
        tickets = [runner.submit(square(o)) for o in offsets]
        done = runner.drain()
        assert runner.in_flight == 0 and runner.drain() == []
        starts = runner.starts
    assert [t for t, _ in done] == tickets  # in submission order
    verdicts = [v for _, v in done]
    assert [v.kind for v in verdicts] == ["pass", "pass", "crash", "pass", "pass", "pass"]
    assert [v.case for v in verdicts] == [square(o) for o in offsets]
    crash = verdicts[2]
    assert "SIGABRT" in crash.message and crash.details["exitcode"] == -6
    # As with run(): it died in a used executor, so it was confirmed in a fresh one.
    assert crash.details["first_attempt"]["kind"] == "crash"
    assert crash.details["first_attempt"]["details"]["executor_cases"] == 2
    assert crash.details["executor_cases"] == 0
    assert "abort.py" in crash.details["stderr_tail"]
    assert starts == 3  # first; fresh one for the confirmation; replacement for the rest


def test_pipelined_verdicts_equal_synchronous_ones() -> None:
    offsets = [0, 1, 2, -1, 1, 0, 3, -2]
    with ProcessRunner("tests.faulty.wrong:impl", "cpu", timeout=60, window=3) as runner:
        sync = [runner.run(square(o)) for o in offsets]
        tickets = []
        got: list[tuple[int, Verdict]] = []
        for o in offsets:
            tickets.append(runner.submit(square(o)))
            assert runner.in_flight <= 3  # the window bounds what is in flight
            got.extend(runner.poll())
        got.extend(runner.drain())
        assert runner.starts == 1  # mismatches keep a healthy executor
    assert [t for t, _ in got] == tickets
    assert [unplaced(v) for _, v in got] == [unplaced(v) for v in sync]


def test_hang_is_the_oldest_cases_and_the_rest_run(tmp_path: Path) -> None:
    offsets = [0, -1, 0, 2]  # hang.py never returns on offset -1
    with ProcessRunner("tests.faulty.hang:impl", "cpu", timeout=3.0,
                       workdir=tmp_path) as runner:
        for o in offsets:
            runner.submit(square(o))
        verdicts = [v for _, v in runner.drain()]
    assert [v.kind for v in verdicts] == ["pass", "hang", "pass", "pass"]
    assert verdicts[1].case == square(-1) and "hang.py" in verdicts[1].details["stderr_tail"]


def test_run_keeps_earlier_submissions_for_poll() -> None:
    with ProcessRunner("tests.faulty.wrong:impl", "cpu", timeout=60) as runner:
        first = runner.submit(square(0))
        assert runner.run(square(1)).kind == "mismatch"
        assert [(t, v.kind) for t, v in runner.poll()] == [(first, "pass")]


def test_journal_names_the_oldest_case_in_flight(tmp_path: Path) -> None:
    path = tmp_path / "gw0.jsonl"
    journal = Journal(path, env=ENV)
    seqs = [journal.begin(square(o), f"t{o}") for o in (0, 1, 2)]
    assert last_unfinished(path) == (square(0), "t0")  # the oldest, not the newest
    journal.end(seqs[0], Verdict.passed(square(0)))
    assert last_unfinished(path) == (square(1), "t1")
    journal.abandon(seqs[1], "oracle raised")  # given up on: not the running one
    assert last_unfinished(path) == (square(2), "t2")
    journal.end(seqs[2], Verdict.passed(square(2)))
    assert last_unfinished(path) is None
    journal.close()


def test_journaled_runner_pipelines_case_lines_before_verdicts(tmp_path: Path) -> None:
    path = tmp_path / "main.jsonl"
    runner = JournaledRunner(ProcessRunner("tests.faulty.wrong:impl", "cpu", timeout=60),
                             Journal(path, env=ENV), "t")
    assert runner.pipelines
    tickets = [runner.submit(square(o)) for o in (0, 1, 2)]
    done = runner.poll()
    done += runner.drain()
    assert [t for t, _ in done] == tickets
    assert last_unfinished(path) is None
    records = read(path)[1:]
    seq_of_case = {r["seq"]: i for i, r in enumerate(records) if r["type"] == "case"}
    for i, r in enumerate(records):
        if r["type"] == "verdict":
            assert seq_of_case[r["seq"]] < i  # every Case written before its verdict
    kinds = [r["kind"] for r in records if r["type"] == "verdict"]
    assert kinds == ["pass", "mismatch", "mismatch"]  # wrong.py: offset > 0
    runner.close()


def test_oracle_error_names_its_ticket_and_the_queue_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "main.jsonl"
    inner = ProcessRunner("diagfuzz.impl:aten", "cpu", timeout=60, oracle="no_such_oracle")
    runner = JournaledRunner(inner, Journal(path, env=ENV), "t")
    first = runner.submit(square(0))
    with pytest.raises(ExecutorError) as raised:  # an oracle that raises
        runner.drain()
    assert raised.value.tickets == (first,)  # type: ignore[attr-defined]
    assert [r["type"] for r in read(path)[1:]] == ["case", "abandoned"]
    assert last_unfinished(path) is None  # given up on, so not the running Case
    runner.close()


def test_a_crash_whose_replacement_cannot_start_keeps_its_verdict(tmp_path: Path) -> None:
    """The crashing Case's verdict is settled before the replacement executor is started
    for the Cases behind it; if that start fails, the verdict still reaches the caller and
    the journal (else it would be lost, and the next Case blamed). Judged alone: a batch
    that crashes is attributed only by judging its Cases again, which needs that start."""
    inner = ProcessRunner("tests.faulty.abort:impl", "cpu", timeout=60, workdir=tmp_path,
                          batch=False)
    journal = tmp_path / "journal.jsonl"
    runner = JournaledRunner(inner, Journal(journal, env=ENV), "t")
    crashing = runner.submit(square(1))  # aborts, the first Case of its executor
    behind = runner.submit(square(0))

    def cannot_start() -> None:
        raise ExecutorError("replacement cannot start")

    inner._start = cannot_start  # type: ignore[method-assign]
    with pytest.raises(ExecutorError) as raised:  # the failed start
        runner.drain()
    assert raised.value.tickets == (behind,)  # type: ignore[attr-defined]
    settled = runner.poll()
    assert [(t, v.kind) for t, v in settled] == [(crashing, "crash")]
    records = [r for r in read(journal) if r["type"] != "header"]
    seq = {r["seq"]: r["case"] for r in records if r["type"] == "case"}
    ends = {r["seq"]: (r["type"], r.get("kind")) for r in records if r["type"] != "case"}
    assert {seq[s]["offset"]: end for s, end in ends.items()} == {
        1: ("verdict", "crash"), 0: ("abandoned", None)}
    runner.close()


def test_journaled_verdicts_survive_a_later_harness_error(tmp_path: Path) -> None:
    """A verdict the journaled runner already holds is still returned when collecting the
    next one raises (an oracle error on another Case)."""
    inner = ProcessRunner("tests.faulty.wrong:impl", "cpu", timeout=60, window=1)
    runner = JournaledRunner(inner, Journal(tmp_path / "journal.jsonl", env=ENV), "t")
    first = runner.submit(square(1))  # a mismatch
    inner.oracle = "no_such_oracle"  # the next Case's oracle raises
    runner.submit(square(0))  # waits for the first (window 1): its verdict is held
    try:
        runner.drain()
    except ExecutorError:
        pass
    else:
        raise AssertionError("the oracle error must be raised")
    held = runner.poll()
    assert [(t, v.kind) for t, v in held] == [(first, "mismatch")]
    runner.close()


def test_start_starts_one_executor_before_any_case_and_only_once(tmp_path: Path) -> None:
    """The plugin starts the executor while a shard is set up, so the report's pace does not
    count its start-up; a later Case uses that executor, and start() again is a no-op."""
    from diagfuzz.execution.fanout import FanoutRunner

    with ProcessRunner("tests.faulty.wrong:impl", "cpu", timeout=60) as runner:
        journaled = JournaledRunner(runner, Journal(tmp_path / "j.jsonl", run_seed=1,
                                                    worker_id="gw0", impl="x", env=ENV))
        assert runner.starts == 0
        journaled.start()
        assert runner.starts == 1 and runner._alive()
        journaled.start()
        assert journaled.run(square(0)).case == square(0)
        assert runner.starts == 1  # the Case ran in the executor started before it
    fan = FanoutRunner([ProcessRunner("tests.faulty.wrong:impl", "cpu", timeout=60)
                        for _ in range(2)])
    try:
        fan.start()
        assert fan.starts == 2 and all(r._alive() for r in fan.runners)
    finally:
        fan.close()
