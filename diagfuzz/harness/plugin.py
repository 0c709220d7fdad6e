"""The diagfuzz pytest plugin: sharded fuzzing over xdist workers, isolation, coverage report.

Enabled with ``pytest -p diagfuzz`` (the ``pytest11`` entry point installs it in every
pytest run, but it stays inert unless named with ``-p``, so a project that only installs
diagfuzz keeps its GPUs, caches and Hypothesis profiles as they were).

Laid out like pytest-xdist: the hooks are gathered here (options, activation, ``-n auto``
sizing, configure: the ``RunPlan`` decided once without torch or the impl, which each
worker completes (``diagfuzz.harness.planning``), one GPU pinned per xdist worker), and
each side's plugin object lives in its own module:

* the controller side (``diagfuzz.harness.controller``: ``RunController``, ``Reporter``)
  ships the plan, names a dead worker's Case, aggregates the workers' counts and findings
  and writes the report;
* the worker side (``diagfuzz.harness.worker``: ``ShardSession``) runs the shards.

Without xdist one process plays both sides.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys

import pytest

from diagfuzz.campaign import options as campaign_options
from diagfuzz.core import exits
from diagfuzz.core.opnames import op_names
from diagfuzz.core.streams import MIN_CASES_PER_SHARD
from diagfuzz.execution.timeline import mark
from diagfuzz.harness import planning, workers
from diagfuzz.harness.controller import PLAN_KEY, Reporter, RunController, distributed
from diagfuzz.harness.sharding import RunPlan
from diagfuzz.harness.worker import SHARD_FIXTURE, ShardSession

# Where a process's start-up goes before diagfuzz's hooks: interpreter, pytest, other plugins.
mark("plugin_imported")

_PLUGIN_NAMES = ("diagfuzz", "diagfuzz.harness.plugin")


# ============================================================================================
# Both sides
# ============================================================================================

def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("diagfuzz", "diagfuzz fuzzing (active with -p diagfuzz)")
    group.addoption("--impl", dest="diagfuzz_impl", metavar="MODULE:ATTR", default=None,
                    help="implementation under test: MODULE:ATTR or path/to/file.py:ATTR, "
                         "imported from the current directory and pytest's root too, or "
                         "registered:MODULE[:CALLABLE], a library through the aten kernels "
                         "it registers (default diagfuzz.impl:triton_aten)")
    group.addoption("--diagfuzz-seed", type=int, default=None, metavar="N",
                    help="run seed; every shard's seed derives from it (default: random, "
                         "0 under a derandomized profile such as gate)")
    group.addoption("--diagfuzz-shards", type=int, default=None, metavar="N",
                    help="shards per stream (default: the profile's, at least "
                         "workers/streams, fewer where a shard would get under "
                         f"{MIN_CASES_PER_SHARD} Cases); the budget is split over them")
    group.addoption("--diagfuzz-budget", type=int, default=None, metavar="N",
                    help="total Cases over all shards, about (the suite draws Case "
                         "families; default: the profile's)")
    group.addoption("--diagfuzz-max-members", type=int, default=None, metavar="N",
                    help="Cases per family at most (default: the profile's, 12; gate 1); "
                         "1 draws one Case per Hypothesis example")
    group.addoption("--diagfuzz-max-elements", type=int, default=None, metavar="N",
                    help="largest tensor the strategies draw (default: the profile's)")
    group.addoption("--diagfuzz-ops", default=None, metavar="OP[,OP]",
                    help=f"fuzz only these ops ({', '.join(op_names())}; default every "
                         "op the impl provides)")
    group.addoption("--diagfuzz-streams", default=None, metavar="KIND[,KIND]",
                    help="valid, invalid: which streams run (default both)")
    group.addoption("--diagfuzz-dtypes", default=None, metavar="DTYPE[,DTYPE]",
                    help="draw only these dtypes (within what the impl declares)")
    group.addoption("--diagfuzz-ranks", default=None, metavar="N|LO-HI",
                    help="draw only these ranks (default 2-8)")
    group.addoption("--diagfuzz-layouts", default=None, metavar="KIND[,KIND]",
                    help="draw only these layout kinds (contiguous, permuted, "
                         "channels_last, sliced, offset, expanded)")
    group.addoption("--diagfuzz-strict", action="store_true", default=False,
                    help="ignore the impl's capability declarations (unsupported Cases "
                         "are judged) and demand TypeError, ValueError or RuntimeError for "
                         "binding-level invalid Cases")
    group.addoption("--diagfuzz-max-seconds", type=float, default=None, metavar="S",
                    help="a wall-clock cap: shards draw for 60%% of S and shrink until "
                         "85%%, what still runs is stopped at 95%% and the report holds "
                         "what finished; the run is reported as cut (exit 6 when nothing "
                         "failed)")
    group.addoption("--diagfuzz-covering", action="store_true", default=False,
                    help="before drawing, each op's shards judge the op's covering Cases "
                         "(every valid 3-way combination of its factor model, 4-way of its "
                         "geometric core; the gate judges them in a stage of its own)")
    group.addoption("--diagfuzz-huge", action="store_true", default=False,
                    help="also run test_huge, the huge tier: a few Cases per op past 2**31 "
                         "elements, judged on the GPU in chunks (on in the nightly profile; "
                         "CUDA only, skipped with the reason elsewhere)")
    group.addoption("--diagfuzz-sequences", type=int, default=None, metavar="N",
                    help="call sequences test_sequences draws for bugs that depend on "
                         "what ran before, each on fresh executors (default: the "
                         "profile's: nightly 2000, none in the others; 0 turns it off)")
    group.addoption("--diagfuzz-tracebacks", action="store_true", default=False,
                    help="show the harness's tracebacks and captured output of failing "
                         "shards (default: one compact block per finding)")
    group.addoption("--diagfuzz-isolation", choices=("auto", "process", "inprocess"),
                    default="auto",
                    help="run Cases in a spawned executor process (crash/hang isolation, "
                         "the default) or in the worker itself")
    group.addoption("--diagfuzz-pipeline", choices=("on", "off"), default="on",
                    help="with process isolation, draw the next Cases while the executor "
                         "checks earlier ones (default on; off: draw, then check, one by one)")
    group.addoption("--diagfuzz-executors", type=int, default=None, metavar="N",
                    help="executor processes each pipelined worker feeds (process "
                         "isolation, --diagfuzz-pipeline on; default: as many as leave a "
                         "CPU to every worker and executor, up to "
                         f"{workers.FANOUT_EXECUTORS}, at least 1): Cases go "
                         "to the one with the fewest in flight, crashes stay per executor")
    group.addoption("--diagfuzz-timeout", type=float, default=None, metavar="SECONDS",
                    help="the most seconds a Case may run without progress before it is "
                         "a hang; below it, calibrated on measured times (process "
                         "isolation; default the executor's, 60)")
    group.addoption("--diagfuzz-root", default=None, metavar="DIR",
                    help="root of per-run, per-worker directories (default <rootdir>/"
                         ".diagfuzz); a run uses DIR/run-<seed>/<worker>, or run-<seed>.N "
                         "where an earlier run made that directory")
    group.addoption("--diagfuzz-report", default=None, metavar="PATH",
                    help="write the JSON report (seed, impl, counts, findings) to PATH; "
                         "reproducers go beside it, in PATH's name + -repro/")
    group.addoption("--diagfuzz-history-check", choices=("on", "off"), default="on",
                    help="before writing reproducers, re-run each finding's Case alone in a "
                         "fresh executor; one that passes alone gets the earlier calls of "
                         "its executor replayed and shrunk, and its reproducer replays "
                         "them (default on; the gate classifies its findings itself)")
    group.addoption("--diagfuzz-workers-per-gpu", type=int, default=None, metavar="N",
                    help="workers per GPU for -n auto on a GPU machine "
                         f"(default min({workers.MAX_WORKERS_PER_GPU}, CPUs per GPU))")
    campaign_options.add_options(group)  # --diagfuzz-partition, --diagfuzz-database


def active(config: pytest.Config) -> bool:
    """Whether the plugin was asked for with ``-p diagfuzz``."""
    return any(name in _PLUGIN_NAMES for name in (config.getoption("plugins", None) or ()))


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def _cuda_device_count() -> int:
    """GPUs this controller's workers can use: counted from the device nodes, so the
    controller imports no torch; torch counts them only where the nodes cannot tell (an
    AMD GPU). Only ever called on the controller, which runs no kernel."""
    from diagfuzz.core.preselect import visible_gpu_nodes

    counted = visible_gpu_nodes()
    if counted is not None:
        return counted
    import torch

    return torch.cuda.device_count()


def _start_fork_server(config: pytest.Config, distributed_run: bool = False) -> str:
    """The fork server this run's workers fork their executors from, started now by the
    controller; its address, or '' (a worker starts its own, or spawns its executors).

    Why here: a worker's own server would start only when the worker is configured, after
    the controller's planning and the worker's own start-up; this one imports torch and
    Triton beside them, and one is enough for every worker.
    """
    if (_is_worker(config) or not (distributed_run or distributed(config))
            or config.getoption("collectonly")
            or config.getoption("diagfuzz_isolation") == "inprocess"
            # workers elsewhere, or under another Python: each starts its own
            or not workers.share_this_interpreter(config.getoption("tx") or [])):
        return ""
    from diagfuzz.execution import forkserver

    return forkserver.start_for_run()


def _gpus() -> list[str]:
    return workers.visible_gpus(os.environ, 0 if "CUDA_VISIBLE_DEVICES" in os.environ
                                else _cuda_device_count())


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` on a GPU machine: a few workers per GPU; elsewhere xdist decides."""
    if not active(config) or os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    _start_fork_server(config, distributed_run=True)  # first: its imports take seconds
    gpus = _gpus()
    if not gpus:
        return None
    return workers.auto_workers(len(gpus), workers.cpu_count(),
                                config.getoption("diagfuzz_workers_per_gpu"))


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    if not active(config):
        return
    from diagfuzz.harness import profiles

    mark("plugin_configure")
    if "torch" in sys.modules:  # by -n auto's GPU count, a conftest or another plugin
        mark("torch_imported_before_configure")
    config.addinivalue_line("markers", "fuzz: Hypothesis fuzz shards of the diagfuzz suite")
    if _is_worker(config):
        plan = RunPlan.from_dict(json.loads(config.workerinput[PLAN_KEY]))  # type: ignore[attr-defined]
        from diagfuzz.core.roots import use_roots

        use_roots(plan.impl_path)  # before the executors start: they inherit sys.path
        from diagfuzz.execution import forkserver

        forkserver.use(plan.fork_server)
        # Next: the session launches the executors, which then start beside this worker.
        session = ShardSession(config, plan)
        # Once it has finished, nothing of the worker's own teardown is the run's, and the
        # controller waits for the process to exit before it prints the summary: the
        # interpreter's finalisation (1.2 s with torch and Triton loaded, 2-core CPU) is
        # left out. Exit status 0, a finished worker's (xdist reads none).
        exits.exit_now_at_shutdown(0, lambda: session.finished)
        profiles.register()
        config.pluginmanager.register(session, "diagfuzz-shards")
        return
    profiles.register()
    n_workers = (len(workers.pin_specs(config.getoption("tx"), []))
                 if distributed(config) else 1)
    # Output paths first: the plan claims a run directory, and a usage error runs nothing.
    report = planning.check_output_path("--diagfuzz-report",
                                        config.getoption("diagfuzz_report"))
    planning.check_output_path("--junitxml", getattr(config.option, "xmlpath", None))
    server = _start_fork_server(config)  # its imports run beside the planning's
    # The controller's plan leaves what depends on the impl to its workers: it imports
    # neither torch nor the impl (a run without xdist loads them here, as it runs Cases).
    plan = dataclasses.replace(
        planning.resolve_plan(config, n_workers, with_impl=not distributed(config)),
        fork_server=server)
    config.pluginmanager.register(Reporter(config, plan, report), "diagfuzz-reporter")
    if distributed(config):
        config.option.tx = workers.pin_specs(config.getoption("tx"), _gpus())
        config.pluginmanager.register(RunController(plan), "diagfuzz-controller")
        mark("planned")
        return
    config.pluginmanager.register(ShardSession(config, plan), "diagfuzz-shards")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Without the plugin's worker side, a shard test says how to run it."""
    if SHARD_FIXTURE in metafunc.fixturenames and not active(metafunc.config):
        raise pytest.UsageError(
            f"{metafunc.definition.nodeid} is a diagfuzz fuzz shard: run it with the plugin, "
            "`pytest -p diagfuzz --pyargs diagfuzz.suite`")
