"""The in-place oracle (``OpSpec.inplace``: triu_, tril_) fails each way an in-place kernel
goes wrong, and passes in-place ops written the plain way (torch's own ``x.triu_(k)``, and
diagfuzz's Triton kernels through aten) on the layouts where in-place goes wrong: permuted,
sliced with a storage offset, expanded (elements sharing memory), huge offsets, bool."""

from __future__ import annotations

import types
from typing import Any

import pytest
import torch

import examples.plain_torch as plain
from diagfuzz.core.case import Case, Layout
from diagfuzz.core.runtime import DEVICE
from diagfuzz.impl import load_impl
from diagfuzz.oracles import check


def _cases(op: str) -> list[Case]:
    return [
        Case(op, (4, 5), 0, -2, -1, "float32", Layout.contiguous((4, 5))),
        Case(op, (4, 5), -1, -2, -1, "float32", Layout((4, 5), (1, 4), 0, ("permuted",))),
        Case(op, (3, 4), 1, -2, -1, "float32", Layout((3, 4), (10, 2), 3, ("sliced",))),
        Case(op, (2, 3, 3), 0, -2, -1, "float32", Layout((2, 3, 3), (0, 3, 1), 0,
                                                          ("expanded",))),
        Case(op, (3, 3), 0, -2, -1, "float32", Layout((3, 3), (1, 0), 0, ("expanded",))),
        Case(op, (3, 4), 2**40, -2, -1, "int64", Layout.contiguous((3, 4))),
        Case(op, (3, 4), -1, -2, -1, "bool", Layout((3, 4), (1, 3), 0, ("permuted",))),
    ]


def _impl(**methods: Any) -> Any:
    """plain_torch with ``methods`` replaced."""
    impl = types.SimpleNamespace(**{k: getattr(plain, k) for k in dir(plain)
                                    if not k.startswith("__")})
    impl.uses_triton_registration = False
    for name, method in methods.items():
        setattr(impl, name, method)
    return impl


def _storage(x: torch.Tensor) -> torch.Tensor:
    return torch.empty(0, dtype=x.dtype).set_(x.untyped_storage())


def _writes_before_view(x: torch.Tensor, k: int = 0) -> torch.Tensor:
    if x.storage_offset():
        _storage(x)[:1].fill_(7)
    return x.triu_(k)


def _fills_shared(x: torch.Tensor, k: int = 0) -> torch.Tensor:
    return x.fill_(5) if 0 in x.stride() else x.triu_(k)


def _masks_by_multiplication(x: torch.Tensor, k: int = 0) -> torch.Tensor:
    if x.dtype.is_floating_point and 0 not in x.stride():
        return x.mul_(torch.ones_like(x).triu(k))
    return x.triu_(k)


def _on_a_contiguous_copy(x: torch.Tensor, k: int = 0) -> torch.Tensor:
    if x.is_contiguous():
        return x.triu_(k)
    x.contiguous().triu_(k)  # never copied back
    return x


def _replaces_the_storage(x: torch.Tensor, k: int = 0) -> torch.Tensor:
    return x.set_(torch.triu(x, k)) if x.is_contiguous() else x.triu_(k)


def _writes_nothing_where_shared(x: torch.Tensor, k: int = 0) -> torch.Tensor:
    if 0 in x.stride():
        torch.autograd.graph.increment_version(x)
        return x
    return x.triu_(k)


BROKEN = {
    "returns a new tensor": (_impl(triu_=lambda x, k=0: torch.triu(x, k)), "inplace:returned"),
    "writes behind autograd's back": (_impl(triu_=lambda x, k=0: (x.data.triu_(k), x)[1]),
                                      "inplace:version"),
    "writes before its view": (_impl(triu_=_writes_before_view), "inplace:outside-view"),
    "fills memory elements share": (_impl(triu_=_fills_shared), "inplace:overlap"),
    "masks by multiplication": (_impl(triu_=_masks_by_multiplication), "bitwise:aten"),
    "replaces the storage": (_impl(triu_=_replaces_the_storage), "inplace:storage"),
    "writes nothing where memory is shared": (_impl(triu_=_writes_nothing_where_shared),
                                              "inplace:overlap"),
    "zeroes a contiguous copy": (_impl(triu_=_on_a_contiguous_copy), "bitwise:aten"),
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_each_in_place_bug_fails_with_its_check(name: str) -> None:
    impl, wanted = BROKEN[name]
    verdicts = [check(case, impl, "cpu") for case in _cases("triu_")]
    assert wanted in {v.check for v in verdicts}, [(v.case.layout.kinds, v.check)
                                                    for v in verdicts]
    assert all(v.kind in ("pass", "mismatch") for v in verdicts)


@pytest.mark.parametrize("spec", ["examples.plain_torch:impl", "diagfuzz.impl:triton_aten",
                                  "diagfuzz.impl:aten"])
@pytest.mark.parametrize("op", ["triu_", "tril_"])
def test_in_place_ops_written_the_plain_way_pass(spec: str, op: str) -> None:
    impl = load_impl(spec)  # diagfuzz's kernels serve the GPU where there is one
    verdicts = [check(case, impl, DEVICE) for case in _cases(op)]
    assert [v.kind for v in verdicts] == ["pass"] * len(verdicts), [
        (v.case.layout.kinds, v.check, v.message) for v in verdicts if v.kind != "pass"]


@pytest.mark.parametrize("n", range(4))
def test_the_references_never_write_the_cases_own_input(n: int) -> None:
    """The references run on twins: planning an in-place Case leaves its materialised
    input's storage as it was (the implementation and the relations read it)."""
    from diagfuzz.core.dispatch import aten_only
    from diagfuzz.core.verdict import Verdict
    from diagfuzz.oracles.checks import plan_valid
    from diagfuzz.specs import arguments

    case = _cases("triu_")[n]
    host = arguments(case, "cpu")
    before = _storage(host["input"]).clone()
    with aten_only():
        plan = plan_valid(case, host)
    assert plan is not None and not isinstance(plan, Verdict)
    assert torch.equal(_storage(host["input"]).view(torch.uint8),
                       before.view(torch.uint8))
