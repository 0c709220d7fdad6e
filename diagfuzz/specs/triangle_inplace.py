"""What ``triu_`` and ``tril_`` share: ``triu``/``tril`` written into their input.

``input.triu_(diagonal)`` zeroes the elements below the triangle where they lie and returns
``input`` itself. A Case is the functional op's (``diagfuzz.specs.triangle``); the spec says
``inplace="input"`` and the oracle judges that tensor: the same object back, the triangle's
bits in its view, its storage outside the view untouched, its version counter moved
(``oracles/inplace.py``). The references run on twins of the input (copies of its whole
storage, viewed alike) that the oracle hands them: each writes its twin and returns it, so
a reference is the expected view, strides and storage offset included. No ``.out``
overload, so no ``out`` classes; the invalid classes are the functional op's others.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from diagfuzz.core.case import Case
from diagfuzz.core.dispatch import aten_only
from diagfuzz.specs.triangle import INVALID, Triangle

_aten = torch.ops.aten
#: The functional ops' invalid classes but ``out``'s.
INVALID_INPLACE = tuple(kind for kind in INVALID if not kind.startswith("out_"))


@dataclass(frozen=True)
class InPlaceTriangle(Triangle):
    """The spec functions of ``triu_`` or ``tril_`` (``name``)."""

    def call(self, impl: Any, case: Case, args: dict[str, Any]) -> Any:
        """``impl.<name>(input, diagonal)``: what it returns is judged against input."""
        return getattr(impl, self.name)(args["input"], args["diagonal"])

    def reference(self, case: Case, args: dict[str, Any]) -> tuple[torch.Tensor, str]:
        """aten's in-place op, aten's own kernels, on the twin it is given."""
        with aten_only():
            return getattr(_aten, self.name)(args["input"], case.offset), "aten"

    def others(self, case: Case, args: dict[str, Any],
               source: str) -> list[tuple[str, torch.Tensor]]:
        """The index-arithmetic result (``Triangle.index``) copied into the twin's view."""
        x = args["input"]
        with aten_only():
            x.copy_(self.index(x, case))
        return [("index", x)]

    def aten_kernel(self, case: Case, args: dict[str, Any]) -> torch.Tensor:
        """aten's in-place kernel on the device twin (the oracle's ``aten_only`` defers
        any registration to it)."""
        with aten_only():
            return getattr(_aten, self.name)(args["input"], case.offset)

    def compile_function(self, case: Case, args: dict[str, Any]) -> tuple[Any, torch.Tensor,
                                                                          Any]:
        """``x.clone().triu_(diagonal)``, back-propagated with ones: autograd through the
        in-place op (its gradient is the functional op of the gradient)."""
        method, diagonal = self.name, case.offset

        def fn(x: torch.Tensor) -> torch.Tensor:
            return getattr(x.clone(), method)(diagonal)

        x = args["input"]
        return fn, x, torch.ones(case.sizes, dtype=x.dtype, device=x.device)

    def error_cases(self) -> list[Case]:
        """The functional op's invalid calls but ``out``'s."""
        return [c for c in super().error_cases() if c.invalid in INVALID_INPLACE]
