"""diagfuzz: a bitwise test oracle and fuzzer for Triton kernels of PyTorch's diagonal family.

The harness (pytest plugin, command line, isolation, reproducers) lives here; the kernels,
strategies and oracles are ``diagfuzz.ops``, ``diagfuzz.strategies``, ``diagfuzz.oracles``.
"""

__version__ = "0.1.0"
