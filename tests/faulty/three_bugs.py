"""Three independent bugs in one implementation: one run must report all three.

* complex dtypes raise KeyError (a dtype table without complex entries);
* -0.0 becomes +0.0 in floating results (a compare-with-zero fast path);
* diagonal ignores its input's storage offset (the kernel reads from the base pointer).
"""

from __future__ import annotations

import torch

from tests.mutants._base import FLOATS, Correct

_WORD_OF = {torch.float16: "i16", torch.bfloat16: "i16", torch.float32: "i32",
            torch.float64: "i64", torch.bool: "i8", torch.uint8: "i8", torch.int8: "i8",
            torch.int16: "i16", torch.int32: "i32", torch.int64: "i64"}


class ThreeBugs(Correct):
    def allocate(self, sizes, dtype, device):
        if dtype.is_complex:
            _WORD_OF[dtype]  # raises KeyError: no entry for complex dtypes
        return super().allocate(sizes, dtype, device)

    def write(self, dest: torch.Tensor, source: torch.Tensor) -> None:
        if source.dtype in FLOATS:
            source = torch.where(source == 0, torch.zeros_like(source), source)
        dest.copy_(source)

    def diagonal(self, x, offset=0, dim1=0, dim2=1):
        if x.storage_offset():
            x = x.as_strided(x.shape, x.stride(), 0)  # the input's storage offset is dropped
        return super().diagonal(x, offset, dim1, dim2)


impl = ThreeBugs()
