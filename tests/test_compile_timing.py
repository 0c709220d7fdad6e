"""torch.compile's compile seconds, as an executor reports them and the summary says them:
a compiled impl's gate time is mostly inductor's, and its maintainer needs to see that."""

from __future__ import annotations

import sys
import types

import pytest
import torch

from diagfuzz.core import compile_time
from diagfuzz.gate.outputs import time_lines


def test_no_compile_seconds_where_dynamo_was_never_loaded(monkeypatch) -> None:
    monkeypatch.delitem(sys.modules, "torch._dynamo.utils", raising=False)
    monkeypatch.setattr(compile_time, "_banked", 0.0)
    assert compile_time.seconds() == 0.0
    assert "torch._dynamo.utils" not in sys.modules  # reading it loads nothing


def test_compile_seconds_are_dynamos_own_record(monkeypatch) -> None:
    fake = types.SimpleNamespace(compilation_time_metrics={
        "_compile.compile_inner": [1.5, 0.25], "compile_fx_inner": [9.0]})
    monkeypatch.setitem(sys.modules, "torch._dynamo.utils", fake)
    monkeypatch.setattr(compile_time, "_banked", 0.0)
    assert compile_time.seconds() == pytest.approx(1.75)


def test_a_real_compile_is_counted_and_kept_across_dynamos_reset(monkeypatch) -> None:
    """The timer's name is torch's, and ``torch._dynamo.reset()`` (which the parity oracle
    calls before every Case) clears it: what was banked before it stays counted."""
    monkeypatch.setattr(compile_time, "_banked", 0.0)
    torch._dynamo.reset()
    compiled = torch.compile(lambda x: x.diagonal().clone(), backend="eager", dynamic=False)
    compiled(torch.arange(9.0).reshape(3, 3))
    first = compile_time.seconds()
    assert first > 0.0
    compile_time.bank()
    torch._dynamo.reset()
    assert compile_time.seconds() == pytest.approx(first)
    compiled = torch.compile(lambda x: x.diagonal(1).clone(), backend="eager", dynamic=False)
    compiled(torch.arange(9.0).reshape(3, 3))
    assert compile_time.seconds() > first


def test_the_summary_gives_the_compiles_share_of_executor_time() -> None:
    group = {"executors": 2, "startup_s": 2.0, "import_s": 1.0, "warmup_s": 1.0,
             "first_calls_s": 4.0, "judging_s": 12.0, "compile_s": 15.0,
             "first_calls": 3, "judged": 40}
    text = "\n".join(time_lines({"executors": {"covering array": group}}))
    assert "torch.compile's compiles (the impl's and the parity stage's) 15.0 s (75 %)" in text
    group["compile_s"] = 0.0
    text = "\n".join(time_lines({"executors": {"covering array": group}}))
    assert "torch.compile" not in text
