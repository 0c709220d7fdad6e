"""What one device hang costs the runner that meets it, on a GPU: the wait for a process
stuck in a synchronisation behind a kernel that never ends to exit once killed, and a
fresh executor's start (interpreter, torch, CUDA, the impl's import), alone and with
``--parallel`` starting at once (as the suite's workers replace theirs).

    python benchmarks/probes/hang_cost.py --impl examples.flaggems:impl --parallel 8

Why: under a planted device hang the suite's time grows by about these costs per hanging
Case; which one dominates says where to cut.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

# The repository root, so that executors (which take this process's path) import
# ``examples`` and ``tests`` as the gate's do, whatever directory it runs from.
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from diagfuzz.execution.parent import ProcessRunner  # noqa: E402

SPIN = """
import sys, torch
from tests.faulty.shape_fault import _device_spin
x = torch.zeros(1, device=sys.argv[1])
if x.is_cuda:  # the launch returns (compiled first); the host then blocks in C
    _device_spin((x,))
    print("launched", flush=True)
    torch.cuda.synchronize()
print("spinning on the host", flush=True)
_device_spin((x,))
"""


def kill_wait(device: str) -> float:
    """Seconds from SIGKILL to the exit of a process blocked behind a spinning kernel (on
    the CPU, under Triton's interpreter, the kernel spins on the host)."""
    proc = subprocess.Popen([sys.executable, "-c", SPIN, device], stdout=subprocess.PIPE,
                            text=True, cwd=ROOT)
    assert proc.stdout is not None
    proc.stdout.readline()
    time.sleep(0.5)
    started = time.perf_counter()
    proc.kill()
    proc.wait()
    return time.perf_counter() - started


def start(impl: str, device: str) -> float:
    """Seconds until a fresh executor of ``impl`` is ready for its first Case."""
    started = time.perf_counter()
    runner = ProcessRunner(impl, device, timeout=120)
    try:
        runner.start()
        return time.perf_counter() - started
    finally:
        runner.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--impl", default="diagfuzz.impl:triton_aten")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--parallel", type=int, default=8)
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    waits = [kill_wait(args.device) for _ in range(args.rounds)]
    alone = [start(args.impl, args.device) for _ in range(args.rounds)]
    with ThreadPoolExecutor(args.parallel) as pool:
        together = list(pool.map(lambda _: start(args.impl, args.device),
                                 range(args.parallel)))
    print(f"kill wait (s): median {statistics.median(waits):.3f}, all "
          f"{[round(w, 3) for w in waits]}")
    print(f"executor start alone (s), {args.impl}: median {statistics.median(alone):.2f}, "
          f"all {[round(s, 2) for s in alone]}")
    print(f"executor start, {args.parallel} at once (s): median "
          f"{statistics.median(together):.2f}, max {max(together):.2f}")


if __name__ == "__main__":
    main()
