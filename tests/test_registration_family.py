"""diag_embed, diagonal_scatter, diag, triu and tril through aten: registration, dispatch
proof, autograd (where derivatives.yaml routes it) and torch.compile, bitwise against aten.

derivatives.yaml (torch 2.11 and 2.13):

* ``diag_embed``: ``self: grad.diagonal(offset, dim1, dim2)``: a view, so its backward
  launches nothing (AccumulateGrad may copy the view with aten's own kernels);
* ``diagonal_scatter``: ``self: diagonal_scatter(grad, zeros_like(src), offset, dim1, dim2)``
  (our kernel again) and ``src: grad.diagonal(offset, dim1, dim2)`` (a view);
* ``diag`` has no entry: it is CompositeImplicitAutograd, so autograd records the ops it
  calls, ``diag_embed`` for a 1-D input and ``diagonal_copy`` for a 2-D one, whose backward
  is ``diagonal_backward`` (our kernel);
* ``triu`` and ``tril``: ``self: grad.triu(diagonal)`` (``tril``): our kernel again.
"""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import diagfuzz.ops as ops
from tests.bitwise import bitwise_difference
from tests.family_table import storage_difference

COUNTED = ("diag_embed", "diagonal_scatter", "diagonal_copy", "diagonal_backward", "triu",
           "tril")


@pytest.fixture(autouse=True)
def _registration_off_after():
    yield
    ops.disable()


def _launches() -> dict[str, int]:
    return {op: ops.launches(op) for op in COUNTED}


def _moved(before: dict[str, int]) -> dict[str, int]:
    """Launches since ``before``, by op (ops that did not launch left out)."""
    return {op: n - before[op] for op, n in _launches().items() if n != before[op]}


def _leaf(shape, seed: int = 0, dtype=torch.float32) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=gen, dtype=dtype).to(ops.DEVICE).requires_grad_()


def _randn(shape, seed: int = 1) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=gen).to(ops.DEVICE)


def test_the_overloads_exist_and_are_registered() -> None:
    names = [name for name, _ in ops.registration.KERNELS]
    for name in ("diag_embed", "diag_embed.out", "diagonal_scatter", "diagonal_scatter.out",
                 "triu", "triu.out", "tril", "tril.out", "triu_", "tril_"):
        packet, _, overload = name.partition(".")
        getattr(getattr(torch.ops.aten, packet), overload or "default")  # exists here
        assert name in names
    assert not any(name.startswith("diag.") or name == "diag" for name in names)


def test_enable_disable_and_use_triton_switch_the_new_ops() -> None:
    x = _randn((3, 4))
    src = _randn(3)
    calls = (lambda: torch.diag_embed(x, 1), lambda: torch.diagonal_scatter(x, src),
             lambda: torch.diag(x[0]), lambda: torch.diag(x, -1))
    before = _launches()
    with ops.use_triton():
        for call in calls:
            call()
    assert _moved(before) == {"diag_embed": 2, "diagonal_scatter": 1, "diagonal_copy": 1}
    before = _launches()
    ops.enable()
    ops.disable()
    for call in calls:
        call()
    assert _moved(before) == {}


def test_out_overloads_through_aten_launch_our_kernels() -> None:
    x = _randn((3, 4))
    before = _launches()
    with ops.use_triton():
        out = torch.empty(0, device=ops.DEVICE)
        torch.ops.aten.diag_embed.out(x, 0, 0, 2, out=out)
        scattered = torch.empty(0, device=ops.DEVICE)
        torch.ops.aten.diagonal_scatter.out(x, _randn(3), 0, 0, 1, out=scattered)
        diag = torch.empty(0, device=ops.DEVICE)
        torch.diag(x[1], 2, out=diag)
    assert _moved(before) == {"diag_embed": 2, "diagonal_scatter": 1}
    with ops.use_triton(False):
        assert bitwise_difference(out, torch.diag_embed(x, 0, 0, 2)) == ""
        assert bitwise_difference(diag, torch.diag(x[1], 2)) == ""


def test_diag_decomposes_into_diag_embed_and_diagonal_copy() -> None:
    """What aten::diag calls on this torch: nothing to register for it."""
    class Calls(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.seen: list[str] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.seen.append(str(func))
            return func(*args, **(kwargs or {}))

    for shape, expected in (((3,), "aten.diag_embed.default"),
                            ((3, 4), "aten.diagonal_copy.default")):
        x = _randn(shape)
        with Calls() as calls:
            torch.diag(x, 1)
        assert calls.seen == [expected]


def test_diag_embed_backward_is_a_view_and_launches_nothing() -> None:
    x = _leaf((2, 3))
    g = _randn((5, 5, 2))
    with ops.use_triton(False):
        torch.diag_embed(x, 2, 1, 0).backward(g)
    expected, x.grad = x.grad, None
    with ops.use_triton():
        before = _launches()
        y = torch.diag_embed(x, 2, 1, 0)
        assert _moved(before) == {"diag_embed": 1}
        before = _launches()
        y.backward(g)
        assert _moved(before) == {}
    assert bitwise_difference(x.grad, expected) == ""


def test_diagonal_scatter_backward_reaches_our_kernel() -> None:
    a, b = _leaf((4, 5, 3)), _leaf((3, 4), seed=2)
    g = _randn((4, 5, 3), seed=3)
    with ops.use_triton(False):
        torch.diagonal_scatter(a, b, -1, 1, 0).backward(g)
    expected_a, expected_b = a.grad, b.grad
    a.grad = b.grad = None
    with ops.use_triton():
        before = _launches()
        y = torch.diagonal_scatter(a, b, -1, 1, 0)
        y.backward(g)
        # forward, and self's gradient: diagonal_scatter(grad, zeros_like(src)); src's
        # gradient is grad.diagonal(...), a view.
        assert _moved(before) == {"diagonal_scatter": 2}
    assert bitwise_difference(a.grad, expected_a) == ""
    assert bitwise_difference(b.grad, expected_b) == ""


def test_sum_backward_gives_an_expanded_grad_to_diagonal_scatter() -> None:
    """``.sum().backward()`` hands diagonal_scatter's backward an expanded grad (zero
    strides): aten's result is then a dense clone, not the grad's layout."""
    a, b = _leaf((3, 3)), _leaf((3,), seed=2)
    with ops.use_triton():
        before = _launches()
        torch.diagonal_scatter(a, b).sum().backward()
        assert _moved(before) == {"diagonal_scatter": 2}
    expected = torch.ones(3, 3, device=ops.DEVICE)
    expected.diagonal().zero_()
    assert bitwise_difference(a.grad, expected) == ""
    assert bitwise_difference(b.grad, torch.ones(3, device=ops.DEVICE)) == ""


@pytest.mark.parametrize("shape", [(4,), (3, 5)])
def test_diag_forward_and_backward_reach_our_kernels(shape) -> None:
    x = _leaf(shape)
    g_shape = (6, 6) if len(shape) == 1 else (3,)
    g = _randn(g_shape)
    with ops.use_triton(False):
        expected_y = torch.diag(x, 2)
        expected_y.backward(g)
    expected, x.grad = x.grad, None
    with ops.use_triton():
        before = _launches()
        y = torch.diag(x, 2)
        forward = _moved(before)
        before = _launches()
        y.backward(g)
        backward = _moved(before)
    assert bitwise_difference(y, expected_y) == ""
    assert bitwise_difference(x.grad, expected) == ""
    if len(shape) == 1:
        assert (forward, backward) == ({"diag_embed": 1}, {})
    else:
        assert (forward, backward) == ({"diagonal_copy": 1}, {"diagonal_backward": 1})


def test_scatter_through_aten_keeps_the_storage_layout() -> None:
    base = _randn((40,), seed=5)
    x = base[3:27].view(4, 6)[:, ::2]
    src = _randn((3,), seed=6)
    with ops.use_triton(False):
        expected = torch.diagonal_scatter(x, src)
    with ops.use_triton():
        actual = torch.diagonal_scatter(x, src)
    assert bitwise_difference(actual, expected) == ""
    assert storage_difference(actual, expected) == ""


def test_triu_and_tril_through_aten_launch_our_kernels_forward_and_backward() -> None:
    """The functional and .out overloads launch ours; the gradient, ``grad.triu(k)``
    (``tril``), launches ours again; every result is aten's, bit for bit."""
    for op, k in (("triu", 1), ("tril", -2)):
        x = _leaf((2, 4, 3))
        g = _randn((2, 4, 3), seed=4)
        with ops.use_triton(False):
            expected_y = getattr(torch, op)(x, k)
            expected_y.backward(g)
            expected_out = getattr(torch, op)(x.detach().mT, k)
        expected_grad, x.grad = x.grad, None
        out = torch.empty(0, device=ops.DEVICE)
        with ops.use_triton():
            before = _launches()
            y = getattr(torch, op)(x, k)
            y.backward(g)
            getattr(torch, op)(x.detach().mT, k, out=out)
            assert _moved(before) == {op: 3}
        assert bitwise_difference(y, expected_y) == ""
        assert bitwise_difference(x.grad, expected_grad) == ""
        assert bitwise_difference(out, expected_out) == ""


@pytest.mark.compile
def test_torch_compile_forward_and_backward_match_eager_bitwise() -> None:
    """One compiled function of all five ops: its outputs and gradients equal eager's
    with the registration on (which runs our kernels), bit for bit."""
    def f(x, v, w, g):
        embedded = torch.diag_embed(v, 1, 0, 2)
        scattered = torch.diagonal_scatter(x, w, -1, 1, 0)
        square = torch.diag(v[0])
        taken = torch.diag(x[0], 1)
        upper, lower = torch.triu(x, 1), torch.tril(w, -1)
        loss = ((embedded * g).sum() + (scattered * scattered).sum()
                + (square * 3).sum() + (taken * taken).sum() + (upper * upper).sum()
                + (lower * 5).sum())
        return loss, embedded, scattered, square, taken, upper, lower

    def leaves(seed):
        return (_leaf((4, 5, 3), seed), _leaf((2, 4), seed + 1), _leaf((3, 4), seed + 2))

    g = _randn((5, 2, 5), seed=9)
    eager, compiled = leaves(10), leaves(10)
    with ops.use_triton():
        before = _launches()
        eager_out = f(*eager, g)
        eager_out[0].backward()
        assert set(_moved(before)) == set(COUNTED)
        compiled_out = torch.compile(f, fullgraph=True)(*compiled, g)
        compiled_out[0].backward()
    for got, want in zip(compiled_out[1:], eager_out[1:], strict=True):
        assert bitwise_difference(got, want) == ""
    for got, want in zip(compiled, eager, strict=True):
        assert bitwise_difference(got.grad, want.grad) == ""
