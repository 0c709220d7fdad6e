"""torch.compile: the plain PyTorch ops (``examples.plain_torch``) compiled with inductor.

Each op is the plain function compiled as a user compiles it,
``torch.compile(fn, dynamic=False)``: inductor generates the kernels (C++ on the CPU, Triton
on a GPU), and every new shape, stride, dtype or argument value compiles again. The oracle
then judges inductor's generated code bit for bit against aten.

One harness setting, not a user's: a fuzz run calls each function with thousands of
different arguments, and Dynamo stops compiling a function after ``recompile_limit`` (8)
variants and quietly runs it eagerly. Calls therefore run under a raised limit with
``fail_on_recompile_limit_hit``, so every Case is compiled code, and a Case that somehow
reaches the limit raises instead of passing as eager code.

No ``.out`` forms (the oracle counts ``.out`` Cases unsupported for this implementation).

``docs/findings.md`` says what the oracle's sentinel allocations do to compiling inside
them, and what runs found.

Slow: almost every Case compiles, for seconds on a CPU. Fuzz it with a small budget, and
gate it, from the repository root::

    tools/dev fuzz --impl=examples.compiled:impl --diagfuzz-budget=200
    tools/dev gate --impl=examples.compiled:impl --budget 100
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import torch

#: Calls do not go through diagfuzz's aten registration (no dispatch proof to ask for).
uses_triton_registration = False

#: Variants Dynamo may compile per function before it refuses (raises) a new one.
RECOMPILE_LIMIT = 1 << 20


@torch.compile(dynamic=False)
def _diagonal(x: torch.Tensor, offset: int, dim1: int, dim2: int) -> torch.Tensor:
    return torch.diagonal(x, offset, dim1, dim2).clone(memory_format=torch.contiguous_format)


@torch.compile(dynamic=False)
def _diagonal_backward(grad_output: torch.Tensor, input_sizes: Sequence[int], offset: int,
                       dim1: int, dim2: int) -> torch.Tensor:
    grad_input = torch.zeros(input_sizes, dtype=grad_output.dtype, device=grad_output.device)
    torch.diagonal(grad_input, offset, dim1, dim2).copy_(grad_output)
    return grad_input


def _limits() -> object:
    """Dynamo settings for one call: compile every variant, never fall back to eager."""
    return torch._dynamo.config.patch(recompile_limit=RECOMPILE_LIMIT,
                                      accumulated_recompile_limit=RECOMPILE_LIMIT,
                                      fail_on_recompile_limit_hit=True)


def diagonal(x: torch.Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> torch.Tensor:
    """The diagonal, materialised, through compiled code."""
    with _limits():
        return _diagonal(x, offset, dim1, dim2)


def diagonal_backward(grad_output: torch.Tensor, input_sizes: Sequence[int], offset: int,
                      dim1: int, dim2: int) -> torch.Tensor:
    """Zeros with ``grad_output`` on the diagonal, through compiled code."""
    with _limits():
        return _diagonal_backward(grad_output, input_sizes, offset, dim1, dim2)


#: The implementation ``--impl=examples.compiled:impl`` names: this module.
impl = sys.modules[__name__]
