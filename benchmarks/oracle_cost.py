"""What the per-Case oracle costs: Cases/s of ``oracles.check`` and its device ops per Case.

Draws N Cases per stream (as a shard draws them, ``bench_throughput.draw``), freezes the
startup heap (``settle_heap``), warms up, then times ``oracles.check`` over them for each
impl (default ``diagfuzz.impl:triton_aten`` and ``diagfuzz.impl:aten``, whose calls cost
microseconds, so its row is the oracle's own cost). A second pass over the first
``--count-cases`` Cases counts, per Case, under a TorchDispatchMode:

Both passes start with the oracle's per-geometry caches empty (``clear_caches``).

``aten_ops``     every aten op the oracle issues from Python (views and allocations included).
``device_ops``   those that touch the device. On CUDA: an op with a CUDA tensor among its
                 arguments or results. On CPU (no device to tell apart): the ops issued inside
                 ``oracles.checks.device_side`` (the one function meant to touch the device
                 for a valid Case) and ``check_error_parity`` (invalid Cases), or inside all
                 of ``check`` when the oracle has no ``device_side`` (the older oracle, which
                 ran everything on the device; its CPU-only materialisation counts too).
``launches``     the device ops that start a kernel (not a view, allocation or metadata op),
                 plus sentinel fills (one per guarded allocation, made below the dispatch mode)
                 plus Triton launches: the proxy for GPU kernel launches.
``syncs``        device ops that make the host wait for the device (``equal``, ``item``,
                 ``nonzero``, ``bool(t)`` ... and copies to the host; on CPU, calls of
                 ``oracles.checks.to_host`` stand for the one copy back a Case makes).

Under the Triton interpreter (CPU) the interpreter's own tensor traffic shows up in the
triton_aten row; the aten row is the clean count of the oracle. On CUDA ``--cuda-profile``
adds what torch.profiler saw: kernels, memcpys and synchronisation calls per Case.

    python benchmarks/oracle_cost.py --cases 600 [--json PATH] [--cuda-profile]
    python benchmarks/oracle_cost.py --oracles-from OLD/oracles   # an older oracle, same Cases

A benchmark, never a timed test. Nothing asserts on time.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

import diagfuzz.ops as ops
from diagfuzz.impl import load_impl

# Imported by ``_import_oracles`` (``--oracles-from`` must come first): the oracle under test.
oracles: Any = None
checks: Any = None
sentinel: Any = None

_aten = torch.ops.aten
STREAMS = ("diagonal", "diagonal_backward", "invalid")
IMPLS = ("diagfuzz.impl:triton_aten", "diagfuzz.impl:aten")

#: Ops that make the host wait for the device (their result is a host value).
SYNC_OPS = {_aten.equal, _aten._local_scalar_dense, _aten.is_nonzero, _aten.nonzero,
            _aten.item, _aten.masked_select, _aten._unique2, _aten.unique_dim,
            _aten.unique_consecutive, _aten.allclose}
#: Ops that start no kernel: allocation and metadata (views are told by ``is_view``).
NO_KERNEL = {_aten.empty, _aten.empty_strided, _aten.empty_like, _aten.new_empty,
             _aten.set_, _aten.resize_, _aten.detach, _aten.lift_fresh, _aten.alias,
             _aten.as_strided, _aten.view, _aten._reshape_alias, _aten.unsqueeze,
             _aten.expand, _aten.t, _aten.view_as_real, _aten.view_as_complex,
             _aten._conj, _aten._neg_view}


def _tensors(*trees: Any) -> list[torch.Tensor]:
    leaves = []
    for tree in trees:
        leaves.extend(x for x in tree_flatten(tree)[0] if isinstance(x, torch.Tensor))
    return leaves


class OpCounter(TorchDispatchMode):
    """Counts aten ops, device ops, kernel-starting device ops and syncs (see the docstring)."""

    def __init__(self, cpu_proxy: bool) -> None:
        super().__init__()
        self.cpu_proxy = cpu_proxy
        self.in_scope = not cpu_proxy
        self.counts: Counter[str] = Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        self.counts["aten_ops"] += 1
        inputs = _tensors(args, kwargs)
        if self.cpu_proxy:
            on_device = self.in_scope
            to_host = False
        else:
            on_device = any(t.device.type != "cpu" for t in (*inputs, *_tensors(out)))
            to_host = (func.overloadpacket in (_aten._to_copy, _aten.copy_)
                       and any(t.device.type != "cpu" for t in inputs)
                       and all(t.device.type == "cpu" for t in _tensors(out)))
        if not on_device:
            return out
        self.counts["device_ops"] += 1
        packet = func.overloadpacket
        if not func.is_view and packet not in NO_KERNEL:
            self.counts["launches"] += 1
        if packet in SYNC_OPS or to_host or (
                packet is _aten.index and any(t.dtype == torch.bool for t in inputs[1:])):
            self.counts["syncs"] += 1
        return out


@contextmanager
def _counting(cpu_proxy: bool) -> Iterator[OpCounter]:
    """An OpCounter active for the block, with the oracle's device side and copies hooked."""
    counter = OpCounter(cpu_proxy)
    patched: list[tuple[Any, str, Any]] = []

    def wrap(owner: Any, name: str, before: Any) -> None:
        real = getattr(owner, name)

        def hooked(*args: Any, **kwargs: Any) -> Any:
            undo = before()
            try:
                return real(*args, **kwargs)
            finally:
                if undo:
                    undo()
        patched.append((owner, name, real))
        setattr(owner, name, hooked)

    def enter_scope() -> Any:
        was = counter.in_scope
        counter.in_scope = True

        def undo() -> None:
            counter.in_scope = was
        return undo

    def count(key: str) -> Any:
        def before() -> None:
            counter.counts[key] += 1
        return before

    if cpu_proxy and hasattr(checks, "device_side"):
        wrap(checks, "device_side", enter_scope)
        wrap(checks, "to_host", count("syncs"))
        wrap(checks, "check_error_parity", enter_scope)  # invalid Cases: all on the device
    elif cpu_proxy:
        wrap(checks, "check", enter_scope)  # the older oracle: everything ran on the device
        if oracles.check is not checks.check:
            wrap(oracles, "check", enter_scope)
    wrap(sentinel.SentinelAllocations, "_guarded", count("launches"))  # the sentinel fill
    try:
        with counter:
            yield counter
    finally:
        for owner, name, real in reversed(patched):
            setattr(owner, name, real)


def _import_oracles(directory: Path | None) -> None:
    """Import diagfuzz.oracles, from ``directory`` (e.g. an older commit's copy) if given."""
    global oracles, checks, sentinel
    if directory is not None:
        import importlib.util

        import diagfuzz

        spec = importlib.util.spec_from_file_location(
            "diagfuzz.oracles", directory / "__init__.py",
            submodule_search_locations=[str(directory)])
        if spec is None or spec.loader is None:
            raise SystemExit(f"--oracles-from {directory}: no oracles package there")
        module = importlib.util.module_from_spec(spec)
        sys.modules["diagfuzz.oracles"] = module
        spec.loader.exec_module(module)
        diagfuzz.oracles = module  # type: ignore[attr-defined]
    from diagfuzz import oracles as imported
    from diagfuzz.oracles import checks as imported_checks
    from diagfuzz.oracles import sentinel as imported_sentinel

    oracles, checks, sentinel = imported, imported_checks, imported_sentinel


def _launches() -> int:
    return sum(ops._counters.LAUNCHES.values())


def clear_caches() -> None:
    """Empty the oracle's per-geometry caches (``functools.lru_cache``), so each pass starts
    cold: a count taken after the timing pass would otherwise see only cache hits."""
    for name, module in list(sys.modules.items()):
        if name.startswith("diagfuzz.oracles"):
            for value in list(vars(module).values()):
                if callable(getattr(value, "cache_clear", None)):
                    value.cache_clear()


def time_stream(cases: list[Any], impl: Any, warm: int) -> dict[str, Any]:
    """Cases/s of ``oracles.check`` over ``cases`` after ``warm`` Cases of warm-up."""
    clear_caches()
    for case in cases[:warm]:
        oracles.check(case, impl, ops.DEVICE)
    kinds: Counter[str] = Counter()
    t0, c0 = time.perf_counter(), time.process_time()
    for case in cases:
        kinds[oracles.check(case, impl, ops.DEVICE).kind] += 1
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    if ops.DEVICE != "cpu":
        torch.cuda.synchronize()
    return {"cases": len(cases), "per_s": round(len(cases) / wall, 1),
            "per_cpu_s": round(len(cases) / cpu, 1), "verdicts": dict(kinds)}


def count_stream(cases: list[Any], impl: Any) -> dict[str, float]:
    """Per-Case aten ops, device ops, launches and syncs (see the module docstring)."""
    clear_caches()
    before = _launches()
    with _counting(ops.DEVICE == "cpu") as counter:
        for case in cases:
            oracles.check(case, impl, ops.DEVICE)
    counts = dict(counter.counts)
    counts["triton_launches"] = _launches() - before
    counts["launches"] = counts.get("launches", 0) + counts["triton_launches"]
    return {k: round(counts.get(k, 0) / len(cases), 2)
            for k in ("aten_ops", "device_ops", "launches", "syncs", "triton_launches")}


def cuda_profile(cases: list[Any], impl: Any) -> dict[str, float]:
    """Per Case on CUDA, from torch.profiler: kernels, memcpys, synchronisation calls."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for case in cases:
            oracles.check(case, impl, ops.DEVICE)
        torch.cuda.synchronize()
    seen: Counter[str] = Counter()
    for event in prof.events():
        name = event.name
        if event.device_type == torch.autograd.DeviceType.CUDA:
            seen["memcpys" if name.startswith("Memcpy") else
                 "memsets" if name.startswith("Memset") else "kernels"] += 1
        elif "Synchronize" in name:
            seen["sync_calls"] += 1
        elif name.startswith(("cudaMemcpy", "cuMemcpy")) and "Async" not in name:
            seen["sync_calls"] += 1  # a plain cudaMemcpy waits too
    return {k: round(v / len(cases), 2) for k, v in sorted(seen.items())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=600, help="Cases per stream")
    parser.add_argument("--count-cases", type=int, default=200,
                        help="Cases per stream in the counting pass")
    parser.add_argument("--warm", type=int, default=50, help="warm-up Cases per stream")
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--max-elements", type=int, default=4096)
    parser.add_argument("--impl", nargs="+", default=list(IMPLS))
    parser.add_argument("--streams", nargs="+", default=list(STREAMS), choices=STREAMS)
    parser.add_argument("--cuda-profile", action="store_true",
                        help="on CUDA: kernels/memcpys/syncs per Case from torch.profiler")
    parser.add_argument("--oracles-from", type=Path, default=None,
                        help="time the oracles package in this directory instead (before/after: "
                             "e.g. a copy of commit f8cbe9e's oracles/)")
    parser.add_argument("--json", type=Path, default=None, help="also write JSON here")
    args = parser.parse_args(argv)
    _import_oracles(args.oracles_from)
    from bench_throughput import draw  # Cases as a shard draws them (this directory)

    from diagfuzz.execution.runner import settle_heap

    drawn = {s: draw(s, args.cases, args.seed, args.max_elements)[0] for s in args.streams}
    impls = {spec: load_impl(spec) for spec in args.impl}
    settle_heap()
    rows: dict[str, dict[str, Any]] = {}
    for spec, impl in impls.items():
        for stream, cases in drawn.items():
            row = time_stream(cases, impl, args.warm)
            row["per_case"] = count_stream(cases[:args.count_cases], impl)
            if args.cuda_profile and ops.DEVICE != "cpu":
                row["cuda_profile"] = cuda_profile(cases[:args.count_cases], impl)
            rows[f"{spec.rsplit(':', 1)[-1]}/{stream}"] = row
    proxy = " (CPU proxy: ops inside the device side)" if ops.DEVICE == "cpu" else ""
    print(f"device {ops.DEVICE}, interpreter {ops.INTERPRET}, {args.cases} Cases per stream, "
          f"max {args.max_elements} elements{proxy}")
    print(f"{'impl/stream':<30}{'Cases/s':>9}{'/cpu-s':>9}{'aten':>8}{'dev ops':>9}"
          f"{'launch':>8}{'syncs':>7}  verdicts")
    for name, r in rows.items():
        p = r["per_case"]
        print(f"{name:<30}{r['per_s']:>9}{r['per_cpu_s']:>9}{p['aten_ops']:>8}"
              f"{p['device_ops']:>9}{p['launches']:>8}{p['syncs']:>7}  {r['verdicts']}"
              + (f"  cuda {r['cuda_profile']}" if "cuda_profile" in r else ""))
    result = {"device": ops.DEVICE, "interpreter": ops.INTERPRET, "torch": torch.__version__,
              "oracles": str(Path(checks.__file__).parent),
              "cases_per_stream": args.cases, "count_cases": args.count_cases,
              "max_elements": args.max_elements, "seed": args.seed,
              "loadavg": Path("/proc/loadavg").read_text().split()[:3]
              if Path("/proc/loadavg").exists() else None, "rows": rows}
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
