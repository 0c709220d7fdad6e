"""Where kernels run is decided when diagfuzz is imported, whatever imported Triton.

Without a GPU, Triton's interpreter must be chosen before ``triton`` is imported: its
language's own ``@triton.jit`` helpers are decorated at import, and an interpreted kernel
calling one decorated for a GPU fails deep inside a launch. Importing ``diagfuzz`` first is
enough; loading the kernels after Triton came first is refused with a message that says so.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from diagfuzz.core.runtime import INTERPRET

pytestmark = pytest.mark.skipif(not INTERPRET, reason="the interpreter is chosen only "
                                "without a CUDA GPU")

_CALL = ("import torch\nfrom diagfuzz.ops import diagonal_backward\n"
         "print(diagonal_backward(torch.arange(3.0), [3, 4], 0, 0, 1).sum().item())\n")


def _run(code: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "TRITON_INTERPRET": ""}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, check=False, env=env)


def test_diagfuzz_before_triton_runs_the_kernels() -> None:
    proc = _run("import diagfuzz\nimport triton\n" + _CALL)
    assert proc.returncode == 0 and proc.stdout.strip() == "3.0", proc.stderr[-2000:]


def test_triton_first_is_refused_with_what_to_do() -> None:
    proc = _run("import triton\n" + _CALL)
    assert proc.returncode != 0
    assert "import diagfuzz before triton" in proc.stderr, proc.stderr[-2000:]
