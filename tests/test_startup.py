"""What keeps a run's start short: nothing torch-heavy before the workers start, the op
names without importing the specs, the start-up timeline, executors closed side by side.

On an H200 host a pytest controller spent 3.4 s importing torch before it started a single
worker (BENCHMARKS.md, start-up); these tests fail if that import comes back.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from diagfuzz.core import opnames, preselect
from diagfuzz.execution import timeline
from diagfuzz.execution.fanout import FanoutRunner

REPO = Path(__file__).resolve().parents[1]


def _modules_after(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``code``."""
    probe = code + "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))\n"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          cwd=REPO, timeout=120, check=True)
    return set(json.loads(proc.stdout.strip().splitlines()[-1]))


def test_the_pytest_plugin_and_the_executor_runners_import_no_torch() -> None:
    # The controller loads the plugin in every pytest run; a worker launches its executors
    # with the runners before it imports torch itself.
    loaded = _modules_after("import diagfuzz.harness.plugin, diagfuzz.execution.fanout")
    assert "torch" not in loaded and "triton" not in loaded
    assert "diagfuzz.harness.plugin" in loaded


def test_the_repositorys_conftest_and_the_command_entry_import_no_torch() -> None:
    # pytest imports the conftest of testpaths before any plugin's configure, in every run
    # from the repository root (the README's fuzz command among them); the console script's
    # entry starts the gate's fork server before the command's own imports.
    loaded = _modules_after("import tests.conftest, diagfuzz.__main__")
    assert "torch" not in loaded and "triton" not in loaded
    assert "tests.conftest" in loaded


def test_op_names_from_the_sources_are_the_loaded_specs() -> None:
    from diagfuzz.specs import SPECS, spec_of

    assert opnames.op_names() == SPECS
    assert SPECS[:2] == ("diagonal", "diagonal_backward")
    for name in SPECS:  # how diagfuzz.core calls and describes each op
        call, spec = opnames.op_call(name), spec_of(name)
        assert call.method_name == spec.method_name
        assert call.operands == tuple(o.name for o in spec.operands)
        assert (call.arguments, call.fields) == (spec.arguments, spec.fields)
    assert opnames.op_call("diag_1d").method_name == "diag"
    with pytest.raises(ValueError, match="unknown op 'nope'; diagfuzz knows diagonal, "):
        opnames.op_call("nope")


def test_a_spec_whose_call_is_not_literals_is_refused(tmp_path: Path) -> None:
    computed = tmp_path / "computed.py"
    computed.write_text("NAME = 'x'\nSPEC = OpSpec(order=1, name=NAME)\n")
    with pytest.raises(ValueError, match="literals"):
        opnames._literal_spec(computed)
    helper = tmp_path / "helper.py"
    helper.write_text("def shared():\n    return 1\n")
    assert opnames._literal_spec(helper) is None
    literal = tmp_path / "op.py"
    literal.write_text("SPEC = OpSpec(\n    order=7,\n    name='op',\n    doc='...')\n")
    assert opnames._literal_spec(literal) == opnames.OpCall(7, "op")
    full = tmp_path / "full.py"
    full.write_text("SPEC = OpSpec(order=1, name='op', method='m', arguments=('offset',),\n"
                    "    operands=(Operand('x', 'full'), Operand(name='y', role='diagonal')),\n"
                    "    fields={'offset': 'dim1'})\n")
    assert opnames._literal_spec(full) == opnames.OpCall(1, "op", "m", ("x", "y"), ("offset",),
                                                         {"offset": "dim1"})
    built = tmp_path / "built.py"
    built.write_text("SPEC = OpSpec(order=1, name='op', arguments=ARGUMENTS)\n")
    with pytest.raises(ValueError, match="arguments= as literals"):
        opnames._literal_spec(built)


def test_no_gpu_without_device_nodes_or_with_every_gpu_hidden(monkeypatch, tmp_path) -> None:
    node = tmp_path / "nvidiactl"
    node.touch()
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(preselect, "GPU_DEVICE_NODES", (str(tmp_path / "absent"),))
    assert preselect.no_gpu_here()
    monkeypatch.setattr(preselect, "GPU_DEVICE_NODES", (str(node),))
    assert not preselect.no_gpu_here()
    for hidden in ("", "-1", " -1,0"):
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", hidden)
        assert preselect.no_gpu_here(), hidden
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert not preselect.no_gpu_here()


def test_preselect_chooses_the_interpreter_only_where_no_gpu_can_be(monkeypatch) -> None:
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    monkeypatch.delenv("DIAGFUZZ_COMPILE_ONLY", raising=False)
    monkeypatch.setattr(preselect, "no_gpu_here", lambda: True)
    preselect.preselect()
    assert os.environ["TRITON_INTERPRET"] == "1"
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    monkeypatch.setenv("DIAGFUZZ_COMPILE_ONLY", "1")  # compiles for a GPU: never interpret
    preselect.preselect()
    assert os.environ["TRITON_INTERPRET"] == "0"
    monkeypatch.delenv("DIAGFUZZ_COMPILE_ONLY")
    monkeypatch.setattr(preselect, "no_gpu_here", lambda: False)
    monkeypatch.delenv("TRITON_INTERPRET")
    preselect.preselect()  # a GPU may be there: diagfuzz.core.runtime asks torch later
    assert "TRITON_INTERPRET" not in os.environ


def test_timeline_marks_only_when_asked(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.delenv(timeline.TIMELINE_ENV, raising=False)
    timeline.mark("nothing")
    assert not list(tmp_path.iterdir())
    monkeypatch.setenv(timeline.TIMELINE_ENV, str(tmp_path / "marks"))
    monkeypatch.setattr(timeline, "_started", set())
    timeline.mark("first", "executor")
    timeline.mark("second", "executor")
    marks = timeline.read(tmp_path / "marks")
    assert [m["event"] for m in marks] == ["process_start", "first", "second"]
    assert {m["pid"] for m in marks} == {os.getpid()}
    assert marks[0]["t"] <= marks[1]["t"] <= marks[2]["t"]


class _Recording:
    """A runner that records its close calls in a shared list."""

    def __init__(self, name: str, calls: list[str]) -> None:
        self.name, self.calls = name, calls

    def request_close(self) -> None:
        self.calls.append(f"request {self.name}")

    def close(self, wait: float = 2.0) -> None:
        self.calls.append(f"close {self.name}")


def test_a_fanout_asks_every_executor_to_exit_before_it_waits_for_one() -> None:
    calls: list[str] = []
    FanoutRunner([_Recording("a", calls), _Recording("b", calls)]).close()  # type: ignore[list-item]
    assert calls == ["request a", "request b", "close a", "close b"]


_PROBE = '''
"""Records, in the process it runs in, which heavy modules were loaded when diagfuzz planned."""
import json, os, sys

import pytest


@pytest.hookimpl(trylast=True)
def pytest_configure(config):  # after diagfuzz's configure (tryfirst): its plan is made
    if hasattr(config, "workerinput"):
        return
    loaded = {m: m in sys.modules for m in ("torch", "triton", "diagfuzz.impl", "tiny_impl")}
    with open(os.environ["PROBE_OUT"], "w") as out:
        json.dump(loaded, out)


def pytest_xdist_node_collection_finished(node, ids):  # a worker has planned the impl's part
    with open(os.environ["PROBE_OUT"] + ".collected", "a") as out:
        out.write(json.dumps("torch" in sys.modules) + "\\n")
'''

_TINY_IMPL = '''
import torch

def diag_embed(x, offset=0, dim1=-2, dim2=-1):
    return torch.diag_embed(x, offset, dim1, dim2)

dtypes = ("float32", "int64")
'''


def test_the_xdist_controller_plans_without_torch_and_its_workers_complete_the_plan(
        tmp_path: Path) -> None:
    # The controller's start-up is the run's critical path (and the gate's): torch and the
    # impl are the workers' to import, and what depends on the impl (its ops, its dtypes)
    # still reaches the header, the report and the summary, from the first worker.
    (tmp_path / "probe_plugin.py").write_text(_PROBE)
    (tmp_path / "tiny_impl.py").write_text(_TINY_IMPL)
    out, report = tmp_path / "probe.json", tmp_path / "report.json"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_XDIST", "PYTEST_ADDOPTS"))}
    env.update(PROBE_OUT=str(out), PYTHONPATH=str(tmp_path))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "diagfuzz", "-p", "probe_plugin", "-n", "2",
         "--pyargs", "diagfuzz.suite", "-p", "no:cacheprovider", "--impl=tiny_impl",
         "--hypothesis-profile=ci", "--diagfuzz-budget=40", "--diagfuzz-seed=1",
         "--diagfuzz-executors=1", f"--diagfuzz-root={tmp_path / 'root'}",
         f"--diagfuzz-report={report}"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, text
    assert json.loads(out.read_text()) == {"torch": False, "triton": False,
                                           "diagfuzz.impl": False, "tiny_impl": False}
    # Still without torch once the workers have loaded the impl and planned its part.
    assert (tmp_path / "probe.json.collected").read_text().split() == ["false", "false"]
    data = json.loads(report.read_text())
    assert data["resolved"] and data["ops"] == ["diag_embed"]
    assert data["dtypes"] == {"diag_embed": ["float32", "int64"]}
    assert data["skipped"]["test_diagonal"] == "the impl provides no diagonal"
    assert "diagfuzz: narrowed to diag_embed dtypes float32, int64" in text
    assert "diagfuzz: skipped diag: the impl provides no diag" in text
    drawn = set(data["counts"]["diag_embed"]["classes"]["dtype"])
    assert drawn and drawn <= {"float32", "int64"}, data["counts"]


def test_an_impl_a_worker_cannot_use_is_the_controllers_usage_error(tmp_path: Path) -> None:
    (tmp_path / "broken_impl.py").write_text("raise RuntimeError('boom at import')\n")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_XDIST", "PYTEST_ADDOPTS"))}
    env["PYTHONPATH"] = str(tmp_path)
    report = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "diagfuzz", "-n", "2", "--pyargs",
         "diagfuzz.suite", "-p", "no:cacheprovider", "--impl=broken_impl",
         f"--diagfuzz-root={tmp_path / 'root'}", f"--diagfuzz-report={report}"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "cannot import 'broken_impl': RuntimeError('boom at import')" in proc.stderr
    assert not report.exists()


_GATE_PROBE = '''
import json, sys

import diagfuzz.gate.suite as suite

def probe(opts, cap):  # instead of starting the suite: what the gate had imported by then
    print("PROBE " + json.dumps({"torch": "torch" in sys.modules,
                                 "run_dir": str(opts.run_dir), "cap": cap}), flush=True)
    raise SystemExit(0)

suite.start = probe
from diagfuzz.__main__ import main
sys.exit(main(["gate", "--out", sys.argv[1], "--budget", "10", "--no-save",
               "--max-seconds", "40"]))
'''


def test_the_gate_starts_its_suite_before_it_imports_torch(tmp_path: Path) -> None:
    # The suite's pytest controller is the gate's critical path: it starts as soon as the
    # options are checked, not after the gate's own imports (4.1 s on an H200 host).
    proc = subprocess.run([sys.executable, "-c", _GATE_PROBE, str(tmp_path / "out")],
                          cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("PROBE ")]
    assert proc.returncode == 0 and lines, proc.stdout + proc.stderr
    seen = json.loads(lines[0].removeprefix("PROBE "))
    assert seen["torch"] is False
    assert Path(seen["run_dir"]).parent == tmp_path / "out" and seen["cap"] == 20.0
