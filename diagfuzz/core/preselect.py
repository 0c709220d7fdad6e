"""Choose Triton's interpreter at ``import diagfuzz`` where certainly no GPU exists, without
importing torch.

Why here: the interpreter is selected when ``triton.jit`` decorates a kernel, so it must be
chosen before anything imports Triton, and pytest imports ``diagfuzz`` (its plugin entry
point) before any test module. Why without torch: every pytest run of a project with
diagfuzz installed, and every process of a fuzz run (controller, workers, executors),
imports ``diagfuzz``; importing torch there cost 3.4 s of a pytest controller's start on an
H200 host (BENCHMARKS.md). With no GPU device node the answer is certain, and the
interpreter is chosen here; with one, ``diagfuzz.core.runtime`` decides when a kernel
module is first imported (it asks torch).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

#: Triton was imported, not interpreted, before ``import diagfuzz`` (read by
#: ``diagfuzz.core.runtime``, which refuses interpreted kernels then).
TRITON_FIRST: bool = ("triton" in sys.modules
                      and os.environ.get("TRITON_INTERPRET", "0") in ("", "0"))

#: Device nodes a CUDA (NVIDIA) or ROCm (AMD) torch needs to see a GPU.
GPU_DEVICE_NODES = ("/dev/nvidiactl", "/dev/kfd")


def no_gpu_here() -> bool:
    """True when no torch build could use a GPU here: no NVIDIA or AMD device node, or
    CUDA_VISIBLE_DEVICES hides every GPU ("" or starting with "-1")."""
    hidden = os.environ.get("CUDA_VISIBLE_DEVICES")
    if hidden is not None and (not hidden.strip() or hidden.strip().startswith("-")):
        return True
    return not any(Path(node).exists() for node in GPU_DEVICE_NODES)


def preselect() -> None:
    """Set TRITON_INTERPRET=1 where no GPU can exist (as ``diagfuzz.core.runtime`` would),
    unless this is a compile-only run (``diagfuzz.core.runtime.COMPILE_ONLY_ENV``)."""
    if os.environ.get("DIAGFUZZ_COMPILE_ONLY", "0") not in ("", "0"):
        return
    if no_gpu_here():
        os.environ["TRITON_INTERPRET"] = "1"
