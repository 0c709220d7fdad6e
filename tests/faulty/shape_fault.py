"""diagfuzz's own kernels with a fault on some calls: by default a common shape, any rank-4
tensor argument whose first dim is 3 (a bad loop bound or mask that only such a shape
reaches).

``hang`` never returns there (``hang_stop_turned_error`` too, and turns what stops it
into an error of its own) (``DIAGFUZZ_FAULTY_SPIN=1`` spins on the CPU like an
interpreted kernel stuck in its loop; otherwise it sleeps, like a host waiting on a stuck
GPU kernel); ``crash`` aborts the process (SIGABRT, like a failed device assert);
``rare_hang`` hangs only on a [7, 5] input; ``embed_hang`` on every ``diag_embed`` call;
``device_hang`` launches a kernel that never ends on the input's device first (on a GPU the
host then blocks in the next synchronisation, in C, where no signal reaches it).
Every op and its ``.out`` form is wrapped, so the fault reaches every stage of the gate.
``ShapeFault`` wraps any implementation the same way (``tests.faulty.flaggems_hang``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import torch
import triton
import triton.language as tl

from diagfuzz.impl import triton_aten
from diagfuzz.specs import all_specs

Args = tuple[Any, ...]


def _common_shape(op: str, args: tuple[Any, ...]) -> bool:
    return any(isinstance(a, torch.Tensor) and a.dim() == 4 and a.shape[0] == 3 for a in args)


def _rare_shape(op: str, args: tuple[Any, ...]) -> bool:
    return any(isinstance(a, torch.Tensor) and tuple(a.shape) == (7, 5) for a in args)


def _embed(op: str, args: tuple[Any, ...]) -> bool:
    return op.startswith("diag_embed")


def _never_return(args: Args) -> None:
    spin = os.environ.get("DIAGFUZZ_FAULTY_SPIN") == "1"
    while True:
        if not spin:
            time.sleep(0.05)


def _stop_turned_error(args: Args) -> None:
    """Never returns, in a loop whose handler turns whatever interrupts it into an error
    of its own (as torch's argument parser turns an exception raised in a signal handler
    into a TypeError, and Triton's interpreter wraps that in an InterpreterError)."""
    try:
        _never_return(args)
    except BaseException as exc:
        raise TypeError(f"expected a sequence of integers, got {exc!r}") from None


def _abort(args: Args) -> None:
    os.abort()


@triton.jit
def _spin_kernel(flag_ptr):
    while tl.load(flag_ptr, volatile=True) == 0:
        pass


def _device_spin(args: Args) -> None:
    """A kernel that waits for a flag nobody sets, on the first tensor's device."""
    device = next(a.device for a in args if isinstance(a, torch.Tensor))
    _spin_kernel[(1,)](torch.zeros(1, dtype=torch.int32, device=device))


Where = Callable[[str, Args], bool]


class ShapeFault:
    """Every op ``base`` provides, with ``fault(args)`` called first where
    ``where(op, args)``; what ``base`` declares (dtypes, support, registration) as it is."""

    def __init__(self, fault: Callable[[Args], None], where: Where = _common_shape,
                 base: Any = triton_aten) -> None:
        self.uses_triton_registration = getattr(base, "uses_triton_registration", False)
        for declared in ("dtypes", "supports", "registration"):  # what base declares
            if hasattr(base, declared):
                setattr(self, declared, getattr(base, declared))
        for spec in all_specs():
            for name in (spec.method_name, spec.out_method):
                call = getattr(base, name, None)
                if call is not None:
                    setattr(self, name, self._wrap(fault, where, name, call))

    @staticmethod
    def _wrap(fault: Callable[[Args], None], where: Where, name: str,
              call: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            if where(name, every := (*args, *kwargs.values())):
                fault(every)
            return call(*args, **kwargs)

        return wrapped


hang = ShapeFault(_never_return)
hang_stop_turned_error = ShapeFault(_stop_turned_error)
crash = ShapeFault(_abort)
rare_hang = ShapeFault(_never_return, _rare_shape)
embed_hang = ShapeFault(_never_return, _embed)
device_hang = ShapeFault(_device_spin)
