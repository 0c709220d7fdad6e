"""The oracle's per-Case cost stays low without losing any check.

What made a Case cheaper (benchmarks/bench_throughput.py measures it) is pinned here as
behaviour: one Triton launch per non-empty valid Case (two only when every byte value occurs),
the registration switched off and on at most once per Case, the worker's startup heap kept
out of the garbage collector's scans, and the fast paths (one
``torch.equal`` before any position search, the first preferred sentinel tried alone, the
diagonal view taken without a switch) deciding exactly what the slow paths decide.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from typing import Any

import pytest
import torch

import diagfuzz.ops as ops
import diagfuzz.ops.registration as registration
from diagfuzz import oracles
from diagfuzz.core import dispatch
from diagfuzz.core.bits import bits, differing, same_bits
from diagfuzz.core.case import Case, Layout, Values, materialise
from diagfuzz.execution.runner import InProcessRunner
from diagfuzz.impl import aten, triton_aten
from diagfuzz.oracles.checks import _relations
from diagfuzz.oracles.sentinel import PREFERRED, choose_sentinel
from diagfuzz.specs import common, index_reference
from diagfuzz.specs import diagonal_backward as backward_spec

DEVICE = ops.DEVICE


def fwd(sizes: tuple[int, ...], offset: int = 0, dtype: str = "float32",
        **values: Any) -> Case:
    return Case("diagonal", sizes, offset, 0, 1, dtype, Layout.contiguous(sizes),
                Values(**values))


def bwd(sizes: tuple[int, ...], offset: int = 0, dtype: str = "float32") -> Case:
    geo = index_reference.geometry(sizes, offset, 0, 1)
    return Case("diagonal_backward", sizes, offset, 0, 1, dtype, Layout.contiguous(geo.shape),
                Values())


def launched(case: Case, impl: Any = triton_aten) -> int:
    """Triton launches one ``oracles.check`` of ``case`` made (the Case must pass)."""
    before = sum(ops._counters.LAUNCHES.values())
    verdict = oracles.check(case, impl, DEVICE)
    assert verdict.ok, str(verdict)
    return sum(ops._counters.LAUNCHES.values()) - before


@pytest.mark.parametrize("case, launches", [
    (fwd((3, 4), 1), 1),
    (bwd((3, 4), -1, "int16"), 1),
    (bwd((2, 3, 4), 0, "complex128"), 1),
    (fwd((3, 4), 9), 0),  # empty diagonal: nothing to launch
    (fwd((3, 4)).replace(dim2=5, invalid="dim_above_range"), 0),
])
def test_one_launch_per_case(case: Case, launches: int) -> None:
    assert launched(case) == launches


def test_two_launches_only_when_every_byte_value_occurs() -> None:
    specials = tuple((i * 257, i) for i in range(256))
    case = fwd((256, 256), 0, "uint8", specials=specials)
    assert choose_sentinel(materialise(case).diagonal()) is None
    assert launched(case) == 2


@pytest.fixture
def switches(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every real change of the registration (off->on "on", on->off "off"), in order."""
    seen: list[str] = []
    real_enable, real_disable = registration.enable, registration.disable

    def enable() -> None:
        if not registration.enabled():
            seen.append("on")
        real_enable()

    def disable() -> None:
        if registration.enabled():
            seen.append("off")
        real_disable()

    monkeypatch.setattr(registration, "enable", enable)
    monkeypatch.setattr(registration, "disable", disable)
    monkeypatch.setattr(ops, "enable", enable)
    monkeypatch.setattr(ops, "disable", disable)
    yield seen


@pytest.mark.parametrize("case", [fwd((4, 4), 1), bwd((3, 5)), bwd((3, 5), 0, "int32")],
                         ids=["diagonal", "backward-autograd", "backward-aten"])
def test_a_case_re_registers_nothing(case: Case, switches: list[str]) -> None:
    """The references defer the registration (``diagfuzz.core.dispatch.aten_only``, a
    flag) instead of switching it off and on, which re-registers every kernel (~240 us on
    the H200 hosts, a third of a Case)."""
    with ops.use_triton(True):
        switches.clear()
        assert oracles.check(case, triton_aten, DEVICE).ok
        assert switches == []
        assert ops.enabled()


@pytest.mark.parametrize("was_on", [True, False])
def test_check_leaves_the_registration_as_an_aten_impl_found_it(was_on: bool) -> None:
    with ops.use_triton(was_on):
        for case in (fwd((4, 4), 1), bwd((3, 5))):
            assert oracles.check(case, aten, DEVICE).ok
            assert ops.enabled() == was_on


def test_diagonal_view_is_taken_again_with_aten_own_kernels_if_not_a_view(
        monkeypatch: pytest.MonkeyPatch) -> None:
    real = torch.diagonal

    def copies_while_on(t: torch.Tensor, *args: Any) -> torch.Tensor:
        out = real(t, *args)
        return out if dispatch.judging_with_aten() else out.clone()

    monkeypatch.setattr(torch, "diagonal", copies_while_on)
    case = bwd((3, 3))
    grad = materialise(case, DEVICE)  # where the registration serves it (a GPU's CPU: never)
    result = aten.diagonal_backward(grad, [3, 3], 0, 0, 1)
    with ops.use_triton(True):
        view = common.diagonal_view(case, result)
        assert view._is_view() and view.untyped_storage().data_ptr() == result.data_ptr()
        assert _relations(case, {"grad_output": grad}, result) is None
        result[1, 1] = 7.0
        found = backward_spec.round_trip(case, {"grad_output": grad}, result)
    assert found and found[1]["first"][0]["index"] == [1]


def _words_tensor(dtype: torch.dtype, words: list[int]) -> torch.Tensor:
    width = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[
        min(dtype.itemsize, 8)]
    raw = torch.tensor(words, dtype=torch.int64).to(width)
    if dtype.itemsize == 16:
        return raw.reshape(-1, 2).view(torch.complex128).reshape(-1)
    return raw.view(dtype)


def _uniform(byte: int, width: int) -> int:
    value = int.from_bytes(bytes([byte]) * width, "little")
    return value - (1 << (8 * width)) if value >= 1 << (8 * width - 1) else value


def _choose_by_unique(reference: torch.Tensor) -> int | None:
    """The slow definition: every uniform element's byte is taken; first free preference."""
    raw = bits(reference).view(torch.uint8).reshape(reference.numel(), -1)
    uniform = (raw == raw[:, :1]).all(dim=1)
    taken = set(raw[uniform, 0].unique().tolist())
    return next((b for b in (*PREFERRED, *range(256)) if b not in taken), None)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.bool, torch.float16, torch.float32,
                                   torch.int64, torch.complex128])
def test_choose_sentinel_fast_path_decides_as_the_unique_search(dtype: torch.dtype) -> None:
    width = min(dtype.itemsize, 8)
    per = 2 if dtype.itemsize == 16 else 1
    gen = torch.Generator().manual_seed(5)
    for taken in ((), PREFERRED[:1], PREFERRED[:3], (0xA5, 0x00)):
        words = torch.randint(-100, 100, (40 * per,), generator=gen).tolist()
        for i, byte in enumerate(taken):
            words[i * per:(i + 1) * per] = [_uniform(byte, width)] * per
        if dtype == torch.bool:
            words = [w & 1 for w in words]
        ref = _words_tensor(dtype, words)
        assert choose_sentinel(ref) == _choose_by_unique(ref), (dtype, taken)
    # Half a complex128 element uniform is not a uniform element.
    half = _words_tensor(torch.complex128, [_uniform(0xA5, 8), 0])
    assert choose_sentinel(half) == _choose_by_unique(half) == 0xA5


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.bool,
                                   torch.complex128, torch.int8])
def test_same_bits_is_no_differing_position(dtype: torch.dtype) -> None:
    base = torch.zeros(6, dtype=dtype)
    assert same_bits(base, base.clone()) and not len(differing(base, base.clone()))
    words = bits(base).clone()
    words[4, -1] = 1  # one bit of one element (complex128: the imaginary word)
    other = words.reshape(-1).view(bits(base).dtype)
    other = (other.reshape(-1, 2).view(torch.complex128).reshape(-1)
             if dtype == torch.complex128 else other.view(dtype))
    assert not same_bits(base, other)
    assert differing(base, other).tolist() == [4]


def test_runner_freezes_the_startup_heap_and_still_collects_new_cycles() -> None:
    runner = InProcessRunner("diagfuzz.impl:aten", "cpu")
    assert gc.get_freeze_count() > 1000  # torch, Hypothesis, pytest: out of the scans

    class Node:
        peer: Any = None

    node = Node()
    node.peer = node  # a cycle made after the freeze is garbage the collector still finds
    gone = weakref.ref(node)
    del node
    gc.collect()
    assert gone() is None
    assert runner.run(fwd((3, 3))).ok
    runner.close()
