"""Claims to use the Triton registration but serves every call from aten (registration off).

Its results are aten's, bit for bit: only the dispatch proof can catch it.
"""

from diagfuzz.impl import aten


class SilentFallback:
    uses_triton_registration = True

    def diagonal(self, x, offset=0, dim1=0, dim2=1):
        return aten.diagonal(x, offset, dim1, dim2)

    def diagonal_backward(self, grad_output, input_sizes, offset, dim1, dim2):
        return aten.diagonal_backward(grad_output, input_sizes, offset, dim1, dim2)


impl = SilentFallback()
