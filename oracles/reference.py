"""References with diagfuzz's registration switched off: aten directly, and torch.autograd.

The gradient reference is what a user actually gets: ``torch.diagonal(x, ...)`` on an input
that requires grad, ``.backward(grad_output)``, then ``x.grad``. Dtypes autograd cannot
differentiate (integers, bool, and float8 where autograd refuses) call
``aten.diagonal_backward`` directly. The reference never shares a buffer with the
implementation: it runs on tensors of its own.
"""

from __future__ import annotations

from typing import Any

import torch

import diagfuzz.ops as ops
from diagfuzz.case import Case
from diagfuzz.impl import AtenReference

_aten = torch.ops.aten


def call_op(impl: Any, case: Case, args: dict[str, Any]) -> Any:
    """Call ``impl``'s op for ``case`` with ``args`` (from ``call_arguments``), ``.out`` too."""
    out = args.get("out")
    if case.op == "diagonal":
        positional = (args["input"], args["offset"], args["dim1"], args["dim2"])
        if out is not None:
            return impl.diagonal_out(*positional, out=out)
        return impl.diagonal(*positional)
    positional = (args["grad_output"], args["input_sizes"], args["offset"], args["dim1"],
                  args["dim2"])
    if out is not None:
        return impl.diagonal_backward_out(*positional, out=out)
    return impl.diagonal_backward(*positional)


class Aten(AtenReference):
    """aten's kernels with the registration off: the reference for every Case.

    ``diagfuzz.impl.AtenReference`` plus the ``.out`` overloads, which the reference needs
    for ``.out`` Cases (as an impl under test, ``diagfuzz.impl:aten`` skips them).
    """

    def diagonal_out(self, x, offset=0, dim1=0, dim2=1, *, out):
        with ops.use_triton(False, tensors=(x, out)):
            return _aten.diagonal_copy.out(x, offset, dim1, dim2, out=out)

    def diagonal_backward_out(self, grad_output, input_sizes, offset, dim1, dim2, *, out):
        with ops.use_triton(False, tensors=(grad_output, out)):
            return _aten.diagonal_backward.out(grad_output, input_sizes, offset, dim1, dim2,
                                               out=out)


ATEN = Aten()


def differentiable(dtype: torch.dtype) -> bool:
    """Whether autograd can differentiate a tensor of ``dtype``."""
    return dtype.is_floating_point or dtype.is_complex


def autograd_gradient(grad: torch.Tensor, case: Case) -> torch.Tensor | None:
    """``x.grad`` after ``torch.diagonal(x, ...).backward(grad)``; None if autograd refuses.

    Registration off. Only for differentiable dtypes; the input ``x`` is zeros (its values do
    not enter a linear op's gradient).
    """
    if not differentiable(grad.dtype):
        return None
    with ops.use_triton(False, tensors=(grad,)), torch.enable_grad():
        try:
            x = torch.zeros(case.sizes, dtype=grad.dtype, device=grad.device,
                            requires_grad=True)
            torch.diagonal(x, case.offset, case.dim1, case.dim2).backward(grad)
        except (RuntimeError, NotImplementedError):
            return None  # e.g. float8: autograd has no kernel; aten is the reference then
    return x.grad


def gradient(grad: torch.Tensor, case: Case) -> tuple[torch.Tensor, str]:
    """The reference gradient and where it came from ("autograd" or "aten")."""
    via_autograd = autograd_gradient(grad, case)
    if via_autograd is not None:
        return via_autograd, "autograd"
    return ATEN.diagonal_backward(grad, list(case.sizes), case.offset, case.dim1,
                                  case.dim2), "aten"


#: Where aten keeps its own kernel of each op (the alias key it registers it under).
_ATEN_KERNEL_KEY = {
    "diagonal": (_aten.diagonal_copy.default,
                 torch._C.DispatchKey.CompositeExplicitAutogradNonFunctional),
    "diagonal_backward": (_aten.diagonal_backward.default,
                          torch._C.DispatchKey.CompositeExplicitAutograd),
}


def aten_kernel(case: Case, tensor: torch.Tensor) -> torch.Tensor:
    """aten's own kernel of ``case.op`` on ``tensor``, whatever the registration's state.

    The device reference. aten registers diagonal_copy (a view, then a contiguous clone) and
    diagonal_backward (zeros, a diagonal view, copy_) under alias keys, for every backend;
    diagfuzz's registration overrides the backend key only. Calling the alias key's kernel
    directly runs exactly what the op runs with the registration off, without switching it
    (a switch costs ~25 us and the oracle makes one per Case, for the host references).
    """
    op, key = _ATEN_KERNEL_KEY[case.op]
    if case.op == "diagonal":
        return op._op_dk(key, tensor, case.offset, case.dim1, case.dim2)
    return op._op_dk(key, tensor, list(case.sizes), case.offset, case.dim1, case.dim2)


def expected(case: Case, args: dict[str, Any]) -> tuple[torch.Tensor, str]:
    """The reference result of a valid Case (functional form) and its source."""
    if case.op == "diagonal":
        return ATEN.diagonal(args["input"], case.offset, case.dim1, case.dim2), "aten"
    return gradient(args["grad_output"], case)
