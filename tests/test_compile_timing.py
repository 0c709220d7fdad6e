"""torch.compile's own compile seconds, as an executor reports them and the summary says them:
a compiled impl's gate time is mostly inductor's, and its maintainer needs to see that."""

from __future__ import annotations

import sys
import types

import pytest
import torch

from diagfuzz.execution import timing
from diagfuzz.gate.outputs import time_lines


def test_no_compile_seconds_where_dynamo_was_never_loaded(monkeypatch) -> None:
    monkeypatch.delitem(sys.modules, "torch._dynamo.utils", raising=False)
    assert timing.torch_compile_seconds() == 0.0


def test_compile_seconds_are_dynamos_own_record(monkeypatch) -> None:
    fake = types.SimpleNamespace(compilation_time_metrics={
        "_compile.compile_inner": [1.5, 0.25], "compile_fx_inner": [9.0]})
    monkeypatch.setitem(sys.modules, "torch._dynamo.utils", fake)
    assert timing.torch_compile_seconds() == pytest.approx(1.75)


def test_a_real_compile_is_counted() -> None:
    """The timer's name is torch's: a compile in this process moves it."""
    before = timing.torch_compile_seconds()
    compiled = torch.compile(lambda x: x.diagonal().clone(), backend="eager", dynamic=False)
    compiled(torch.arange(9.0).reshape(3, 3))
    assert timing.torch_compile_seconds() > before


def test_the_summary_gives_the_compiles_share_of_executor_time() -> None:
    group = {"executors": 2, "startup_s": 2.0, "import_s": 1.0, "warmup_s": 1.0,
             "first_calls_s": 4.0, "judging_s": 12.0, "compile_s": 15.0,
             "first_calls": 3, "judged": 40}
    text = "\n".join(time_lines({"executors": {"covering array": group}}))
    assert "torch.compile's own compiles 15.0 s (75 %)" in text
    group["compile_s"] = 0.0
    text = "\n".join(time_lines({"executors": {"covering array": group}}))
    assert "torch.compile" not in text
