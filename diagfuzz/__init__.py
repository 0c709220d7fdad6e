"""diagfuzz: a bitwise test oracle and fuzzer for Triton kernels of PyTorch's diagonal family.

The harness (pytest plugin, command line, isolation, reproducers) lives here; the kernels,
strategies and oracles are ``diagfuzz.ops``, ``diagfuzz.strategies``, ``diagfuzz.oracles``.
"""

# Choose Triton's interpreter before anything imports Triton where no GPU can exist (a test
# module or an impl that imports triton first would otherwise get Triton's language
# decorated for a GPU), without importing torch (diagfuzz.core.preselect).
from diagfuzz.core.preselect import preselect as _preselect

_preselect()

__version__ = "0.1.0"
