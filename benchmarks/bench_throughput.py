"""Fuzzing throughput: Cases per second per worker, scaling over workers, Triton compilations.

Three modes (a benchmark, never a timed test; numbers go to BENCHMARKS.md):

``runner``  Draws Cases of each stream with Hypothesis, then runs them through one runner in
            this process: Cases/s of drawing, of running, and of both (what one worker can
            do), also per CPU second of this process (steady when other work loads the
            machine; in-process isolation only) with the load average, and Triton launches
            per Case. By default it draws Case families as the suite does (about --cases
            Cases in --cases / MEAN_MEMBERS examples; rates count Cases, ``members`` is
            the mean family size); ``--no-families`` draws one Case per example.
            ``--profile`` adds where the time goes (cProfile, by
            function); the profiler about halves every rate (the interpreter is
            Python-heavy), so take throughput from a run without it. With
            ``--isolation process`` it also measures the pipelined worker
            (``pipelined/s``): the same families drawn again while the executor checks
            earlier ones (``ProcessRunner.submit``/``poll``, as a pipelined shard does), so
            the rate is about min(draw, check) instead of 1/(1/draw + 1/check).
            ``--batch N`` (in-process) judges the timed Cases N at a time with
            ``oracles.check_batch``, as an executor judges what is queued for it.
            ``--executors N`` feeds N executors (``diagfuzz.execution.fanout``, as
            ``--diagfuzz-executors`` does): only ``pipelined/s`` can gain (``run/s`` checks
            one Case at a time), and only with a core per executor.
``suite``   The real suite under pytest-xdist with 1, then 2 ... workers, each worker given
            the same budget (so W workers get W times the Cases): wall time, Cases, Cases/s.
            Equal times mean the run scales.
``compilations``  N Cases through the kernels in this process, counting distinct Triton
            compilations per kernel and element size (a variant is one compiled binary).
            Under the Triton interpreter nothing is compiled: it says so and exits 0.

    python benchmarks/bench_throughput.py runner --cases 300 [--isolation process] [--profile]
                                                 [--no-families] [--executors N]
                                                 [--isolation inprocess --batch 64]
    python benchmarks/bench_throughput.py suite --workers 1 2 --budget-per-worker 1500
    python benchmarks/bench_throughput.py compilations --cases 10000

``--json PATH`` writes the numbers as JSON as well.
"""

from __future__ import annotations

import argparse
import cProfile
import importlib
import json
import os
import pkgutil
import pstats
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from diagfuzz.execution.profiling import PROFILE_ENV

REPO = Path(__file__).resolve().parents[1]
#: stream -> (Case strategy, Case family strategy) of diagfuzz.strategies.
STREAMS = {
    "diagonal": ("diagonal_cases", "diagonal_case_families"),
    "diagonal_backward": ("diagonal_backward_cases", "diagonal_backward_case_families"),
    "invalid": ("invalid_cases", "invalid_case_families"),
}


def draw(stream: str, count: int, seed: int, max_elements: int,
         families: bool = False) -> tuple[list[Any], int]:
    """About ``count`` Cases of ``stream``, drawn the way a shard draws them (one seed), and
    how many Hypothesis examples drew them: ``count`` Cases, or (``families``) as many
    Case families as the suite would draw for ``count`` Cases, every member kept."""
    import math

    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed

    from diagfuzz import strategies

    name = STREAMS[stream][families]
    strategy = getattr(strategies, name)(max_elements=max_elements)
    examples = math.ceil(count / strategies.MEAN_MEMBERS) if families else count
    drawn: list[Any] = []

    @settings(max_examples=examples, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @hseed(seed)
    @given(strategy)
    def collect(drawn_one: Any) -> None:
        drawn.extend(drawn_one if families else (drawn_one,))

    collect()
    return drawn, examples


def draw_and_submit(stream: str, count: int, seed: int, max_elements: int, families: bool,
                    runner: Any) -> tuple[int, Counter[str]]:
    """Draw as ``draw`` does, but submit each example's Cases to ``runner`` at once and
    collect verdicts as they arrive (a pipelined shard's phase 1); waits for all at the
    end. Returns the Cases checked and their verdict kinds."""
    import math

    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed

    from diagfuzz import strategies

    name = STREAMS[stream][families]
    strategy = getattr(strategies, name)(max_elements=max_elements)
    examples = math.ceil(count / strategies.MEAN_MEMBERS) if families else count
    kinds: Counter[str] = Counter()
    submitted = 0

    @settings(max_examples=examples, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @hseed(seed)
    @given(strategy)
    def submit(drawn_one: Any) -> None:
        nonlocal submitted
        kinds.update(v.kind for _, v in runner.poll())
        for case in drawn_one if families else (drawn_one,):
            runner.submit(case)
            submitted += 1

    submit()
    kinds.update(v.kind for _, v in runner.drain())
    return submitted, kinds


def make_runner(isolation: str, impl: str, executors: int = 1) -> Any:
    """The runner a suite worker would use (``executors`` > 1: a FanoutRunner over them,
    as ``--diagfuzz-executors`` gives a pipelined worker)."""
    import diagfuzz.ops as ops

    if isolation == "process":
        from diagfuzz.execution.parent import ProcessRunner

        if executors > 1:
            from diagfuzz.execution.fanout import FanoutRunner

            return FanoutRunner([ProcessRunner(impl, ops.DEVICE) for _ in range(executors)])
        return ProcessRunner(impl, ops.DEVICE)
    from diagfuzz.execution.runner import InProcessRunner

    return InProcessRunner(impl, ops.DEVICE)


def bench_runner(args: argparse.Namespace) -> dict[str, Any]:
    """Cases/s of drawing and running, per stream, in one process (one worker's work)."""
    import diagfuzz.ops._counters as ops

    args.executors = args.executors or 1
    runner = make_runner(args.isolation, args.impl, args.executors)
    rows: dict[str, Any] = {}
    profiler = cProfile.Profile() if args.profile else None
    try:
        for stream in STREAMS:
            t0, c0 = time.perf_counter(), time.process_time()
            cases, examples = draw(stream, args.cases, args.seed, args.max_elements,
                                   args.families)
            drawn_s, drawn_cpu = time.perf_counter() - t0, time.process_time() - c0
            # Warm: executor start, first interpreter setup (every executor of a fan-out).
            for warm in getattr(runner, "runners", [runner]):
                warm.run(cases[0])
            kinds: Counter[str] = Counter()
            if profiler is not None:
                profiler.enable()
            launched = sum(ops.LAUNCHES.values())
            t0, c0 = time.perf_counter(), time.process_time()
            if args.batch > 1 and args.isolation == "inprocess":
                from diagfuzz import oracles

                for start in range(0, len(cases), args.batch):
                    chunk = cases[start:start + args.batch]
                    for verdict in oracles.check_batch(chunk, runner.impl, runner.device,
                                                       strict=runner.strict):
                        kinds[verdict.kind] += 1
            else:
                for case in cases:
                    kinds[runner.run(case).kind] += 1
            run_s, run_cpu = time.perf_counter() - t0, time.process_time() - c0
            launched = sum(ops.LAUNCHES.values()) - launched
            inprocess = args.isolation == "inprocess"  # else the executor does the work
            if profiler is not None:
                profiler.disable()
            n = len(cases)
            piped = None
            if hasattr(runner, "submit"):  # (batches as the executor forms them)
                t0 = time.perf_counter()
                checked, piped_kinds = draw_and_submit(stream, args.cases, args.seed,
                                                       args.max_elements, args.families,
                                                       runner)
                piped = round(checked / (time.perf_counter() - t0), 1)
                assert piped_kinds == kinds, (stream, piped_kinds, kinds)  # same Cases
            rows[stream] = {"cases": n, "examples": examples,
                            "pipelined_per_s": piped,
                            "members": round(n / examples, 2),
                            "draw_per_s": round(n / drawn_s, 1),
                            "run_per_s": round(n / run_s, 1),
                            "both_per_s": round(n / (drawn_s + run_s), 1),
                            "both_per_cpu_s": (round(n / (drawn_cpu + run_cpu), 1)
                                               if inprocess else None),
                            "launches_per_case": round(launched / n, 3) if inprocess else None,
                            "verdicts": dict(kinds)}
    finally:
        runner.close()
    total = sum(r["cases"] for r in rows.values())
    both = total / sum(r["cases"] / r["both_per_s"] for r in rows.values())
    both_cpu = (total / sum(r["cases"] / r["both_per_cpu_s"] for r in rows.values())
                if args.isolation == "inprocess" else float("nan"))
    print(f"{'stream':<18}{'cases':>7}{'members':>8}{'draw/s':>9}{'run/s':>9}{'both/s':>9}"
          f"{'piped/s':>9}{'/cpu-s':>9}{'launch':>8}  verdicts")
    for stream, r in rows.items():
        print(f"{stream:<18}{r['cases']:>7}{r['members']:>8}{r['draw_per_s']:>9}"
              f"{r['run_per_s']:>9}"
              f"{r['both_per_s']:>9}{_or_na(r['pipelined_per_s']):>9}"
              f"{_or_na(r['both_per_cpu_s']):>9}"
              f"{_or_na(r['launches_per_case']):>8}"
              f"  {r['verdicts']}")
    per_cpu = f"{both_cpu:.1f} per CPU second; " if both_cpu == both_cpu else ""
    drawn = total / sum(r["cases"] / r["draw_per_s"] for r in rows.values())
    how = "Case families" if args.families else "one Case per example"
    piped = (total / sum(r["cases"] / r["pipelined_per_s"] for r in rows.values())
             if all(r["pipelined_per_s"] for r in rows.values()) else None)
    piped_text = f"; {piped:.1f} Cases/s pipelined" if piped else ""
    fan = f", {args.executors} executors" if args.executors > 1 else ""
    fan += f", batches of {args.batch}" if args.batch > 1 else ""
    print(f"one worker ({args.isolation}{fan}, impl {args.impl}, {how}): {drawn:.1f} Cases/s "
          f"drawn; {both:.1f} Cases/s drawn and run{piped_text} ({per_cpu}load average "
          f"{_loadavg()})")
    result = {"mode": "runner", "isolation": args.isolation, "impl": args.impl,
              "batch": args.batch,
              "executors": args.executors,
              "families": args.families, "draw_per_s": round(drawn, 1),
              "max_elements": args.max_elements, "streams": rows,
              "cases_per_s": round(both, 1),
              "pipelined_cases_per_s": round(piped, 1) if piped else None,
              "cases_per_cpu_s": round(both_cpu, 1) if both_cpu == both_cpu else None,
              "loadavg": _loadavg()}
    if profiler is not None:
        result["profile"] = _where_time_goes(profiler, args.top)
    return result


def _or_na(value: float | None) -> str:
    """A number, or n/a where this process cannot see it (the executor does the work)."""
    return "n/a" if value is None else str(value)


def _loadavg() -> str:
    """The 1/5/15-minute load average (other work on the machine skews wall-clock rates)."""
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "n/a"


def _where_time_goes(profiler: cProfile.Profile | pstats.Stats, top: int = 18,
                     what: str = "the run time") -> list[dict[str, Any]]:
    """The functions with the most cumulative time while running Cases."""
    stats = profiler if isinstance(profiler, pstats.Stats) else pstats.Stats(profiler)
    total = max(stats.total_tt, 1e-9)  # type: ignore[attr-defined]
    rows = []
    for (file, line, func), (_, ncalls, _tt, ct, _) in stats.stats.items():  # type: ignore[attr-defined]
        rows.append({"function": f"{Path(file).name}:{line}({func})", "calls": ncalls,
                     "cum_s": round(ct, 3), "share": round(ct / total, 3)})
    rows.sort(key=lambda r: -r["cum_s"])
    print(f"\nwhere {what} goes (cumulative, of {total:.2f}s):")
    for r in rows[:top]:
        print(f"  {r['share']:>6.1%} {r['cum_s']:>8.3f}s {r['calls']:>8}  {r['function']}")
    return rows[:top]


def bench_suite(args: argparse.Namespace) -> dict[str, Any]:
    """The suite under 1, 2 ... xdist workers, the same budget per worker."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.workers:
            report = Path(tmp) / f"report-{n}.json"
            budget = args.budget_per_worker * n
            command = [sys.executable, "-m", "pytest", "-p", "diagfuzz", "--pyargs",
                       "diagfuzz.suite", "-q", "-p", "no:cacheprovider", "-n", str(n),
                       "--hypothesis-profile", args.profile_name, f"--impl={args.impl}",
                       f"--diagfuzz-seed={args.seed}", f"--diagfuzz-budget={budget}",
                       f"--diagfuzz-max-elements={args.max_elements}",
                       f"--diagfuzz-isolation={args.isolation}",
                       *([f"--diagfuzz-executors={args.executors}"] if args.executors else []),
                       *([f"--diagfuzz-max-members={args.max_members}"]
                         if args.max_members else []),
                       f"--diagfuzz-root={args.root or Path(tmp) / 'root'}",
                       f"--diagfuzz-report={report}"]
            env = dict(os.environ)
            profiles = Path(tmp) / f"profile-{n}"
            # Each worker and executor writes its own (diagfuzz.execution.profiling).
            if args.profile:
                env[PROFILE_ENV] = str(profiles)
            t0 = time.perf_counter()
            proc = subprocess.run(command, cwd=REPO, capture_output=True, text=True,
                                  check=False, env=env)
            wall = time.perf_counter() - t0
            if not report.exists():
                print(proc.stdout[-3000:] + proc.stderr[-3000:], file=sys.stderr)
                raise SystemExit(f"suite with {n} workers wrote no report")
            data = json.loads(report.read_text())
            cases = data["cases"]
            rows.append({"workers": n, "executors": data.get("executors"),
                         "budget": budget, "cases": cases,
                         "wall_s": round(wall, 2), "pytest_s": data["duration_s"],
                         "cases_per_s": round(cases / wall, 1),
                         "cases_per_s_per_worker": round(cases / wall / n, 1),
                         "in_shards_per_worker": data.get("pace", {}).get(
                             "cases_per_s_per_worker"),
                         "outside_shards_s": data.get("pace", {}).get("outside_shards_s"),
                         "findings": len(data.get("findings", [])),
                         "exit": proc.returncode})
            if args.profile:
                for role in ("worker", "executor"):
                    files = sorted(str(p) for p in profiles.glob(f"{role}-*.pstats"))
                    if files:
                        rows[-1][f"{role}_profile"] = _where_time_goes(
                            pstats.Stats(*files), args.top,
                            f"{n} worker(s)' {role} time ({len(files)} processes)")
    print(f"{'workers':>7}{'execs':>6}{'budget':>8}{'cases':>8}{'wall s':>8}{'cases/s':>9}"
          f"{'/worker':>9}{'in shards/worker':>17}{'outside s':>10}")
    for r in rows:
        print(f"{r['workers']:>7}{_or_na(r['executors']):>6}{r['budget']:>8}{r['cases']:>8}"
              f"{r['wall_s']:>8}"
              f"{r['cases_per_s']:>9}{r['cases_per_s_per_worker']:>9}"
              f"{_or_na(r['in_shards_per_worker']):>17}{_or_na(r['outside_shards_s']):>10}")
    if len(rows) > 1:
        base = rows[0]
        for r in rows[1:]:
            print(f"{r['workers']} workers: {r['cases'] / base['cases']:.2f}x the Cases in "
                  f"{r['wall_s'] / base['wall_s']:.2f}x the time of {base['workers']}")
    return {"mode": "suite", "isolation": args.isolation, "profile": args.profile_name,
            "executors": args.executors, "max_members": args.max_members,
            "max_elements": args.max_elements, "cpus": os.cpu_count(), "rows": rows}


def jit_kernels() -> dict[str, Any]:
    """Every @triton.jit kernel of diagfuzz.ops, by module.attribute."""
    from triton.runtime.jit import JITFunction

    import diagfuzz.ops as ops

    found = {}
    for info in pkgutil.iter_modules(ops.__path__, "diagfuzz.ops."):
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if isinstance(value, JITFunction):
                found[f"{info.name.rsplit('.', 1)[1]}.{name}"] = value
    return found


def compiled_keys(kernel: Any) -> list[str]:
    """The cache keys of a kernel's compiled variants, over all devices (Triton 3.6 and 3.9)."""
    caches = getattr(kernel, "device_caches", None) or {}
    keys = []
    for entry in caches.values():
        cache = entry[0] if isinstance(entry, tuple) else entry
        keys.extend(str(k) for k in cache)
    return keys


def bench_compilations(args: argparse.Namespace) -> dict[str, Any]:
    """Distinct compiled variants per kernel and pointer word type over an N-Case run."""
    import diagfuzz.ops as ops

    if ops.INTERPRET:
        print("compilations: not applicable under the Triton interpreter (no GPU here: "
              "kernels are interpreted, nothing is compiled). Run on a CUDA machine.")
        return {"mode": "compilations", "applicable": False}
    runner = make_runner("inprocess", args.impl)
    per_stream = max(1, args.cases // 2)
    t0 = time.perf_counter()
    ran: Counter[str] = Counter()
    for stream in ("diagonal", "diagonal_backward"):
        for case in draw(stream, per_stream, args.seed, args.max_elements, args.families)[0]:
            ran[runner.run(case).kind] += 1
    seconds = time.perf_counter() - t0
    kernels = {}
    for name, kernel in jit_kernels().items():
        keys = compiled_keys(kernel)
        by_words = Counter(" ".join(sorted(set(re.findall(r"\*[a-z]+\d+", k)))) or "?"
                           for k in keys)
        kernels[name] = {"variants": len(keys), "by_pointer_types": dict(by_words)}
    print(f"{sum(ran.values())} Cases in {seconds:.1f}s ({sum(ran.values()) / seconds:.0f}/s), "
          f"verdicts {dict(ran)}")
    for name, k in kernels.items():
        print(f"{name}: {k['variants']} compiled variants; by pointer types "
              f"{k['by_pointer_types']}")
    return {"mode": "compilations", "applicable": True, "cases": sum(ran.values()),
            "seconds": round(seconds, 2), "verdicts": dict(ran), "kernels": kernels}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("runner", "suite", "compilations"))
    parser.add_argument("--cases", type=int, default=300,
                        help="runner: Cases per stream; compilations: Cases in all")
    parser.add_argument("--impl", default="diagfuzz.impl:triton_aten")
    parser.add_argument("--isolation", choices=("process", "inprocess"), default="process")
    parser.add_argument("--executors", type=int, default=None,
                        help="process isolation: executors one worker feeds (runner: a "
                             "FanoutRunner, pipelined/s is where they can gain; default 1; "
                             "suite: --diagfuzz-executors, default the plugin's, by CPUs)")
    parser.add_argument("--batch", type=int, default=1,
                        help="runner, inprocess: judge the timed Cases in batches of this "
                             "many (oracles.check_batch, as an executor does); 1: one by one")
    parser.add_argument("--max-elements", type=int, default=4096)
    parser.add_argument("--max-members", type=int, default=None,
                        help="suite: --diagfuzz-max-members (default the profile's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile", action="store_true",
                        help="where time goes (suite: every worker's and executor's)")
    parser.add_argument("--top", type=int, default=18, help="--profile: functions listed")
    parser.add_argument("--families", action=argparse.BooleanOptionalAction, default=True,
                        help="runner, compilations: draw Case families as the suite does "
                             "(default) or one Case per Hypothesis example")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--budget-per-worker", type=int, default=1500)
    parser.add_argument("--profile-name", default="dev", help="suite: Hypothesis profile")
    parser.add_argument("--root", type=Path, default=None,
                        help="suite: --diagfuzz-root to use (default a fresh temporary one: "
                             "cold Triton caches); a kept root times warm caches")
    parser.add_argument("--json", type=Path, default=None, help="also write JSON here")
    args = parser.parse_args(argv)
    if args.mode == "compilations" and args.cases == 300:
        args.cases = 10_000
    result = {"runner": bench_runner, "suite": bench_suite,
              "compilations": bench_compilations}[args.mode](args)
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    failed = [r for r in result.get("rows", []) if r.get("exit") or r.get("failures")]
    for r in failed:  # a rate of a run that failed is no rate: callers must see it
        print(f"suite with {r['workers']} workers: exit {r['exit']}, {r['failures']} "
              f"failures", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
