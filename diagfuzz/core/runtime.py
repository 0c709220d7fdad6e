"""Where kernels run, decided before Triton is imported.

With no CUDA GPU, kernels run on CPU tensors through Triton's interpreter. The interpreter is
selected when ``triton.jit`` decorates a kernel, so this module must run before any kernel
module is imported: ``diagfuzz.ops`` and the core import it first. The user never sets
TRITON_INTERPRET.
"""

from __future__ import annotations

import os
import sys

import torch

from diagfuzz.core import preselect

#: Triton was imported before this module decided on the interpreter: its language's own
#: ``@triton.jit`` helpers were then decorated for a GPU, and interpreted kernels that call
#: them fail ("Cannot call @triton.jit'd outside of the scope of a kernel").
TRITON_FIRST: bool = preselect.TRITON_FIRST or (
    "triton" in sys.modules and os.environ.get("TRITON_INTERPRET", "0") in ("", "0"))

#: Set to 1 to plan and compile kernels for a CUDA GPU on a machine without one
#: (``python -m diagfuzz.ops._gpu_compile``): nothing is interpreted, nothing launched.
COMPILE_ONLY_ENV = "DIAGFUZZ_COMPILE_ONLY"
COMPILE_ONLY: bool = os.environ.get(COMPILE_ONLY_ENV, "0") not in ("", "0")

if COMPILE_ONLY:
    os.environ["TRITON_INTERPRET"] = "0"  # the interpreter's patches break the compiler
elif not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"

#: True when kernels run through Triton's interpreter (CPU tensors), False on a CUDA GPU.
INTERPRET: bool = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")

#: The device the kernels run on (the default device of every run), and the dispatch key
#: they are registered under.
DEVICE: str = "cpu" if INTERPRET else "cuda"
DISPATCH_KEY: str = "CPU" if INTERPRET else "CUDA"


def check_import_order() -> None:
    """Refuse to load interpreted kernels when Triton came first (``TRITON_FIRST``)."""
    if INTERPRET and TRITON_FIRST and not COMPILE_ONLY:
        raise ImportError(
            "triton was imported before diagfuzz on a machine without a CUDA GPU, so "
            "Triton's interpreter cannot run diagfuzz's kernels: import diagfuzz before "
            "triton, or set TRITON_INTERPRET=1 before importing triton")
