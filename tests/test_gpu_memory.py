"""An executor's GPU memory share (``diagfuzz.execution.gpu_memory``), with a stand-in for
``torch.cuda``: this machine has no GPU, and what is tested is the rule, not the allocator."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from diagfuzz.core.verdict import Verdict
from diagfuzz.execution.gpu_memory import MemoryShare, ran_out_of_memory
from tests.faulty.cases import square


class FakeOOM(RuntimeError):
    pass


def share_with(reserved: list[int], limit: int = 100) -> tuple[MemoryShare, list[str]]:
    calls: list[str] = []
    cuda = SimpleNamespace(empty_cache=lambda: calls.append("empty_cache"),
                           memory_reserved=lambda: reserved[0])
    share = MemoryShare("cpu")
    share._torch = SimpleNamespace(cuda=cuda, OutOfMemoryError=FakeOOM)
    share.limit = limit
    return share, calls


def oom() -> Verdict:
    return Verdict("error-parity", "error-parity", "impl raised OutOfMemoryError", square(0),
                   {"actual": {"type": "OutOfMemoryError", "message": "CUDA out of memory"}})


def test_cached_blocks_go_back_only_past_the_share() -> None:
    reserved = [50]
    share, calls = share_with(reserved)
    share.after_case()
    assert calls == []
    reserved[0] = 101
    share.after_case()
    assert calls == ["empty_cache"] and share.released == 1


def test_a_case_that_ran_out_of_memory_is_judged_once_more_after_giving_back() -> None:
    share, calls = share_with([0])
    answers = [oom(), Verdict.passed(square(0))]
    assert share.judge(lambda: answers.pop(0)).ok
    assert calls == ["empty_cache"] and share.rejudged == 1
    # Out of memory again: that is the verdict (no third try).
    answers = [oom(), oom()]
    assert ran_out_of_memory(share.judge(lambda: answers.pop(0)))


def test_the_oracle_running_out_of_memory_is_judged_once_more() -> None:
    share, calls = share_with([0])
    tries = []

    def judge() -> Verdict:
        tries.append(1)
        if len(tries) == 1:
            raise FakeOOM("CUDA out of memory")
        return Verdict.passed(square(0))

    assert share.judge(judge).ok and len(tries) == 2 and calls == ["empty_cache"]


def test_other_failures_are_judged_once() -> None:
    share, calls = share_with([0])
    wrong = Verdict("mismatch", "bitwise:aten", "1 of 9 differ", square(0),
                    {"actual": {"type": "RuntimeError"}})
    tries = []

    def judge() -> Verdict:
        tries.append(1)
        return wrong

    assert share.judge(judge) is wrong and len(tries) == 1 and calls == []
    with pytest.raises(ValueError):
        share.judge(lambda: (_ for _ in ()).throw(ValueError("not memory")))


def test_nothing_is_done_off_the_gpu() -> None:
    share = MemoryShare("cpu")
    share.after_case()
    assert share.judge(oom) == oom() and share.released == share.rejudged == 0
