"""diagfuzz's own kernels with a fault on some calls: by default a common shape, any rank-4
tensor argument whose first dim is 3 (a bad loop bound or mask that only such a shape
reaches).

``hang`` never returns there (``DIAGFUZZ_FAULTY_SPIN=1`` spins on the CPU like an
interpreted kernel stuck in its loop; otherwise it sleeps, like a host waiting on a stuck
GPU kernel); ``crash`` aborts the process (SIGABRT, like a failed device assert);
``rare_hang`` hangs only on a [7, 5] input; ``embed_hang`` on every ``diag_embed`` call.
Every op and its ``.out`` form is wrapped, so the fault reaches every stage of the gate.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import torch

from diagfuzz.impl import triton_aten
from diagfuzz.specs import all_specs


def _common_shape(op: str, args: tuple[Any, ...]) -> bool:
    return any(isinstance(a, torch.Tensor) and a.dim() == 4 and a.shape[0] == 3 for a in args)


def _rare_shape(op: str, args: tuple[Any, ...]) -> bool:
    return any(isinstance(a, torch.Tensor) and tuple(a.shape) == (7, 5) for a in args)


def _embed(op: str, args: tuple[Any, ...]) -> bool:
    return op.startswith("diag_embed")


def _never_return() -> None:
    spin = os.environ.get("DIAGFUZZ_FAULTY_SPIN") == "1"
    while True:
        if not spin:
            time.sleep(0.05)


Where = Callable[[str, tuple[Any, ...]], bool]


class ShapeFault:
    """Every op of ``triton_aten``, with ``fault()`` called first where ``where(op, args)``."""

    uses_triton_registration = True

    def __init__(self, fault: Callable[[], None], where: Where = _common_shape) -> None:
        for spec in all_specs():
            for name in (spec.method_name, spec.out_method):
                setattr(self, name, self._wrap(fault, where, name,
                                               getattr(triton_aten, name)))

    @staticmethod
    def _wrap(fault: Callable[[], None], where: Where, name: str,
              call: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            if where(name, (*args, *kwargs.values())):
                fault()
            return call(*args, **kwargs)

        return wrapped

    def registration(self) -> Any:
        return triton_aten.registration()


hang = ShapeFault(_never_return)
crash = ShapeFault(os.abort)
rare_hang = ShapeFault(_never_return, _rare_shape)
embed_hang = ShapeFault(_never_return, _embed)
