"""The Launcher's direct launches: which compiled kernel a call reuses, and when it must not.

On a GPU a Launcher launches a variant's compiled kernel directly after its first launch
(``ops._tiling.Launcher``), and a plan it has launched keeps that kernel for its repeated
calls (``LaunchPlan.launched``). A wrong reuse would run a kernel compiled for another word
size, alignment or device: bits a user would see. Here Triton's binder and the direct
launch are replaced by recorders, so the routing itself is checked on any machine; the
GPU kernel tests prove the bits.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from diagfuzz.ops import _tiling
from diagfuzz.ops._tiling import Launcher, LaunchPlan


class FakeKernel:
    """Triton's ``kernel[grid](...)``: records each call that went through the binder."""

    def __init__(self) -> None:
        self.bound: list[tuple[Any, ...]] = []

    def __getitem__(self, grid: tuple[int, ...]) -> Any:
        def call(*args: Any, **kwargs: Any) -> str:
            self.bound.append(args)
            return f"compiled#{len(self.bound)}"
        return call


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """Direct launches, recorded as (compiled kernel, n_programs, args); the current device
    is the CPU tensors' (-1), so the direct path runs on this machine."""
    launches: list[tuple[Any, ...]] = []
    monkeypatch.setattr(_tiling, "direct_handles", lambda compiled: (compiled, None, None,
                                                                      None))
    monkeypatch.setattr(_tiling, "launch_direct",
                        lambda direct, n, stream, args: launches.append((direct[0], n, args)))
    monkeypatch.setattr(torch._C, "_cuda_getDevice", lambda: -1, raising=False)
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda device: 0,
                        raising=False)
    return launches


def plan() -> LaunchPlan:
    return LaunchPlan((8,), 3, (8, 1), {"BLOCK": 16}, 4, ("n", "stride"))


def launcher() -> tuple[Launcher, FakeKernel]:
    kernel = FakeKernel()
    launch = Launcher(kernel)
    launch.direct = True  # as on a GPU
    return launch, kernel


def recorded_plan() -> tuple[Launcher, FakeKernel, LaunchPlan, tuple[torch.Tensor, ...]]:
    """A launcher whose plan has launched twice on two tensors: compiled, then recorded."""
    launch, kernel = launcher()
    p = plan()
    tensors = (torch.empty(8), torch.empty(64))
    for _ in range(2):
        launch(p, tensors)
    return launch, kernel, p, tensors


def test_a_repeated_plan_launches_its_recorded_kernel_with_this_calls_pointers(
        recorded: list[tuple[Any, ...]]) -> None:
    launch, kernel = launcher()
    p = plan()
    out, source = torch.empty(8), torch.empty(64)
    launch(p, (out, source))  # compiles: through Triton's binder
    assert len(kernel.bound) == 1 and not recorded
    launch(p, (out, source))  # the launcher's record of the variant: direct, and kept
    out2, source2 = torch.empty(8), torch.empty(64)
    launch(p, (out2, source2))  # the plan's own record
    assert len(kernel.bound) == 1
    assert [r[0] for r in recorded] == ["compiled#1", "compiled#1"]
    assert recorded[-1] == ("compiled#1", 3, (out2.data_ptr(), source2.data_ptr(), 8, 1, 16))
    assert len(p.launched) == 1


def test_a_plan_never_reuses_a_kernel_of_another_word_size_or_alignment(
        recorded: list[tuple[Any, ...]]) -> None:
    launch, kernel = launcher()
    p = plan()
    source = torch.empty(64)
    for _ in range(2):
        launch(p, (torch.empty(8, dtype=torch.float32), source))
    launch(p, (torch.empty(8, dtype=torch.float64), source))  # another word size: compiles
    assert len(kernel.bound) == 2
    aligned = torch.empty(9, dtype=torch.float32)
    assert aligned.data_ptr() % 16 == 0
    launch(p, (aligned[1:], source))  # 4 bytes past 16-byte alignment: compiles
    assert len(kernel.bound) == 3
    launch(p, (aligned[1:], source))
    launch(p, (aligned[1:], source))  # now the plan's record of the unaligned variant
    assert len(kernel.bound) == 3
    assert recorded[-1][0] == "compiled#3"
    assert len(p.launched) == 2  # float32 aligned, float32 unaligned


def test_a_call_on_another_device_than_the_current_one_takes_the_guarded_path(
        recorded: list[tuple[Any, ...]], monkeypatch: pytest.MonkeyPatch) -> None:
    launch, kernel, p, (out, source) = recorded_plan()
    monkeypatch.setattr(torch._C, "_cuda_getDevice", lambda: 0, raising=False)
    taken = len(recorded)
    launch(p, (out, source))  # the tensors' device (-1) is not current: not the plan's record
    assert len(recorded) == taken + 1  # the launcher's own keyed lookup launched it
    assert len(kernel.bound) == 1


def test_a_launcher_whose_direct_launch_fails_falls_back_to_tritons_path_for_good(
        recorded: list[tuple[Any, ...]], monkeypatch: pytest.MonkeyPatch) -> None:
    launch, kernel, p, (out, source) = recorded_plan()

    def broken(*args: Any) -> None:
        raise TypeError("a Triton whose launcher takes other arguments")

    monkeypatch.setattr(_tiling, "launch_direct", broken)
    launch(p, (out, source))
    assert launch.direct is False
    assert len(kernel.bound) == 2  # this call went through Triton's own path
