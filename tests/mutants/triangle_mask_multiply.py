"""triu and tril mask by multiplication, ``x * keep``: the right numbers, the wrong bits
where an element is dropped: a negative one gives -0.0, an infinity or a NaN gives NaN."""

import torch

from tests.mutants._base import Correct


class TriangleMaskMultiply(Correct):
    def select(self, out: torch.Tensor, x: torch.Tensor, keep: torch.Tensor) -> None:
        self.write(out, (x * keep).to(x.dtype))


impl = TriangleMaskMultiply()
