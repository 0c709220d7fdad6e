"""A confirmed hang's shape: learnt from the Cases that hung and those that answered, it
blocks only Cases that share every feature of all the hangs, and none while a Case that
answered has them all."""

from __future__ import annotations

from pathlib import Path

from diagfuzz.core.case import Case, Layout
from diagfuzz.execution.hang_shapes import MIN_HANGS, HangShapes, describe
from diagfuzz.execution.parent import ProcessRunner
from diagfuzz.execution.timeouts import learnt_for


def case(sizes: tuple[int, ...], dtype: str = "float32", op: str = "diagonal") -> Case:
    return Case(op, sizes, 0, 0, 1, dtype, Layout.contiguous(sizes))


def test_the_shape_is_what_every_hang_shares_once_enough_hung() -> None:
    shapes = HangShapes()
    shapes.observe(case((3, 2, 2, 2)), hung=True)
    shapes.observe(case((3, 5, 2, 4), "float16"), hung=True)
    assert shapes.shape("diagonal") is None  # fewer than MIN_HANGS: chance shares features
    shapes.observe(case((3, 7, 1, 9), "bool"), hung=True)
    assert MIN_HANGS == 3
    shape = shapes.shape("diagonal")
    assert shape is not None and describe(shape) == "rank 4, dim 0 = 3"
    assert shapes.blocks(case((3, 1, 1, 1), "int32")) == shape
    assert shapes.blocks(case((4, 1, 1, 1))) is None  # another first dim
    assert shapes.blocks(case((3, 1, 1))) is None  # another rank
    assert shapes.blocks(case((3, 1, 1, 1), op="diag_embed")) is None  # another op
    assert shapes.blocked == {"diagonal": 1}
    assert shapes.blocked_by == {"diagonal": "rank 4, dim 0 = 3"}


def test_a_shape_an_answered_case_has_blocks_nothing() -> None:
    shapes = HangShapes()
    shapes.observe(case((3, 2, 2, 2)), hung=False)  # this one passed
    for sizes in ((3, 2, 2, 2), (3, 2, 2, 2), (3, 2, 2, 2)):
        shapes.observe(case(sizes), hung=True)  # a slow machine's stalls of it
    assert shapes.shape("diagonal") is None


def test_a_hang_of_another_shape_narrows_it_until_it_no_longer_separates() -> None:
    shapes = HangShapes()
    shapes.observe(case((2, 2, 2, 2)), hung=False)
    for sizes, dtype in (((3, 2, 2, 1), "float32"), ((3, 4, 2, 7), "float16"),
                         ((3, 6, 2, 3), "bool")):
        shapes.observe(case(sizes, dtype), hung=True)
    assert describe(shapes.shape("diagonal") or frozenset()) == "rank 4, dim 0 = 3, dim 2 = 2"
    shapes.observe(case((5, 5, 5, 5)), hung=True)  # narrower: rank 4 only
    assert shapes.shape("diagonal") is None  # the answered (2, 2, 2, 2) has both


def test_a_runner_answers_a_case_of_the_shape_without_running_it(tmp_path: Path) -> None:
    """The runner blocks only where asked, and only for an op with a confirmed hang."""
    learnt = learnt_for(None)
    for sizes, dtype in (((3, 2, 2, 2), "float32"), ((3, 4, 5, 6), "float16"),
                         ((3, 7, 1, 9), "bool")):
        learnt[1].shapes.observe(case(sizes, dtype), hung=True)
    with ProcessRunner("diagfuzz.impl:aten", "cpu", timeout=30, learnt=learnt,
                       workdir=tmp_path) as runner:
        runner.block_hang_shapes = True
        assert runner._blocked(case((3, 5, 5, 5))) is None  # no confirmed hang yet
        learnt[1].add("diagonal", "hang")
        first = runner.submit(case((2, 5, 5, 5)))  # another shape: judged
        second = runner.submit(case((3, 5, 5, 5)))  # answered after the Case in flight
        (t1, served), (t2, blocked) = runner.drain()
        runner.block_hang_shapes = False
        judged = runner.run(case((3, 5, 5, 5)))  # a re-run that must run: judged
        assert learnt[1].shapes.shape("diagonal") is None  # it passed: no longer the hang's
    assert blocked.kind == "hang" and blocked.details["blocked"] == "rank 4, dim 0 = 3"
    assert "not run" in blocked.message and "known_hang" in blocked.details
    assert (t1, t2) == (first, second)
    assert served.kind == "pass" and judged.kind == "pass"
    assert learnt[1].shapes.blocked == {"diagonal": 1}
