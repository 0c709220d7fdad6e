"""Which of a library's aten registrations an op reaches, and which of them takes a
CompositeImplicitAutograd op out of its decomposition (and its gradient with it).

A backend kernel registered for a CompositeImplicitAutograd op (``aten::diag`` at CUDA, as
FlagGems registers it) replaces the decomposition autograd differentiates, so autograd
falls to its not-implemented fallback and the input silently gets no gradient. The
registration audit and torch.compile parity both meet that drop, through every diagfuzz op
whose call reaches the op (``diag``, ``diag_1d``); they blame the same registration
(``dropped_by``), on which the finding is keyed (``diagfuzz.core.signature``), so the one
fix is one finding.
"""

from __future__ import annotations

from typing import Any

import torch

from diagfuzz.core import dispatch
from diagfuzz.specs import spec_of

#: The backend keys' autograd keys: a kernel registered there replaces autograd's formula.
AUTOGRAD_KEYS = ("Autograd", "AutogradCPU", "AutogradCUDA")


def audited_package(impl: Any) -> str | None:
    """The package whose aten registrations ``impl`` runs: a ``registered:`` library's, or
    ``diagfuzz.ops`` for diagfuzz's own kernels through aten; None for an adapter."""
    package = getattr(impl, "registered_package", None)
    if package:
        return str(package)
    return "diagfuzz.ops" if getattr(impl, "uses_triton_registration", False) else None


def op_names(op: str) -> set[str]:
    """The aten overloads of ``op``'s own (``aten::diag``, ``aten::diag.out``)."""
    spec = spec_of(op)
    return ({f"aten::{name}" for name in spec.aten if name}
            | {f"aten::{spec.aten[0]}.default"})


def reached(op: str) -> set[str]:
    """The aten ops a call of ``op`` reaches: its own, and those it decomposes into."""
    into = spec_of(op).decomposes_into
    return op_names(op) | {f"aten::{n}" for n in into} | {f"aten::{n}.default" for n in into}


def composite_replaced(package: str, op: str, device: str = ""
                       ) -> list[dispatch.Registration]:
    """The library's backend kernels for a CompositeImplicitAutograd op ``op`` reaches:
    such a kernel takes the op out of its decomposition, and autograd with it. Those at
    ``device``'s backend key come first (the one a call there runs)."""
    found = [r for r in dispatch.overrides(package) if r.op in reached(op)
             and r.key not in AUTOGRAD_KEYS
             and torch._C._dispatch_has_kernel_for_dispatch_key(r.op.split(".")[0],
                                                               "CompositeImplicitAutograd")]
    backend = torch.device(device).type.upper() if device else ""
    return sorted(found, key=lambda r: r.key != backend)  # stable: registration order


def dropped_by(impl: Any, op: str, device: str = "") -> dict[str, str]:
    """The registration blamed for a gradient ``op``'s input did not get under ``impl``'s
    library, as a verdict's ``details["dropped_by"]`` (``op``, ``key``, ``module`` and
    ``where``, the registering file:line); {} where no registration explains it."""
    package = audited_package(impl)
    replaced = composite_replaced(package, op, device) if package else []
    if not replaced:
        return {}
    r = replaced[0]
    return {"op": r.op, "key": r.key, "module": r.module, "where": r.where}


def why_dropped(by: dict[str, str]) -> str:
    """The message's reason for a gradient that ``by`` (``dropped_by``) dropped."""
    if not by:
        return ""
    return (f": {by['op']} at {by['key']} by {by['module']} ({by['where']}) is a backend "
            "kernel for a CompositeImplicitAutograd op, which takes the op out of its "
            "decomposition, and autograd falls to its not-implemented fallback")


__all__ = ["AUTOGRAD_KEYS", "audited_package", "composite_replaced", "dropped_by",
           "op_names", "reached", "why_dropped"]
