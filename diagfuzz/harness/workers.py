"""Per-worker isolation: one GPU, one Triton cache and one example database per xdist worker.

GPU pinning has to happen before CUDA initialises in the worker, which is earlier than any
pytest hook of the worker can promise. So the controller writes it into each worker's
execnet spec (``popen//env:CUDA_VISIBLE_DEVICES=N``): execnet sets it before the worker's
Python imports anything. Slots go round-robin over the *caller's* CUDA_VISIBLE_DEVICES (or
every GPU when that is unset). A worker that crashes is replaced by xdist with a clone of its
spec (a new id, gw4, gw5 ...), so the replacement inherits the same GPU: no drift.

Hypothesis' database lives under ``<root>/run-<seed>/<worker id>`` (a database per worker
never locks). Triton's cache is one directory for every worker and executor of a run,
``<root>/triton-cache`` (or ``DIAGFUZZ_TRITON_CACHE``, which the gate points at one cache for
all its stages), kept across runs: Triton writes each cache file to a directory of its own
and renames it into place, so processes sharing it never read a partial file, and a kernel
variant compiles once per machine, not once per worker and run.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping, Sequence
from pathlib import Path

#: Used for -n auto on a GPU machine when --diagfuzz-workers-per-gpu is not given: fuzzing
#: is mostly host-side Python (drawing, checking), so a few processes keep one GPU busy.
MAX_WORKERS_PER_GPU = 4
#: One Triton cache for every process of a run (the gate's stages share one).
TRITON_CACHE_ENV = "DIAGFUZZ_TRITON_CACHE"


def visible_gpus(environ: Mapping[str, str], device_count: int) -> list[str]:
    """The GPU ids workers may be pinned to: the caller's CUDA_VISIBLE_DEVICES entries
    (indices, UUIDs or MIG ids, kept verbatim), else ``0 .. device_count-1``."""
    listed = environ.get("CUDA_VISIBLE_DEVICES")
    if listed is None:
        return [str(i) for i in range(device_count)]
    entries = [e.strip() for e in listed.split(",") if e.strip()]
    # CUDA stops at the first invalid entry; "-1" is the usual way to hide every GPU.
    valid: list[str] = []
    for entry in entries:
        if entry.startswith("-"):
            break
        valid.append(entry)
    return valid


def pin_specs(specs: Sequence[str], gpus: Sequence[str]) -> list[str]:
    """Give each local (popen) xdist spec one GPU, round-robin; leave remote specs alone.

    ``specs`` are xdist's --tx values (``popen``, ``3*popen``, ``ssh=host``...); ``N*spec``
    is expanded so that each worker gets its own slot.
    """
    expanded: list[str] = []
    for spec in specs:
        count, star, rest = spec.partition("*")
        if star and count.isdigit():
            expanded.extend([rest] * int(count))
        else:
            expanded.append(spec)
    if not gpus:
        return expanded
    pinned, slot = [], 0
    for spec in expanded:
        if _is_popen(spec) and "env:CUDA_VISIBLE_DEVICES=" not in spec:
            spec = f"{spec}//env:CUDA_VISIBLE_DEVICES={gpus[slot % len(gpus)]}"
            slot += 1
        pinned.append(spec)
    return pinned


def share_this_interpreter(specs: Sequence[str]) -> bool:
    """Whether every worker of ``specs`` runs on this host under this interpreter (local
    popen, no ``python=``): only then can its executors fork from this process's server."""
    return all(_is_popen(spec) and not any(part.startswith("python=")
                                           for part in spec.split("//"))
               for spec in pin_specs(specs, []))


def _is_popen(spec: str) -> bool:
    return any(part == "popen" for part in spec.split("//"))


def auto_workers(n_gpus: int, cpus: int, per_gpu: int | None) -> int:
    """Workers for ``-n auto`` on a machine with ``n_gpus`` GPUs (at least one)."""
    if per_gpu is None:
        per_gpu = max(1, min(MAX_WORKERS_PER_GPU, cpus // n_gpus))
    return n_gpus * per_gpu


#: The most executors a pipelined worker feeds by default (auto_executors): each judges one
#: Case at a time, about 3 ms of its own CPU a Case on an H200 host, so a worker's pace
#: grows with its executors while CPUs last (H200, 4 workers, 60,000 Cases: 2,551 Cases/s
#: summed with 2 executors a worker, 3,209 with 3; BENCHMARKS.md, start-up).
FANOUT_EXECUTORS = 3


def auto_executors(n_workers: int, cpus: int) -> int:
    """Executors per worker when --diagfuzz-executors is not given: as many as let every
    worker and its executors have a CPU each, up to FANOUT_EXECUTORS, at least 1 (on 2 CPUs
    with 2 workers an extra executor only takes CPU time from the others)."""
    return max(1, min(FANOUT_EXECUTORS, cpus // max(n_workers, 1) - 1))


def pinned_gpu(environ: Mapping[str, str]) -> str | None:
    """The one GPU this worker sees (``pin_specs`` gives each local worker one), or None
    where it sees none or several (no GPU machine, or a caller that pinned otherwise)."""
    listed = environ.get("CUDA_VISIBLE_DEVICES")
    if listed is None:
        return None
    entries = [e.strip() for e in listed.split(",") if e.strip()]
    return entries[0] if len(entries) == 1 and not entries[0].startswith("-") else None


def shard_gpu(environ: Mapping[str, str], device: str) -> str | None:
    """The GPU a shard's Cases ran on, as the coverage table's ``gpu`` row names it: the
    worker's pinned GPU, else for a run on CUDA the first visible one (torch's ``cuda:0``,
    where Cases run), so a run without xdist names its GPU as a pinned worker would; None
    off CUDA or where nothing is visible."""
    pinned = pinned_gpu(environ)
    if pinned is not None or not device.startswith("cuda"):
        return pinned
    visible = visible_gpus(environ, 1)
    return visible[0] if visible else None


def worker_id(environ: Mapping[str, str]) -> str:
    """This process's xdist worker id, or ``main`` outside xdist."""
    return environ.get("PYTEST_XDIST_WORKER", "main")


def isolate(worker_dir: Path, environ: MutableMapping[str, str]) -> Path:
    """Create ``worker_dir`` (``<root>/run-<seed>/<worker>``) and the run's Triton cache
    (``DIAGFUZZ_TRITON_CACHE``, else ``<root>/triton-cache``, kept across runs); return the
    worker's database dir.

    Child processes (the executors) inherit the environment, so they share the cache.
    """
    cache = Path(environ.get(TRITON_CACHE_ENV) or worker_dir.parent.parent / "triton-cache")
    database = worker_dir / "hypothesis"
    cache.mkdir(parents=True, exist_ok=True)
    database.mkdir(parents=True, exist_ok=True)
    environ["TRITON_CACHE_DIR"] = str(cache)
    return database


def cpu_count() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1
