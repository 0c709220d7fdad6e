"""A correct pure-torch implementation with seams where the mutants put their one bug.

It is the control of the mutation test: the base passes the oracles, so whatever catches a
mutant catches its bug. Allocation is ``torch.empty`` plus explicit writes, like a kernel's
launcher; validation comes from ``torch.diagonal`` itself (aten's checks and messages).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


class Correct:
    """diagonal_copy and diagonal_backward in plain torch; override a seam to break it."""

    uses_triton_registration = False

    # --- seams ----------------------------------------------------------------------
    def dims(self, ndim: int, offset: int, dim1: int, dim2: int) -> tuple[int, int, int]:
        """The (offset, dim1, dim2) the diagonal is taken with."""
        return offset, dim1, dim2

    def view(self, t: torch.Tensor, offset: int, dim1: int, dim2: int) -> torch.Tensor:
        """The diagonal view of ``t`` (validates like aten)."""
        offset, dim1, dim2 = self.dims(t.dim(), offset, dim1, dim2)
        return torch.diagonal(t, offset, dim1, dim2)

    def allocate(self, sizes: Sequence[int], dtype: torch.dtype,
                 device: torch.device) -> torch.Tensor:
        """A new result buffer (contents unspecified, like torch.empty)."""
        return torch.empty(tuple(sizes), dtype=dtype, device=device)

    def read_grad(self, grad: torch.Tensor) -> torch.Tensor:
        """grad_output as the kernel reads it."""
        return grad

    def finish(self, result: torch.Tensor) -> torch.Tensor:
        """Last touch on a result before it is returned."""
        return result

    def write(self, dest: torch.Tensor, source: torch.Tensor) -> None:
        """Write every element of ``source`` into ``dest`` (same shape)."""
        dest.copy_(source)

    def zero(self, out: torch.Tensor) -> None:
        """Set every element of ``out`` to all-zero bits."""
        out.zero_()

    def validate(self, op: str, tensor: object, *args: object) -> None:
        """aten's argument checks, run on meta tensors (no data): aten's exception types."""
        meta = tensor.to("meta") if isinstance(tensor, torch.Tensor) else tensor
        if op == "diagonal":
            offset, dim1, dim2 = self.dims(getattr(tensor, "ndim", 0), *args)
            torch.ops.aten.diagonal_copy(meta, offset, dim1, dim2)
        else:
            sizes, offset, dim1, dim2 = args
            offset, dim1, dim2 = self.dims(len(sizes) if isinstance(sizes, (list, tuple))
                                           else 0, offset, dim1, dim2)
            torch.ops.aten.diagonal_backward(meta, sizes, offset, dim1, dim2)

    # --- the ops ----------------------------------------------------------------------
    def diagonal(self, x: torch.Tensor, offset: int = 0, dim1: int = 0,
                 dim2: int = 1) -> torch.Tensor:
        self.validate("diagonal", x, offset, dim1, dim2)
        view = self.view(x, offset, dim1, dim2)
        out = self.allocate(view.shape, x.dtype, x.device)
        self.write(out, view)
        return self.finish(out)

    def diagonal_backward(self, grad_output: torch.Tensor, input_sizes: Sequence[int],
                          offset: int, dim1: int, dim2: int) -> torch.Tensor:
        self.validate("diagonal_backward", grad_output, input_sizes, offset, dim1, dim2)
        out = self.allocate(input_sizes, grad_output.dtype, grad_output.device)
        self.zero(out)
        diag = self.view(out, offset, dim1, dim2)
        self.write(diag, self.read_grad(grad_output).expand(diag.shape))
        return self.finish(out)


impl = Correct()
