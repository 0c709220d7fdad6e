"""The registration audit: how a library's aten registration of an op behaves for its
users, beyond the op's bits.

Per Case (``check_registration``), through the op's public differentiable function (its
spec's ``compile_function``: ``torch.diag(x)``, ``torch.diag_embed(x)``,
``torch.diagonal(x).clone()`` whose backward is ``diagonal_backward`` ...) under the
library's registrations (``under_test``), against the same function with aten's own
kernels (``aten_only``):

- **gradient**: the output has a ``grad_fn`` and ``backward`` reaches the input with
  aten's gradient bits. A backend kernel registered for a CompositeImplicitAutograd op
  (``aten::diag``) takes the op out of its decomposition, so autograd falls to its
  not-implemented fallback and the input silently gets no gradient. The verdict names that
  registration (``details["dropped_by"]``, ``diagfuzz.oracles.decomposition``): the
  finding is keyed on it, one for every op and stage that meets the drop;
- **autograd.Function at an autograd key** (the output's ``grad_fn`` a Python
  ``BackwardCFunction``, or a registration at ``Autograd*``): forward and backward must
  be registered separately at the backend key, or torch.compile and aten's own
  derivative formulas are bypassed;

torch.compile with the library active (``fullgraph=True``: no graph break; fake tensors
reach a Meta kernel; eager's bits) is the torch.compile parity stage's, which runs the same
functions under the same registrations (``diagfuzz.oracles.compile``).

``audit_table`` is the per-op summary a run prints: the keys the library registered,
forward and backward separately or not, whose Meta kernel there is.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

import torch

from diagfuzz.core import dispatch
from diagfuzz.core.case import Case
from diagfuzz.core.origin import raise_origin
from diagfuzz.core.runtime import DEVICE
from diagfuzz.core.verdict import Verdict
from diagfuzz.oracles.checks import _compare
from diagfuzz.oracles.compile import differentiable_call
from diagfuzz.oracles.decomposition import (
    AUTOGRAD_KEYS,
    audited_package,
    dropped_by,
    op_names,
    reached,
    why_dropped,
)
from diagfuzz.specs import all_specs


def _fail(kind: str, check: str, message: str, case: Case,
          details: dict[str, Any] | None = None) -> Verdict:
    return Verdict(kind, f"registration:{check}", message, case, details or {})


def _raised(exc: BaseException) -> dict[str, Any]:
    return {"type": type(exc).__name__, "message": str(exc)[:500],
            "origin": raise_origin(exc)}


def _autograd_registrations(package: str, op: str) -> list[dispatch.Registration]:
    """The library's kernels at an autograd key for the ops a call of ``op`` reaches."""
    names = reached(op)
    return [r for r in dispatch.overrides(package) if r.op in names and r.key in AUTOGRAD_KEYS]


def _run(fn: Any, x: torch.Tensor, grad: torch.Tensor) -> tuple[torch.Tensor, Any, Any]:
    """(output, its grad_fn, the input's gradient or None) of ``fn`` at ``x``."""
    leaf = x.detach().clone().requires_grad_(True)
    y = fn(leaf)
    grad_fn = y.grad_fn
    if grad_fn is not None:
        y.backward(grad)
    return y.detach(), grad_fn, leaf.grad


@dispatch.judged
def check_registration(case: Case, impl: Any, device: str = DEVICE, *,
                       strict: bool = False) -> Verdict:
    """The audit of ``case.op``'s registration (module docstring). Cases that are not
    plain valid differentiable ones, and impls that register nothing, pass as skipped.
    (``strict`` is accepted for the executor's one calling convention.)"""
    package = audited_package(impl)
    if package is None:
        return Verdict("pass", "registration", "skipped: the impl registers nothing", case,
                       {"skipped": "impl"})
    call = differentiable_call(case, device, "registration")
    if isinstance(call, Verdict):
        return call
    fn, x, grad = call
    want_y, _, want_grad = _run(fn, x, grad)  # aten's own kernels
    registration = getattr(impl, "registration", None)
    active = registration if callable(registration) else nullcontext
    try:
        with dispatch.under_test(), active():
            y, grad_fn, x_grad = _run(fn, x, grad)
            # Read while the registration is on: a switch may remove it on exit.
            by = dropped_by(impl, case.op, device) if x_grad is None else {}
    except Exception as exc:
        return _fail("crash", "autograd", f"the op's forward or backward raised "
                     f"{type(exc).__name__} under {package}'s registration", case,
                     _raised(exc))
    wrapped = _autograd_registrations(package, case.op)
    python_function = type(grad_fn).__name__ == "BackwardCFunction"
    if wrapped or python_function:
        what = ("a Python autograd.Function" if python_function
                else "a kernel that replaces aten's derivative formula")
        where = "; ".join(r.describe() for r in wrapped) or "inside a backend kernel"
        return _fail("dispatch", "autograd-key",
                     f"{case.op}'s derivative under {package}'s registration is {what} "
                     f"({where}; grad_fn {type(grad_fn).__name__}): register forward and "
                     "backward as separate kernels at the backend key, so that aten's "
                     "formula and torch.compile reach them", case,
                     {"library": package, "grad_fn": type(grad_fn).__name__})
    if grad_fn is None or x_grad is None:
        # ``dropped_by`` keys the finding: one for every op and stage that reaches it.
        return _fail("mismatch", "gradient",
                     f"{case.op} under {package}'s registration drops the input's gradient "
                     f"(grad_fn {type(grad_fn).__name__}, input.grad "
                     f"{'None' if x_grad is None else 'set'}){why_dropped(by)}",
                     case, {"library": package, "grad_fn": type(grad_fn).__name__,
                            **({"dropped_by": by} if by else {})})
    for what, expected, actual in (("forward", want_y, y), ("grad", want_grad, x_grad)):
        found = _compare(case, expected.contiguous(), actual.contiguous(), f"aten-{what}")
        if found:
            return _fail(found.kind, f"autograd:{what}:{found.check}", found.message, case,
                         found.details)
    return Verdict("pass", "registration", "", case, {"library": package})


def audit_table(impl: Any, device: str = DEVICE) -> list[dict[str, Any]]:
    """Per op of the family: the keys ``impl``'s library registered for its overloads,
    whether its derivative is left to aten (forward and backward registered separately at
    the backend key) or replaced at an autograd key, and whose Meta kernel torch.compile's
    fake tensors would trace with (aten's, the library's, or none). Empty for an impl that
    registers nothing."""
    package = audited_package(impl)
    if package is None:
        return []
    rows = []
    for spec in all_specs():
        names = op_names(spec.name)
        found = [r for r in dispatch.overrides(package) if r.op in names]
        autograd = [r for r in found if r.key in AUTOGRAD_KEYS]
        own_meta = any(r.key == "Meta" for r in found)
        meta = (f"{package}'s" if own_meta else "aten's" if any(
            torch._C._dispatch_has_computed_kernel_for_dispatch_key(n, "Meta")
            for n in sorted(names) if not n.endswith(".default")) else "none")
        rows.append({
            "op": spec.name,
            "keys": sorted({f"{r.op.removeprefix('aten::')}@{r.key}" for r in found}),
            "derivative": ("replaced at " + ", ".join(sorted({r.key for r in autograd}))
                           if autograd else "aten's formula" if found else "-"),
            "meta": meta,
        })
    return rows


__all__ = ["audit_table", "audited_package", "check_registration"]
