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


def visible_gpu_nodes() -> int | None:
    """The NVIDIA GPUs this process can open, counted from their device nodes
    (``/dev/nvidia0`` ...) without importing torch or initialising a driver: 0 where
    ``no_gpu_here``; None where only torch can tell (an AMD device node)."""
    if no_gpu_here():
        return 0
    if not Path("/dev/nvidiactl").exists():
        return None
    return sum(1 for node in Path("/dev").glob("nvidia*") if node.name[6:].isdigit())


def device_without_torch() -> str | None:
    """Where kernels will run (``diagfuzz.core.runtime.DEVICE``) where that is certain
    without torch: "cpu" under Triton's interpreter (chosen by ``preselect`` or by the
    user); None where torch must be asked (a GPU device node is there)."""
    if os.environ.get("DIAGFUZZ_COMPILE_ONLY", "0") not in ("", "0"):
        return None
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0") or no_gpu_here():
        return "cpu"
    return None


def likely_device() -> str | None:
    """``device_without_torch``, else "cuda" where NVIDIA GPUs can be opened and the
    installed torch is a CUDA build (read from ``torch/version.py``, not imported): a worker
    launches its executors on it before it imports torch, and checks it once it has."""
    certain = device_without_torch()
    if certain is not None:
        return certain
    if not visible_gpu_nodes():
        return None
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        return None
    try:
        source = (Path(spec.origin).parent / "version.py").read_text(encoding="utf-8")
    except OSError:
        return None
    for line in source.splitlines():
        name, _, value = line.partition("=")
        if name.split(":")[0].strip() == "cuda":
            return None if value.strip() in ("", "None") else "cuda"
    return None
