"""diagfuzz.core.dispatch: which aten registrations are watched, and what a watched kernel
runs inside ``aten_only`` and ``under_test``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch

from diagfuzz.core import dispatch
from diagfuzz.oracles.sentinel import SentinelAllocations


@pytest.fixture
def lib() -> Iterator[torch.library.Library]:
    library = torch.library.Library("aten", "IMPL")
    yield library
    if library.m is not None:
        library._destroy()


def _registered_here(op: str) -> list[dispatch.Registration]:
    return [r for r in dispatch.overrides() if r.op == op and __file__.endswith(
        r.where.split(":")[0].split("/")[-1])]


def test_a_user_registration_is_watched_and_counted(lib: torch.library.Library) -> None:
    def fill(self: torch.Tensor, value: Any) -> torch.Tensor:
        return self.zero_()

    lib.impl("fill_.Scalar", fill, "CPU")
    (found,) = _registered_here("aten::fill_.Scalar")
    assert found.key == "CPU" and found.module == "tests" and found.active
    x = torch.empty(3)
    with dispatch.under_test():
        x.fill_(7.0)
    assert found.calls == 1 and x.tolist() == [0.0, 0.0, 0.0]
    with dispatch.aten_only():
        x.fill_(7.0)
    assert found.calls == 1 and x.tolist() == [7.0, 7.0, 7.0]
    lib._destroy()
    assert not found.active


def test_torch_library_impl_decorator_names_the_user_file() -> None:
    @torch.library.impl("aten::diag_embed", "CPU")
    def embed(x: torch.Tensor, offset: int = 0, dim1: int = -2,
              dim2: int = -1) -> torch.Tensor:
        raise RuntimeError("user kernel")

    try:
        (found,) = _registered_here("aten::diag_embed")
        assert found.key == "CPU" and found.where.startswith("tests/test_dispatch_watch.py")
        with dispatch.aten_only():
            assert torch.diag_embed(torch.ones(2)).shape == (2, 2)
        with dispatch.under_test(), pytest.raises(RuntimeError, match="user kernel"):
            torch.diag_embed(torch.ones(2))
    finally:
        for library in torch.library._keep_alive:
            if getattr(library, "ns", "") == "aten" and library.m is not None:
                library._destroy()


def test_the_oracle_own_registrations_are_not_watched() -> None:
    before = len(dispatch.REGISTRATIONS)
    with SentinelAllocations(0xA5):
        torch.empty(4)
    assert len(dispatch.REGISTRATIONS) == before


def test_a_number_for_a_tensor_argument_reaches_aten_own_kernel(
        lib: torch.library.Library) -> None:
    """torch hands a Python kernel a wrapped number as a number; aten's kernel takes a
    tensor there (``copy_(tensor, 2.5)`` from ``x[...] = 2.5``)."""
    def copy(self: torch.Tensor, src: Any, non_blocking: bool = False) -> torch.Tensor:
        raise RuntimeError("library copy_")

    lib.impl("copy_", copy, "CPU")
    x = torch.zeros(3)
    with dispatch.aten_only():
        x[1] = 2.5
    assert x.tolist() == [0.0, 2.5, 0.0]
    with dispatch.under_test(), pytest.raises(RuntimeError, match="library copy_"):
        x[1] = 1.0


def test_modes_nest_and_restore() -> None:
    assert not dispatch.judging_with_aten()
    with dispatch.aten_only():
        assert dispatch.judging_with_aten()
        with dispatch.under_test():
            assert not dispatch.judging_with_aten()
            with dispatch.aten_only():
                assert dispatch.judging_with_aten()
        assert dispatch.judging_with_aten()
    assert not dispatch.judging_with_aten()
