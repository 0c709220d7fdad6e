"""A confirmed hang's or crash's shapes: learnt from the Cases that failed so and those that
answered, each blocks only Cases that share every feature of the faults that formed it, and
none once a Case that answered has them all."""

from __future__ import annotations

from pathlib import Path

from diagfuzz.core.case import Case, Layout
from diagfuzz.execution.fault_shapes import MIN_FAULTS, FaultShapes, describe
from diagfuzz.execution.parent import ProcessRunner
from diagfuzz.execution.timeouts import KnownFaults, learnt_for


def case(sizes: tuple[int, ...], dtype: str = "float32", op: str = "diagonal") -> Case:
    return Case(op, sizes, 0, 0, 1, dtype, Layout.contiguous(sizes))


def test_the_shape_is_what_every_hang_shares_once_enough_hung() -> None:
    shapes = FaultShapes()
    shapes.observe(case((3, 2, 2, 2)), "hang")
    shapes.observe(case((3, 5, 2, 4), "float16"), "hang")
    assert shapes.shapes("diagonal") == []  # fewer than MIN_FAULTS: chance shares features
    shapes.observe(case((3, 7, 1, 9), "bool"), "hang")
    assert MIN_FAULTS == 3
    [shape] = shapes.shapes("diagonal")
    assert describe(shape) == "rank 4, dim 0 = 3"
    assert shapes.blocks(case((3, 1, 1, 1), "int32")) == shape
    assert shapes.blocks(case((4, 1, 1, 1))) is None  # another first dim
    assert shapes.blocks(case((3, 1, 1))) is None  # another rank
    assert shapes.blocks(case((3, 1, 1, 1), op="diag_embed")) is None  # another op
    assert shapes.blocked == {"diagonal": 1}
    assert shapes.blocked_by == {"diagonal": ("hang", "rank 4, dim 0 = 3")}


def test_a_shape_an_answered_case_has_blocks_nothing() -> None:
    shapes = FaultShapes()
    shapes.observe(case((3, 2, 2, 2)), None)  # this one passed
    for sizes in ((3, 2, 2, 2), (3, 2, 2, 2), (3, 2, 2, 2)):
        shapes.observe(case(sizes), "hang")  # a slow machine's stalls of it
    assert shapes.shapes("diagonal") == []


def test_a_case_that_answers_with_a_shape_ends_it() -> None:
    shapes = FaultShapes()
    for sizes, dtype in (((3, 2, 2, 1), "float32"), ((3, 4, 2, 7), "float16"),
                         ((3, 6, 2, 3), "bool")):
        shapes.observe(case(sizes, dtype), "hang")
    assert [describe(s) for s in shapes.shapes("diagonal")] == ["rank 4, dim 0 = 3, dim 2 = 2"]
    shapes.observe(case((3, 9, 2, 9), "int8"), None)
    assert shapes.shapes("diagonal") == []
    assert shapes.blocks(case((3, 1, 2, 1))) is None


def test_a_hang_that_would_narrow_a_shape_past_separating_forms_its_own() -> None:
    """A large Case past a confirmed hang's short allowance, or a fault's second shape,
    does not strip the first shape down to what answered Cases have too."""
    shapes = FaultShapes()
    shapes.observe(case((2, 2, 2, 2)), None)
    shapes.observe(case((5, 67, 68), "float64"), None)
    for sizes, dtype in (((3, 2, 2, 1), "float32"), ((3, 4, 2, 7), "float16"),
                         ((5, 67, 68), "float64"), ((3, 6, 2, 3), "bool")):
        shapes.observe(case(sizes, dtype), "hang")  # (5, 67, 68): slow, not the fault
    for sizes, dtype in (((6, 2, 2), "int8"), ((6, 5, 5), "int8"), ((6, 1, 3), "int16")):
        shapes.observe(case(sizes, dtype), "hang")  # the fault's second shape
    assert sorted(describe(s) for s in shapes.shapes("diagonal")) == [
        "rank 3, dim 0 = 6", "rank 4, dim 0 = 3, dim 2 = 2"]
    assert shapes.blocks(case((6, 9, 9))) is not None
    assert shapes.blocks(case((3, 9, 2, 9))) is not None
    assert shapes.blocks(case((5, 67, 68))) is None  # it answered once: never blocked


def test_a_runner_answers_a_case_of_the_shape_without_running_it(tmp_path: Path) -> None:
    """The runner blocks only where asked, and only for an op with a confirmed hang."""
    learnt = learnt_for(None)
    for sizes, dtype in (((3, 2, 2, 2), "float32"), ((3, 4, 5, 6), "float16"),
                         ((3, 7, 1, 9), "bool")):
        learnt[1].shapes.observe(case(sizes, dtype), "hang")
    with ProcessRunner("diagfuzz.impl:aten", "cpu", timeout=30, learnt=learnt,
                       workdir=tmp_path) as runner:
        runner.block_fault_shapes = True
        assert runner._blocked(case((3, 5, 5, 5))) is None  # no confirmed hang yet
        learnt[1].add("diagonal", "hang")
        first = runner.submit(case((2, 5, 5, 5)))  # another shape: judged
        second = runner.submit(case((3, 5, 5, 5)))  # answered after the Case in flight
        (t1, served), (t2, blocked) = runner.drain()
        runner.block_fault_shapes = False
        judged = runner.run(case((3, 5, 5, 5)))  # a re-run that must run: judged
        assert learnt[1].shapes.shapes("diagonal") == []  # it passed: no longer the hang's
    assert blocked.kind == "hang" and blocked.details["blocked"] == "rank 4, dim 0 = 3"
    assert "not run" in blocked.message and "known_hang" in blocked.details
    assert (t1, t2) == (first, second)
    assert served.kind == "pass" and judged.kind == "pass"
    assert learnt[1].shapes.blocked == {"diagonal": 1}


def test_a_hang_writing_an_out_of_the_results_shape_is_told_from_the_call_without_it() -> None:
    """A kernel that hangs on a shape hangs writing an ``out`` of it too, while the same
    sizes pass without one (or with an empty ``out`` that it resizes)."""
    from dataclasses import replace

    from diagfuzz.core.case import drawn_out_form

    def out_case(sizes: tuple[int, ...], form: str) -> Case:
        plain = case(sizes, op="diagonal_backward")
        return next(c for seed in range(100)
                    if drawn_out_form(c := replace(plain, out_dtype="float32",
                                                   values=replace(plain.values, seed=seed)))
                    == form)

    shapes = FaultShapes()
    for sizes in ((3, 2, 2, 2), (3, 4, 5, 6), (3, 7, 1, 9)):
        shapes.observe(case(sizes, op="diagonal_backward"), None)
        shapes.observe(out_case(sizes, "empty"), None)
        shapes.observe(out_case(sizes, "fresh"), "hang")
    [shape] = shapes.shapes("diagonal_backward")
    assert describe(shape) == "rank 4, dim 0 = 3, float32, an out of the result's shape"
    assert shapes.blocks(out_case((3, 1, 1, 1), "transposed")) == shape
    assert shapes.blocks(out_case((3, 1, 1, 1), "misshapen")) is None
    assert shapes.blocks(case((3, 1, 1, 1), op="diagonal_backward")) is None


def test_a_confirmed_crashs_shape_is_not_run_again(tmp_path: Path) -> None:
    """Each crash costs a fresh executor: once the op's crash is confirmed and three Cases
    crashed on one shape, later Cases of it are its crash's Cases without running; every
    other Case is judged."""
    cases = [case((3, 2 + i % 5, 2 + i % 5, 2)) if i % 3 == 2 else case((2 + i % 5, 3))
             for i in range(36)]
    with ProcessRunner("tests.faulty.shape_fault:crash", "cpu", timeout=30,
                       learnt=learnt_for(tmp_path / "known"), workdir=tmp_path) as runner:
        runner.block_fault_shapes = True
        verdicts = []
        for c in cases:  # each submitted once the one before is answered
            runner.submit(c)
            verdicts += [v for _, v in runner.drain()]
        starts = runner.starts
    crashed = [v for v in verdicts if v.kind == "crash"]
    assert [v.kind for v in verdicts] == ["crash" if c.sizes[0] == 3 and len(c.sizes) == 4
                                          else "pass" for c in cases]
    blocked = [v for v in crashed if "blocked" in v.details]
    assert len(blocked) == len(crashed) - MIN_FAULTS > 0
    assert all(v.check == "executor:died" and "known_crash" in v.details for v in blocked)
    assert blocked[0].details["blocked"] == "rank 4, dim 0 = 3, dim 3 = 2, float32"
    assert starts <= MIN_FAULTS + 4, starts  # one start per crash that ran, no more


def test_cases_in_flight_when_a_shape_forms_are_not_run(tmp_path: Path) -> None:
    """A stage submits a window of Cases before any is answered: those of a crash's shape
    still queued when the shape forms are answered as its Cases without running, in their
    turn (not one executor each), and the Case after such a gap is judged alone (it must
    not join a batch with those before the gap)."""
    cases = [case((3, 2 + i % 5, 2 + i % 5, 2)) if i % 3 == 2 else case((2 + i % 5, 3))
             for i in range(36)]
    with ProcessRunner("tests.faulty.shape_fault:crash", "cpu", timeout=30,
                       learnt=learnt_for(tmp_path / "known"), workdir=tmp_path) as runner:
        runner.block_fault_shapes, runner.window = True, len(cases)
        tickets = [runner.submit(c) for c in cases]  # all in flight at once
        answered = runner.drain()
        starts = runner.starts
    assert [t for t, _ in answered] == tickets
    verdicts = [v for _, v in answered]
    assert [v.kind for v in verdicts] == ["crash" if c.sizes[0] == 3 and len(c.sizes) == 4
                                          else "pass" for c in cases]
    crashed = [v for v in verdicts if v.kind == "crash"]
    blocked = [v for v in crashed if "blocked" in v.details]
    assert len(blocked) >= len(crashed) - MIN_FAULTS - 1 > 0
    assert starts <= MIN_FAULTS + 5, starts


def test_a_shape_one_process_learnt_blocks_in_the_runs_others(tmp_path: Path) -> None:
    """Processes of one run (KnownFaults on its file): the shape the first learnt from three
    hangs blocks in the second, which hung on none, and narrows there as it narrows in
    the first; a shape a Case that answered in a process has is not adopted there (the
    third); its end, met in the second, ends it in the first."""
    path = str(tmp_path / "faults")
    first, second = KnownFaults(path, refresh=0.0), KnownFaults(path, refresh=0.0)
    third = KnownFaults(path, refresh=0.0)
    third.shapes.observe(case((3, 1, 1, 1)), None)  # answered there
    first.add("diagonal", "hang")
    for sizes, dtype in (((3, 2, 2, 1), "float32"), ((3, 4, 2, 7), "float16"),
                         ((3, 6, 2, 3), "bool")):
        first.shapes.observe(case(sizes, dtype), "hang")
    assert second.has("diagonal", "hang")  # (reads the file)
    [shape] = second.shapes.shapes("diagonal")
    assert describe(shape) == "rank 4, dim 0 = 3, dim 2 = 2"
    assert second.shapes.blocks(case((3, 5, 2, 5), "int32")) == shape
    first.shapes.observe(case((3, 8, 5, 2)), "hang")  # narrows it: told as well
    assert second.has("diagonal")
    assert [describe(s) for s in second.shapes.shapes("diagonal")] == ["rank 4, dim 0 = 3"]
    assert third.has("diagonal")  # has a Case of the narrower shape that answered:
    assert [describe(s) for s in third.shapes.shapes("diagonal")] == [
        "rank 4, dim 0 = 3, dim 2 = 2"]
    second.shapes.observe(case((3, 9, 9, 9), "int8"), None)  # answered with every feature
    assert first.has("diagonal")
    assert first.shapes.blocks(case((3, 1, 1, 1))) is None
    assert first.shapes.shapes("diagonal") == [] and second.shapes.shapes("diagonal") == []
