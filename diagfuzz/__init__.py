"""diagfuzz: a bitwise test oracle and fuzzer for Triton kernels of PyTorch's diagonal family.

The harness (pytest plugin, command line, isolation, reproducers) lives here; the kernels,
strategies and oracles are ``diagfuzz.ops``, ``diagfuzz.strategies``, ``diagfuzz.oracles``.
"""

# Decide where kernels run before anything imports Triton (a test module or an impl that
# imports triton first would otherwise get Triton's language decorated for a GPU).
from diagfuzz.core import runtime as _runtime  # noqa: F401

__version__ = "0.1.0"
