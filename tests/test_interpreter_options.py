"""The premise of tests/conftest.py's interpreter setting: with debug off, Triton's
interpreter's ``sanitize_overflow`` checks nothing, so the suite turns it off and loses no
check. Should a Triton release start checking without debug, this fails first."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from diagfuzz.core import runtime

pytestmark = pytest.mark.skipif(not runtime.INTERPRET or runtime.COMPILE_ONLY,
                                reason="Triton's interpreter runs only without a CUDA GPU")


def _overflowing_kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def times_65536(x_ptr, out_ptr, N: tl.constexpr):
        offs = tl.arange(0, N)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs) * 65536)  # int32 overflows

    return times_65536


def _run(kernel, options) -> torch.Tensor:
    from triton.runtime import interpreter

    builder = interpreter.interpreter_builder
    before = builder.options
    builder.options = options
    try:
        x = torch.arange(1, 9, dtype=torch.int32) * 40_000
        out = torch.empty_like(x)
        kernel[(1,)](x, out, N=8)
        return out
    finally:
        builder.options = before


def test_overflow_checks_only_run_with_debug() -> None:
    from triton.runtime import interpreter

    kernel = _overflowing_kernel()
    options = interpreter.interpreter_builder.options
    assert not options.debug and not options.sanitize_overflow  # as tests/conftest.py sets
    wrapped = (torch.arange(1, 9, dtype=torch.int64) * 40_000 * 65536).to(torch.int32)
    for sanitize in (True, False):  # debug off: both silent, both wrap the same way
        out = _run(kernel, dataclasses.replace(options, sanitize_overflow=sanitize))
        assert torch.equal(out, wrapped)
    with pytest.raises(Exception, match="int32 overflow detected"):
        _run(kernel, dataclasses.replace(options, sanitize_overflow=True, debug=True))
