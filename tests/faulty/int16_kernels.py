"""diagfuzz's own kernels, broken for 2-byte words: every launch on int16/float16/bfloat16
raises. The impl is the default (``triton_aten``), so only Cases of those dtypes fail; an
executor must still start (its warm-up never calls the kernels) and report them as Cases."""

from __future__ import annotations

import importlib
from typing import Any

from diagfuzz.impl import triton_aten


def _broken(launch: Any) -> Any:
    def launch_unless_2_byte(plan: Any, tensors: Any) -> None:
        if tensors[0].element_size() == 2:
            raise RuntimeError("simulated kernel bug: 2-byte words")
        launch(plan, tensors)
    return launch_unless_2_byte


for _name in ("diagfuzz.ops.diagonal_copy", "diagfuzz.ops.diagonal_backward"):
    _module = importlib.import_module(_name)
    _module._launch = _broken(_module._launch)

impl = triton_aten
