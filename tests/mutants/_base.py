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
    """The diagonal family in plain torch; override a seam (or an op) to break it."""

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

    def clone_input(self, x: torch.Tensor) -> torch.Tensor:
        """What aten's ``clone_preserve_strides`` makes of diagonal_scatter's input: its
        whole storage copied into a new one and viewed alike, or for an input with a zero
        stride on a dim of more than one element, a dense ``clone``."""
        if x.numel() and any(n > 1 and s == 0 for n, s in zip(x.shape, x.stride(),
                                                               strict=True)):
            return x.clone()
        numel = x.untyped_storage().nbytes() // x.element_size()
        storage = self.allocate((numel,), x.dtype, x.device)
        self.write(storage, x.as_strided((numel,), (1,), 0))
        return storage.as_strided(x.shape, x.stride(), x.storage_offset())

    def keeps(self, upper: bool, rows: int, cols: int, diagonal: int,
              device: torch.device) -> torch.Tensor:
        """triu's (``upper``) or tril's ``[rows, cols]`` mask of the elements kept."""
        row = torch.arange(rows, device=device).view(rows, 1)
        col = torch.arange(cols, device=device).view(1, cols)
        return col - row >= diagonal if upper else col - row <= diagonal

    def triangle_diagonal(self, diagonal: int) -> int:
        """The diagonal triu and tril compare with."""
        return diagonal

    def read_matrices(self, x: torch.Tensor) -> torch.Tensor:
        """triu's and tril's input as the kernel reads it."""
        return x

    def select(self, out: torch.Tensor, x: torch.Tensor, keep: torch.Tensor) -> None:
        """``x``'s elements where ``keep`` written into ``out`` (the others stay)."""
        self.write(out, torch.where(keep, x, out))

    def validate(self, op: str, tensor: object, *args: object) -> None:
        """aten's argument checks, run on meta tensors (no data): aten's exception types.

        diag_embed, diagonal_scatter, diag, triu and tril run aten's op itself on the
        tensors instead: their meta kernels check less (a src of the wrong shape passes,
        triu's dtype is checked by its kernel alone) or raise other types (a TypeError for
        an offset whose sizes overflow int64)."""
        meta = tensor.to("meta") if isinstance(tensor, torch.Tensor) else tensor
        if op == "diagonal":
            offset, dim1, dim2 = self.dims(getattr(tensor, "ndim", 0), *args)
            torch.ops.aten.diagonal_copy(meta, offset, dim1, dim2)
        elif op == "diagonal_backward":
            sizes, offset, dim1, dim2 = args
            offset, dim1, dim2 = self.dims(len(sizes) if isinstance(sizes, (list, tuple))
                                           else 0, offset, dim1, dim2)
            torch.ops.aten.diagonal_backward(meta, sizes, offset, dim1, dim2)
        else:
            getattr(torch.ops.aten, op)(tensor, *args)

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

    def diag_embed(self, x: torch.Tensor, offset: int = 0, dim1: int = -2,
                   dim2: int = -1) -> torch.Tensor:
        self.validate("diag_embed", x, offset, dim1, dim2)
        sizes = torch.ops.aten.diag_embed(x.to("meta"), offset, dim1, dim2).shape
        out = self.allocate(sizes, x.dtype, x.device)
        self.zero(out)
        self.write(self.view(out, offset, dim1, dim2), x)
        return self.finish(out)

    def diagonal_scatter(self, x: torch.Tensor, src: torch.Tensor, offset: int = 0,
                         dim1: int = 0, dim2: int = 1) -> torch.Tensor:
        self.validate("diagonal_scatter", x, src, offset, dim1, dim2)
        out = self.clone_input(x)
        self.write(self.view(out, offset, dim1, dim2), src)
        return self.finish(out)

    def triu(self, x: torch.Tensor, diagonal: int = 0) -> torch.Tensor:
        return self.triangle("triu", x, diagonal)

    def tril(self, x: torch.Tensor, diagonal: int = 0) -> torch.Tensor:
        return self.triangle("tril", x, diagonal)

    def triangle(self, op: str, x: torch.Tensor, diagonal: int) -> torch.Tensor:
        """triu (``op`` "triu") or tril: aten's checks, zeros, then the kept elements."""
        self.validate(op, x, diagonal)
        out = self.allocate(x.shape, x.dtype, x.device)
        self.zero(out)
        keep = self.keeps(op == "triu", x.shape[-2], x.shape[-1],
                          self.triangle_diagonal(diagonal), x.device)
        self.select(out, self.read_matrices(x), keep)
        return self.finish(out)

    def triu_(self, x: torch.Tensor, diagonal: int = 0) -> torch.Tensor:
        return self.triangle_in_place("triu_", x, diagonal)

    def tril_(self, x: torch.Tensor, diagonal: int = 0) -> torch.Tensor:
        return self.triangle_in_place("tril_", x, diagonal)

    def written_in_place(self, x: torch.Tensor) -> torch.Tensor:
        """The tensor an in-place op writes: ``x`` itself."""
        return x

    def returned_in_place(self, x: torch.Tensor) -> torch.Tensor:
        """What an in-place op returns: ``x`` itself."""
        return x

    def triangle_in_place(self, op: str, x: torch.Tensor, diagonal: int) -> torch.Tensor:
        """triu_ or tril_ (``op``): aten's in-place op on the tensor it writes (its checks,
        and its order of writes where elements share memory), then what it returns."""
        getattr(self.written_in_place(x), op)(diagonal)
        return self.returned_in_place(x)

    def diag(self, x: torch.Tensor, diagonal: int = 0) -> torch.Tensor:
        """What aten::diag does: diag_embed of a vector, diagonal_copy of a matrix."""
        self.validate("diag", x, diagonal)
        if x.dim() == 1:
            return self.diag_embed(x, diagonal, 0, 1)
        return self.diagonal(x, diagonal, 0, 1)


impl = Correct()
