"""torch.compile parity: a compiled forward + backward gives eager's bits.

For a valid, differentiable Case, the op's differentiable function (its spec's
``compile_function``: for ``diagonal`` and ``diagonal_backward``, ``torch.diagonal(x, ...)
.clone()``) is computed and back-propagated once eagerly (aten's own kernels: the reference)
and once through ``torch.compile(fullgraph=True)`` with the implementation's registration as
it runs in the suite (on when ``impl.uses_triton_registration``; a library's registrations
serve the compiled run, ``diagfuzz.core.dispatch.under_test``). The forward values and
``x.grad`` must match bit for bit, dtype and shape; strides are not compared, since inductor
may lay out a tensor it produces differently from eager. A gradient that never reaches the
input names the library's registration that dropped it, where one does
(``diagfuzz.oracles.decomposition.dropped_by``), as the registration audit does. Slow: each
call compiles (dynamo is reset first, so a recompile limit can never make the compiled path
silently fall back to eager). Has its own pytest marker, ``compile``.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

import torch

from diagfuzz.core import compile_time
from diagfuzz.core.case import Case
from diagfuzz.core.dispatch import judged, under_test
from diagfuzz.core.origin import raise_origin
from diagfuzz.core.runtime import DEVICE
from diagfuzz.core.verdict import Verdict
from diagfuzz.oracles import reference
from diagfuzz.oracles.checks import _compare
from diagfuzz.oracles.decomposition import dropped_by, why_dropped
from diagfuzz.specs import arguments, spec_of


def _forward_backward(fn: Any, x: torch.Tensor, grad: torch.Tensor
                      ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The output and the input's gradient (None where the output has no grad_fn or the
    gradient never reaches the input: a registration that dropped it)."""
    leaf = x.detach().clone().requires_grad_(True)
    y = fn(leaf)
    if y.grad_fn is not None:
        y.backward(grad)
    return y.detach(), leaf.grad


def differentiable_call(case: Case, device: str, check: str
                        ) -> Verdict | tuple[Any, torch.Tensor, torch.Tensor]:
    """The op's differentiable function, its input and a gradient for its output (the
    spec's ``compile_function``), or a skipped pass of ``check``: a Case that is not a
    plain valid one, or of a dtype autograd refuses."""
    spec = spec_of(case.op)
    if case.invalid or case.out_dtype or case.out_device or spec.compile_function is None:
        return Verdict("pass", check, "skipped: not a plain valid Case", case,
                       {"skipped": "case"})
    args = arguments(case, device)
    if not reference.differentiable(args[spec.first.name].dtype):
        return Verdict("pass", check, "skipped: dtype not differentiable", case,
                       {"skipped": "dtype"})
    fn, x, grad = spec.compile_function(case, args)
    return fn, x, grad


@judged
def check_compile(case: Case, impl: Any, device: str = DEVICE,
                  backend: str = "inductor", *, strict: bool = False) -> Verdict:
    """Compiled forward + backward vs eager, bitwise. Non-differentiable Cases pass as skipped.

    (``strict`` is accepted for the executor's one calling convention; nothing here
    depends on it.)"""
    call = differentiable_call(case, device, "compile")
    if isinstance(call, Verdict):
        return call
    fn, x, grad = call
    eager_y, eager_grad = _forward_backward(fn, x, grad)  # aten's own kernels
    if eager_grad is None:
        return Verdict("pass", "compile", "skipped: aten's function gives no gradient", case,
                       {"skipped": "grad"})
    # reset() reaches torch._dynamo.compiled_autograd without importing it (torch 2.11):
    # a fresh process's first compile (a replay's, say) would raise there.
    import torch._dynamo.compiled_autograd

    compile_time.bank()  # reset() clears Dynamo's record of the compile seconds so far
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend=backend, fullgraph=True, dynamic=False)
    # An impl that runs diagfuzz's kernels through aten says how to register them.
    registration = getattr(impl, "registration", None)
    try:
        with under_test(), registration() if callable(registration) else nullcontext():
            y, x_grad = _forward_backward(compiled, x, grad)
            # Read while the registration is on: a switch may remove it on exit.
            by = dropped_by(impl, case.op, device) if x_grad is None else {}
    except Exception as exc:
        return Verdict("crash", "compile", f"torch.compile raised {type(exc).__name__}",
                       case, {"type": type(exc).__name__, "message": str(exc)[:500],
                              "origin": raise_origin(exc)})
    for what, expected, actual in (("forward", eager_y, y), ("grad", eager_grad, x_grad)):
        # Values, not layout: inductor may pick other strides for an intermediate it owns.
        if not isinstance(actual, torch.Tensor):
            # A dropped gradient names the registration that dropped it, as the
            # registration audit does: the finding is keyed on it, not on the stage.
            no_grad = what == "grad"
            return Verdict("mismatch", f"compile:{what}", f"compiled {what} is {actual!r}"
                           + (": the input got no gradient" + why_dropped(by) if no_grad
                              else ""), case, {"dropped_by": by} if no_grad and by else {})
        found = _compare(case, expected.contiguous(), actual.contiguous(), f"eager-{what}")
        if found:
            return Verdict(found.kind, f"compile:{what}:{found.check}", found.message, case,
                           found.details)
    return Verdict("pass", "compile", "", case, {"backend": backend})
