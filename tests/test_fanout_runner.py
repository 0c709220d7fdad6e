"""FanoutRunner: one worker, several executors, every verdict still its own Case's.

Routing is deterministic while nothing is collected (each Case goes to the executor with
the fewest in flight, ties to the first), so with two executors and no polling the Cases
alternate: even positions to executor 0, odd ones to executor 1.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest

from diagfuzz.core.verdict import Verdict
from diagfuzz.execution.fanout import FanoutRunner
from diagfuzz.execution.journal import Journal, JournaledRunner, last_unfinished, read
from diagfuzz.execution.parent import ExecutorError, ProcessRunner
from diagfuzz.harness.sharding import RunPlan
from diagfuzz.harness.worker import make_runner
from tests.faulty.cases import square, unplaced

ENV = {"torch": "t", "triton": "tr", "gpu": ""}  # skip version probing in unit tests


def fanout(impl: str, tmp_path: Path | None = None, n: int = 2, **kwargs: object) -> FanoutRunner:
    runners = []
    for index in range(n):
        runner = ProcessRunner(impl, "cpu", timeout=60, workdir=tmp_path, **kwargs)  # type: ignore[arg-type]
        if tmp_path is not None:
            runner.log = tmp_path / f"executor-{index}.log"
        runners.append(runner)
    return FanoutRunner(runners)


def test_verdicts_equal_one_executors_in_submission_order() -> None:
    offsets = [0, 1, 2, -1, 1, 0, 3, -2, 2, 0]
    with ProcessRunner("tests.faulty.wrong:impl", "cpu", timeout=60) as one:
        sync = [one.run(square(o)) for o in offsets]
    with fanout("tests.faulty.wrong:impl", window=3) as runner:
        assert runner.window == 6
        tickets, got = [], []
        for o in offsets:
            tickets.append(runner.submit(square(o)))
            assert runner.in_flight <= 6
            if len(tickets) > 1:  # the first two Cases reach both executors, uncollected
                got.extend(runner.poll())
        got.extend(runner.drain())
        assert runner.in_flight == 0 and runner.drain() == []
        assert [r.starts for r in runner.runners] == [1, 1]  # both used, none replaced
        # run() waits for its own Case; a Case submitted earlier stays for poll.
        early = runner.submit(square(0))
        assert runner.run(square(1)).kind == "mismatch"
        assert [(t, v.kind) for t, v in runner.poll() + runner.drain()] == [(early, "pass")]
    assert [t for t, _ in got] == tickets  # released in submission order
    # The same verdicts; where each executor's history is kept differs by runner.
    assert [unplaced(v) for _, v in got] == [unplaced(v) for v in sync]



def test_a_crash_is_its_executors_case_and_the_other_executor_goes_on(tmp_path: Path) -> None:
    offsets = [0, 2, 3, 0, 1, -1, 0, 2]  # abort.py dies on offset 1: position 4, executor 0
    # Judged alone, so the attempts are counted exactly (test_batch_executor: in batches).
    with fanout("tests.faulty.abort:impl", tmp_path, batch=False) as runner:
        tickets = [runner.submit(square(o)) for o in offsets]
        done = runner.drain()
        starts = [r.starts for r in runner.runners]
    assert [t for t, _ in done] == tickets
    verdicts = [v for _, v in done]
    assert [v.case for v in verdicts] == [square(o) for o in offsets]
    assert [v.kind for v in verdicts] == ["crash" if o == 1 else "pass" for o in offsets]
    crash = verdicts[4]
    assert crash.details["exitcode"] == -6 and "abort.py" in crash.details["stderr_tail"]
    # Executor 0 had served two Cases: the crash was confirmed in a fresh one, and a third
    # runs the Cases queued behind it; executor 1 never noticed.
    assert crash.details["first_attempt"]["details"]["executor_cases"] == 2
    assert starts == [3, 1]
    logs = {p.name: p.read_text() for p in tmp_path.glob("executor*.log")}
    assert set(logs) == {"executor-0.log", "executor-1.log"}
    assert "abort.py" in logs["executor-0.log"] and "abort.py" not in logs["executor-1.log"]


def test_an_oracle_error_names_the_fanout_ticket_and_the_rest_is_kept(tmp_path: Path,
                                                                     monkeypatch) -> None:
    # The journaled submit collects verdicts first, so an executor that had already answered
    # the first Case would get the second too (a fast impl failed once in a loaded run, a
    # half-second sleep only narrowed the window): the first Case is held by a gate this
    # test opens once both are routed.
    gate = tmp_path / "gate"
    monkeypatch.setenv("DIAGFUZZ_GATE", str(gate))  # the executors inherit it
    good = ProcessRunner("tests.faulty.gated:impl", "cpu", timeout=60)
    bad = ProcessRunner("diagfuzz.impl:aten", "cpu", timeout=60, oracle="no_such_oracle")
    path = tmp_path / "main.jsonl"
    runner = JournaledRunner(FanoutRunner([good, bad]), Journal(path, env=ENV), "t")
    try:
        first = runner.submit(square(0))  # executor 0, held at the gate; its ticket 1
        second = runner.submit(square(2))  # executor 1, its ticket 1 too: ours is 2
        assert runner.inner._pending == {first: 0, second: 1}
        gate.touch()
        with pytest.raises(ExecutorError) as raised:  # an oracle that raises
            runner.drain()
        assert raised.value.tickets == (second,)  # type: ignore[attr-defined]
        assert [(t, v.kind) for t, v in runner.poll() + runner.drain()] == [(first, "pass")]
    finally:
        runner.close()
    records = read(path)[1:]
    seq = {r["seq"]: r["case"]["offset"] for r in records if r["type"] == "case"}
    assert {seq[r["seq"]]: r["type"] for r in records if r["type"] != "case"} == {
        0: "verdict", 2: "abandoned"}
    assert last_unfinished(path) is None


def test_make_runner_fans_out_only_when_asked_and_pipelined(tmp_path: Path) -> None:
    plan = RunPlan(1, "diagfuzz.impl:aten", "dev", 1, 10, 64, "process", 30.0,
                   str(tmp_path), 1)
    one = make_runner(plan, "main")
    assert type(one.inner) is ProcessRunner  # N == 1: today's runner, unchanged
    assert one.inner.log == tmp_path / "main" / "executor.log"
    assert one.inner.block_fault_shapes  # a shard's Cases, one executor or several
    one.close()
    assert "pipelined," in plan.describe()
    for off in (replace(plan, executors=3, pipeline=False),
                replace(plan, executors=3, isolation="inprocess")):
        assert not off.fans_out
    three = replace(plan, executors=3)
    assert three.fans_out and "pipelined to 3 executors" in three.describe()
    runner = make_runner(three, "gw0")
    inner = runner.inner
    assert isinstance(inner, FanoutRunner) and len(inner.runners) == 3
    assert [r.log.name for r in inner.runners] == [f"executor-{i}.log" for i in range(3)]
    assert {r.timeout for r in inner.runners} == {30.0}
    assert all(r.block_fault_shapes for r in inner.runners)
    assert inner.starts == 0  # executors start lazily, on their first Case
    runner.close()


def test_a_settled_verdict_waits_for_every_earlier_case(tmp_path: Path) -> None:
    """Release order: a fast executor's verdict is held while an earlier Case still runs
    on the other, so the first failure a caller sees is the first submitted."""
    runners = [ProcessRunner("tests.faulty.hang:impl", "cpu", timeout=3.0) for _ in range(2)]
    with FanoutRunner(runners) as runner:
        runner.submit(square(0))
        runner.submit(square(0))
        assert len(runner.drain()) == 2 and runner.starts == 2  # both executors warm
        stuck = runner.submit(square(-1))  # executor 0: hang.py never returns
        quick = runner.submit(square(2))  # executor 1
        runner._settle_one(1)  # executor 1 has answered
        assert runner.poll() == []  # held behind the running Case
        done: list[tuple[int, Verdict]] = runner.drain()
    assert [(t, v.kind) for t, v in done] == [(stuck, "hang"), (quick, "pass")]


def test_a_shard_starts_on_the_first_ready_executor_and_the_slow_one_joins_later(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Executor 1 loads an impl that takes seconds to import; start() returns once executor
    # 0 is ready, Cases go to it meanwhile, and the verdicts are those of one executor.
    (tmp_path / "slow_to_import.py").write_text(
        "import time\ntime.sleep(float(__import__('os').environ['SLOW_IMPORT_S']))\n"
        "from tests.faulty.wrong import impl\n")
    monkeypatch.setenv("SLOW_IMPORT_S", "8")
    monkeypatch.syspath_prepend(str(tmp_path))
    offsets = [0, 1, 2, -1, 1, 0]
    with ProcessRunner("tests.faulty.wrong:impl", "cpu", timeout=60) as one:
        sync = [one.run(square(o)) for o in offsets]
    fast = ProcessRunner("tests.faulty.wrong:impl", "cpu", timeout=60)
    slow = ProcessRunner("slow_to_import:impl", "cpu", timeout=60)
    with FanoutRunner([fast, slow]) as runner:
        t0 = time.monotonic()
        runner.start()
        assert fast.ready_now() and not slow.ready_now()
        tickets = [runner.submit(square(o)) for o in offsets]
        got = runner.drain()
        assert time.monotonic() - t0 < 8.0  # judged before the slow executor was ready
        assert slow.in_flight == 0 and not slow.ready_now()  # no Case waited for it
        assert [t for t, _ in got] == tickets
        assert [unplaced(v) for _, v in got] == [unplaced(v) for v in sync]
        slow.start()  # once ready, it takes Cases too: the second goes to it
        runner.submit(square(0))
        runner.submit(square(0))
        assert (fast.in_flight, slow.in_flight) == (1, 1)
        assert [v.kind for _, v in runner.drain()] == ["pass", "pass"]
