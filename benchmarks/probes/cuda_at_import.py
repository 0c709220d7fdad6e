"""Which import or call loads the CUDA driver while the fork server preloads (CUDA host).

The fork server (``diagfuzz.execution.forkserver``) may fork executors only if its
preloading never loaded ``libcuda`` nor started a thread. This probe imports what it
imports, in its order, and prints the Python stack at the first moment ``libcuda`` is
mapped: at the driver's loaders it knows (``ctypes.CDLL``, torch's device count) and,
failing those, after the first import statement that mapped it.

    python3 benchmarks/probes/cuda_at_import.py
"""

from __future__ import annotations

import builtins
import ctypes
import glob
import os
import traceback

os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"  # as the server sets it


def mapped() -> bool:
    with open("/proc/self/maps") as maps:
        return "libcuda.so" in maps.read()


def threads() -> list[str]:
    return sorted(open(p).read().strip() for p in glob.glob("/proc/self/task/*/comm"))


seen = [False]


def report(what: str) -> None:
    if not seen[0]:
        seen[0] = True
        print(f"== libcuda mapped: {what}; threads {threads()}")
        traceback.print_stack(limit=25)


real_cdll_init = ctypes.CDLL.__init__


def cdll_init(self: ctypes.CDLL, name: str | None, *args: object, **kwargs: object) -> None:
    if name and "cuda" in str(name):
        print(f"== ctypes.CDLL({name!r})")
        traceback.print_stack(limit=25)
    real_cdll_init(self, name, *args, **kwargs)


ctypes.CDLL.__init__ = cdll_init  # type: ignore[method-assign]

import torch  # noqa: E402

print("torch imported; libcuda mapped:", mapped(), "threads:", len(threads()))
print("NVML device count:", torch.cuda._device_count_nvml(), "mapped:", mapped())
real_count = torch._C._cuda_getDeviceCount


def counted() -> int:
    print("== torch._C._cuda_getDeviceCount called")
    traceback.print_stack(limit=25)
    return real_count()


torch._C._cuda_getDeviceCount = counted
real_import = builtins.__import__


def hooked(name: str, *args: object, **kwargs: object) -> object:
    module = real_import(name, *args, **kwargs)
    if not seen[0] and mapped():
        report(f"after importing {name}")
    return module


builtins.__import__ = hooked
torch.set_num_threads(1)
import diagfuzz.execution.child  # noqa: E402
import diagfuzz.oracles  # noqa: E402

print("oracle imported; mapped:", mapped(), "threads:", threads())
import diagfuzz.ops  # noqa: E402,F401

print("ops imported; mapped:", mapped(), "threads:", threads())
