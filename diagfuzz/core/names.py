"""The names a run's options choose from, without importing torch.

Why apart from the modules that use them: the pytest controller and ``diagfuzz gate`` check
``--diagfuzz-dtypes``, ``--diagfuzz-layouts`` and ``--diagfuzz-ranks`` before anything
imports torch (the workers import it; the controller only plans).
"""

from __future__ import annotations

#: dtype names a Case may carry, in the order coverage reports list them.
DTYPE_NAMES = (
    "bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
    "float64", "complex64", "complex128", "float8_e4m3fn", "float8_e5m2",
    "float8_e4m3fnuz", "float8_e5m2fnuz",
)

#: The layout kinds the strategies draw (``diagfuzz.strategies.layouts``).
LAYOUT_KINDS = ("contiguous", "permuted", "channels_last", "sliced", "offset", "expanded")

#: The largest rank a strategy accepts: beyond it a Case is slow to draw and to read.
MAX_RANK = 16
