"""Test-suite wide setup."""

from __future__ import annotations

import dataclasses
import os
import sys
import tempfile
from pathlib import Path

# No torch at import: pytest imports this file early (``testpaths``) in every pytest run in
# the repository root, the README's fuzz command included, before any plugin's configure, and
# a fuzz worker launches its executors in its configure (torch's import cost 4 s there on an
# H200 host).


def _cache_bytecode() -> None:
    """Where the environment forbids writing bytecode (``PYTHONDONTWRITEBYTECODE``), cache
    it outside the tree instead (``PYTHONPYCACHEPREFIX``, a directory under the system's
    temporary directory unless one is set), for this process and every process it starts.

    The suite starts hundreds of Python processes (xdist workers, gates, fuzz runs, their
    executors, reproducers). Without a cache each one compiles every module of diagfuzz
    and the tests it imports from source, and each pytest among them rewrites the asserts
    of diagfuzz, Hypothesis and xdist (pytest plugins, rewritten whole) again: 1.5 CPU-s a
    pytest start on this 2-CPU machine, and about a fifth of the CPU time of the fuzz-run
    tests (tests/test_suite_run.py and tests/test_families_suite.py, -n 2: 167 CPU-s
    without a cache, 130 with one written from empty). Nothing is written into the tree;
    what is compiled is what runs, checked against its source as Python always does."""
    if not sys.dont_write_bytecode:
        return
    prefix = os.environ.get("PYTHONPYCACHEPREFIX") or str(
        Path(tempfile.gettempdir()) / f"diagfuzz-tests-pycache-{os.getuid()}")
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = prefix
    sys.pycache_prefix = prefix
    sys.dont_write_bytecode = False


_cache_bytecode()  # before xdist starts its workers: they and their children inherit it


def pytest_configure(config) -> None:
    from diagfuzz.adapters.hypothesis import pin_constant_pool

    # Derandomized tests must draw the same examples on every xdist worker, whatever test
    # modules it collected (diagfuzz/determinism.py).
    pin_constant_pool()
    if hasattr(config, "workerinput") or not config.getoption("numprocesses", None):
        _skip_dead_overflow_checks()  # where kernels run: not in an xdist controller


def _skip_dead_overflow_checks() -> None:
    """Triton's interpreter, with its default options (debug off), computes an int64 copy of
    every int32 add, sub and mul of a kernel and the bounds check on it
    (``sanitize_overflow``), then hands the check to ``device_assert``, which returns at once
    without debug: nothing is ever checked or raised, the work is thrown away. It was over
    half of a small-block kernel test's time (test_kernel_blocks.py: 68 s, 26 s without).
    Turned off only while debug is off, i.e. only where it checks nothing; with debug on it
    stays as Triton sets it (tests/test_interpreter_options.py checks both)."""
    from diagfuzz.core import runtime

    if not runtime.INTERPRET or runtime.COMPILE_ONLY:
        return
    from triton.runtime import interpreter

    builder = interpreter.interpreter_builder
    if not builder.options.debug:
        builder.options = dataclasses.replace(builder.options, sanitize_overflow=False)
