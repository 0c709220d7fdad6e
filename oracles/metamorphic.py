"""Metamorphic relations: properties a correct result has, checked without a reference.

* diagonal_backward: reading the result's diagonal back gives grad_output bit for bit
  (``diagonal(diagonal_backward(g)) == g``), and every element off the diagonal has all bits
  zero (+0.0, never -0.0; a bool byte of 0).
* diagonal_copy: the result holds the values of aten's ``diagonal`` *view* of the input (no
  copy involved on aten's side), in a tensor of its own (checked by the alias check).
Each returns None when the relation holds, else (check name, message, details).

The relations read the result through aten's ``diagonal`` *view*, which runs no kernel (ours
or aten's), so they need not switch the registration off (25 us a switch, twice a Case):
``_diagonal_view`` proves each one is a view of its tensor and only falls back to taking it
with the registration off if it were not.
"""

from __future__ import annotations

from typing import Any

import torch

import diagfuzz.ops as ops
from diagfuzz.case import Case
from diagfuzz.oracles import index_reference
from diagfuzz.oracles._bits import _words, bits, diff, differing, same_bits

Finding = tuple[str, str, dict[str, Any]]


def _same_bits(check: str, what: str, expected: torch.Tensor,
               actual: torch.Tensor) -> Finding | None:
    """None when the two agree in bits, else (check, "<count> <what>", the diff)."""
    if same_bits(expected, actual):
        return None
    positions = differing(expected, actual)
    if len(positions):
        return (check, f"{len(positions)} {what}", diff(expected, actual, positions))
    return None


def _diagonal_view(case: Case, t: torch.Tensor) -> torch.Tensor:
    """``torch.diagonal(t, ...)`` as a view of ``t``'s storage: no kernel computed it.

    A view cannot come from a kernel of ours (those return new tensors); were aten's
    ``diagonal`` ever served by something that copies, the registration is switched off and
    the view taken again.
    """
    view = torch.diagonal(t, case.offset, case.dim1, case.dim2)
    if view._is_view() and view.untyped_storage().data_ptr() == t.untyped_storage().data_ptr():
        return view
    with ops.use_triton(False, tensors=(t,)):
        return torch.diagonal(t, case.offset, case.dim1, case.dim2)


def backward_round_trip(case: Case, grad: torch.Tensor, result: torch.Tensor) -> Finding | None:
    """``diagonal(result)`` equals grad_output (broadcast to the diagonal's shape) in bits."""
    back = _diagonal_view(case, result)
    return _same_bits("metamorphic:diagonal(diagonal_backward(g))==g",
                      "diagonal elements of the result differ from grad_output",
                      grad.expand(back.shape), back)


def backward_off_diagonal_zero(case: Case, result: torch.Tensor) -> Finding | None:
    """Every element off the diagonal has all bits zero.

    The passing case in three ops (the diagonal's words masked to zero, then ``any``); the
    evidence is gathered only when some element is not.
    """
    on_shaped = index_reference.diagonal_mask_shaped(case, result.device, result.dtype)
    if not bool(_words(result).masked_fill(on_shaped, 0).any()):
        return None
    on = index_reference.diagonal_mask(case, result.device)
    words = bits(result)
    nonzero = words != 0
    nonzero = nonzero.reshape(-1) if nonzero.shape[1] == 1 else nonzero.any(dim=1)
    bad = (nonzero & ~on).nonzero().reshape(-1).cpu()
    if len(bad):
        zeros = torch.zeros_like(result)
        return ("metamorphic:off-diagonal-zero",
                f"{len(bad)} elements off the diagonal are not all-zero bits",
                diff(zeros, result, bad))
    return None


def copy_equals_view(case: Case, x: torch.Tensor, result: torch.Tensor) -> Finding | None:
    """The copy holds the values of aten's diagonal view of the input."""
    view = _diagonal_view(case, x)
    return _same_bits("metamorphic:diagonal_copy==diagonal-view",
                      "elements differ from the input's diagonal view", view, result)


def relations(case: Case, tensor: torch.Tensor, result: torch.Tensor) -> Finding | None:
    """The first relation ``result`` breaks (shape and dtype already checked), or None."""
    if case.op == "diagonal":
        return copy_equals_view(case, tensor, result)
    return (backward_off_diagonal_zero(case, result)
            or backward_round_trip(case, tensor, result))
