"""Every GPU variant of the kernels compiles for an H200 (sm_90), here, with no GPU.

The interpreter runs a kernel's Python and accepts code that Triton's compiler refuses, so a
kernel change could pass every CPU test and fail on its first GPU launch (the transposed
runs did). ``python -m diagfuzz.ops._gpu_compile`` plans as a GPU does and compiles each
variant to a cubin with the triton wheel's own NVIDIA back end.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from diagfuzz.ops import _tiling


def _compile_only(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True,
                          cwd=tmp_path, timeout=600)


@pytest.mark.parametrize("transpose_runs", [0, 1])
def test_every_gpu_variant_compiles_for_sm90(transpose_runs: int, tmp_path: Path) -> None:
    """Both kernels' transposed paths are switched on or off together (diag_embed's and
    diagonal_scatter's variants do not depend on them: the test below)."""
    out = tmp_path / "variants.json"
    run = _compile_only(["-m", "diagfuzz.ops._gpu_compile",
                         "--set", f"TRANSPOSE_RUNS={transpose_runs}",
                         "--set", f"COPY_TRANSPOSE={transpose_runs}",
                         "--ops", "diagonal_backward,diagonal_copy",
                         "--json", str(out)], tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    rows = json.loads(out.read_text())
    assert all("error" not in row and row["ptx_lines"] > 0 for row in rows)
    # (op, transposed, 64-bit indices, word bytes, one lane a row: the wide runs' blocks)
    kinds = {(row["op"], bool(row["constexprs"].get("TRANSPOSE")),
              row["constexprs"]["INDEX_64"], row["word_bytes"],
              row["constexprs"]["PEEL_LANES"] == 1) for row in rows}
    for op in ("diagonal_copy", "diagonal_backward"):
        for word_bytes in (1, 2, 4, 8):
            assert (op, False, True, word_bytes) in {k[:4] for k in kinds}  # int64
            assert (op, False, False, word_bytes) in {k[:4] for k in kinds}
    for word_bytes in (1, 2, 4, 8):  # the two fuzz-sized variants: narrow and wide runs
        assert ("diagonal_backward", False, False, word_bytes, False) in kinds
        assert ("diagonal_backward", False, False, word_bytes, True) in kinds
    for op in ("diagonal_copy", "diagonal_backward"):
        transposed = {k[2] for k in kinds if k[0] == op and k[1]}  # their INDEX_64 values
        assert transposed == ({False, True} if transpose_runs else set())


def test_every_gpu_variant_of_the_family_compiles_for_sm90(tmp_path: Path) -> None:
    """diag_embed (diagonal_backward's kernel, planned through its launcher) and
    diagonal_scatter in both modes (clone: the input's storage; gather: an expanded input),
    each with 32- and 64-bit indices and every word size."""
    out = tmp_path / "variants.json"
    run = _compile_only(["-m", "diagfuzz.ops._gpu_compile", "--ops",
                         "diag_embed,diagonal_scatter", "--json", str(out)], tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    rows = json.loads(out.read_text())
    assert all("error" not in row and row["ptx_lines"] > 0 for row in rows)
    kinds = {(row["op"], row["constexprs"]["INDEX_64"], row["word_bytes"],
              row["constexprs"].get("GATHER")) for row in rows}
    for word_bytes in (1, 2, 4, 8):
        for index_64 in (False, True):
            assert ("diag_embed", index_64, word_bytes, None) in kinds
            assert ("diagonal_scatter", index_64, word_bytes, False) in kinds
            assert ("diagonal_scatter:expanded", index_64, word_bytes, True) in kinds
    assert {row["constexprs"]["WORDS"] for row in rows if row["word_bytes"] == 8} == {1, 2}


BROKEN_KERNEL = textwrap.dedent('''
    import sys

    from diagfuzz.ops import _runtime  # first: it decides how triton.jit decorates

    import triton
    import triton.language as tl
    from diagfuzz.ops._gpu_compile import compile_plan
    from diagfuzz.ops._tiling import LaunchPlan

    @triton.jit
    def kernel(out_ptr, in_ptr, n_fill, BLOCK: tl.constexpr, MERGE_VECTOR: tl.constexpr):
        pid = tl.program_id(0)
        if pid < n_fill:
            first = pid * BLOCK
            tl.store(out_ptr + first, 0)
        else:
            if MERGE_VECTOR:  # a vector under the fill branch's scalar name
                first = pid * BLOCK + tl.arange(0, BLOCK)
            else:
                tile_first = pid * BLOCK + tl.arange(0, BLOCK)
                tl.store(out_ptr + tile_first, tl.load(in_ptr + tile_first))

    assert _runtime.COMPILE_ONLY and not _runtime.INTERPRET
    plan = LaunchPlan((1,), 1, (3,), {"BLOCK": 16, "MERGE_VECTOR": sys.argv[1] == "1"}, 4)
    compile_plan(kernel, plan, 4)
    print("compiled")
''')


@pytest.mark.parametrize("merge_vector", [False, True])
def test_the_check_refuses_what_the_compiler_refuses(merge_vector: bool,
                                                     tmp_path: Path) -> None:
    """The check fails on the transposed runs' first bug (a name bound to a scalar in one
    branch of a runtime ``if`` and to a vector in the other), and passes once it is fixed."""
    script = tmp_path / "broken_kernel.py"
    script.write_text(BROKEN_KERNEL)
    env = {**os.environ, "DIAGFUZZ_COMPILE_ONLY": "1", "TRITON_INTERPRET": "0"}
    run = subprocess.run([sys.executable, str(script), "1" if merge_vector else "0"],
                         capture_output=True, text=True, env=env, timeout=300)
    if merge_vector:
        assert run.returncode != 0
        assert "Mismatched type for first" in run.stderr
    else:
        assert run.returncode == 0, run.stderr
        assert "compiled" in run.stdout


def test_settings_retune_and_refuse_unknown_or_malformed_values(monkeypatch) -> None:
    monkeypatch.setattr(_tiling, "TUNING", _tiling.Tuning())
    copy_module = sys.modules["diagfuzz.ops.diagonal_copy"]
    copy_module._PLANS[("stale",)] = None
    assert _tiling.apply_settings(["TRANSPOSE_RUNS=0", "fill_num_warps=8",
                                   "COPY_TRANSPOSE=true"]) == {
        "transpose_runs": False, "fill_num_warps": 8, "copy_transpose": True}
    assert _tiling.Tuning(transpose_runs=False, fill_num_warps=8) == _tiling.TUNING
    assert ("stale",) not in copy_module._PLANS  # plans made with the old tuning are gone
    with pytest.raises(SystemExit, match="NO_SUCH"):
        _tiling.apply_settings(["NO_SUCH=1"])
    with pytest.raises(SystemExit, match="'x' is not an integer"):
        _tiling.apply_settings(["FILL_NUM_WARPS=x"])
    with pytest.raises(SystemExit, match="'2' is not 0, 1, true or false"):
        _tiling.apply_settings(["TRANSPOSE_RUNS=2"])
    with pytest.raises(SystemExit, match="INTERPRET"):
        _tiling.apply_settings(["INTERPRET=0"])


def test_tuned_restores_the_tuning_and_forgets_its_plans(monkeypatch) -> None:
    monkeypatch.setattr(_tiling, "TUNING", _tiling.Tuning())
    backward_module = sys.modules["diagfuzz.ops.diagonal_backward"]
    with _tiling.tuned({"grad_load_evict": False}) as tuning:
        assert tuning.grad_load_evict is False and _tiling.TUNING is tuning
        backward_module._PLANS[("made inside",)] = None
    assert _tiling.Tuning() == _tiling.TUNING
    assert ("made inside",) not in backward_module._PLANS
