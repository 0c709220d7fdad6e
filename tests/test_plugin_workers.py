"""Per-worker isolation, seen from inside real xdist workers (on CPU, no GPU needed).

A pytest run with ``-n 3 --dist each`` and the caller's CUDA_VISIBLE_DEVICES=3,5: each worker
dumps the environment it sees. Worker gw1 dies once; xdist replaces it with gw3, which must
inherit gw1's GPU (5), not take slot 3 % 2 (3) as naive id-based pinning would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

DUMPING_TESTS = '''
import json, os, pathlib
OUT = pathlib.Path(os.environ["DUMP_DIR"])

def test_a_gw1_dies_once():
    marker = OUT / "crashed"
    if os.environ.get("PYTEST_XDIST_WORKER") == "gw1" and not marker.exists():
        marker.touch()
        os._exit(3)

def test_b_dump_environment():
    worker = os.environ["PYTEST_XDIST_WORKER"]
    (OUT / (worker + ".json")).write_text(json.dumps(dict(os.environ)))
'''


def test_each_worker_gets_one_gpu_the_runs_cache_and_its_own_database(tmp_path: Path) -> None:
    (tmp_path / "test_dump.py").write_text(DUMPING_TESTS)
    dump = tmp_path / "dump"
    dump.mkdir()
    env = {**os.environ, "DUMP_DIR": str(dump), "CUDA_VISIBLE_DEVICES": "3,5"}
    env.pop("PYTEST_XDIST_WORKER", None)
    env.pop("TRITON_CACHE_DIR", None)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "diagfuzz", "-n", "3", "--dist", "each",
         "-p", "no:cacheprovider", "--diagfuzz-seed", "11", "--diagfuzz-isolation",
         "inprocess", "--diagfuzz-root", str(tmp_path / "root"), "test_dump.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    out = proc.stdout + proc.stderr
    assert "replacing crashed worker gw1" in out, out
    seen = {p.stem: json.loads(p.read_text()) for p in dump.glob("gw*.json")}
    assert sorted(seen) == ["gw0", "gw2", "gw3"], out
    gpus = {w: e["CUDA_VISIBLE_DEVICES"] for w, e in seen.items()}
    assert gpus == {"gw0": "3", "gw2": "3", "gw3": "5"}
    run_dir = tmp_path / "root" / "run-11"
    for worker, environ in seen.items():
        assert environ["TRITON_CACHE_DIR"] == str(tmp_path / "root" / "triton-cache")
        assert (run_dir / worker / "hypothesis").is_dir()
