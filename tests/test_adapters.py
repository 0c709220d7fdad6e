"""Tripwires for the private APIs diagfuzz uses: each fails loudly, naming what moved.

diagfuzz falls back to public paths where a private piece is missing (pipelining off,
draws the slow way, Triton's own launcher), so a Hypothesis or Triton that moved one would
only make runs slower or less deterministic, silently. These tests make it loud instead,
and pyproject.toml bounds both libraries to the versions proven here.
"""

from __future__ import annotations

import importlib

import hypothesis
import pytest
import triton
from hypothesis import given, settings
from hypothesis import strategies as st

from diagfuzz.adapters import hypothesis as hyp
from diagfuzz.adapters import triton as tri


def _has(module: str, name: str) -> bool:
    try:
        return hasattr(importlib.import_module(module), name)
    except ImportError:
        return False


@pytest.mark.parametrize(("module", "name"), [
    ("hypothesis.control", "current_build_context"),
    ("hypothesis.database", "choices_to_bytes"),
    ("hypothesis.database", "choices_from_bytes"),
    ("hypothesis.internal.reflection", "function_digest"),
    ("hypothesis.internal.conjecture.data", "ConjectureData"),
    ("hypothesis.internal.conjecture.providers", "_get_local_constants"),
    ("hypothesis.strategies._internal.lazy", "unwrap_strategies"),
    ("hypothesis.strategies._internal.numbers", "IntegersStrategy"),
    ("hypothesis.strategies._internal.strategies", "SampledFromStrategy"),
])
def test_hypothesis_still_has_what_diagfuzz_uses(module: str, name: str) -> None:
    assert _has(module, name), (f"Hypothesis {hypothesis.__version__} moved {module}.{name}: "
                                "update diagfuzz/adapters/hypothesis.py")


def test_the_hypothesis_adapter_works_end_to_end() -> None:
    assert hyp.unavailable() == ""
    assert hyp.pin_constant_pool()
    assert len(hyp.PRIMITIVE_TYPES) == 4
    seen: list[bytes] = []

    @settings(max_examples=3, database=None)
    @given(st.integers(0, 9))
    def record(x: int) -> None:
        seen.append(hyp.current_choices())

    record()
    assert len(seen) == 3 and all(isinstance(b, bytes) for b in seen)


@pytest.mark.parametrize(("module", "name"), [
    ("triton", "knobs"),
    ("triton.compiler", "ASTSource"),
    ("triton.backends.compiler", "GPUTarget"),
    ("triton.compiler.compiler", "CompiledKernel"),
])
def test_triton_still_has_what_diagfuzz_uses(module: str, name: str) -> None:
    assert _has(module, name), (f"Triton {triton.__version__} moved {module}.{name}: update "
                                "diagfuzz/adapters/triton.py")


def test_triton_compiled_kernels_keep_their_direct_launch_handles() -> None:
    from triton.compiler.compiler import CompiledKernel

    for name in ("_init_handles", "launch_metadata"):
        assert hasattr(CompiledKernel, name), (
            f"Triton {triton.__version__}: CompiledKernel.{name} is gone (used by "
            "diagfuzz/adapters/triton.py)")
    runtime = triton.knobs.runtime
    assert hasattr(runtime, "launch_enter_hook") and hasattr(runtime, "launch_exit_hook")
    assert not tri.listening(None) and tri.listening(lambda metadata: None)
