"""diag_embed, diagonal_scatter, diag, triu and tril fuzzed as the suite fuzzes every op: each op's
stream of valid Cases and its invalid Cases, through ``pytest -p diagfuzz --pyargs
diagfuzz.suite --diagfuzz-ops=OP``, with a small budget.

Two implementations pass: diagfuzz's own kernels through aten (the default impl; the
oracle proves the kernels ran, diag's through diag_embed and diagonal_copy) and plain
PyTorch (``examples.plain_torch``: torch's public functions); triu with the first, tril
with the second. Each run takes about ten
seconds on a 2-core CPU under Triton's interpreter.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_suite_run import SMALL, fuzz

#: The ops of the family beyond diagonal and diagonal_backward (diag: both directions).
OPS = ("diag_embed", "diagonal_scatter", "diag", "diag_1d")
IMPLS = ("diagfuzz.impl:triton_aten", "examples.plain_torch:impl")
#: triu and tril share their spec functions and kernel: one implementation each.
TRIANGLES = (("triu", IMPLS[0]), ("tril", IMPLS[1]))
#: Cases of each stream (the op's valid one, and its invalid Cases).
PER_STREAM = 150


@pytest.mark.parametrize(("op", "impl"), [*((op, impl) for op in OPS for impl in IMPLS),
                                          *TRIANGLES])
def test_the_ops_streams_pass(tmp_path: Path, op: str, impl: str) -> None:
    code, out, report = fuzz(tmp_path, "--impl", impl, f"--diagfuzz-ops={op}",
                             "--diagfuzz-isolation", "inprocess", "--diagfuzz-seed", "7",
                             "--diagfuzz-shards", "1", "--diagfuzz-budget",
                             str(2 * PER_STREAM), *SMALL)
    assert code == 0, out
    assert report["findings"] == [], out
    counts = report["counts"]
    assert set(counts) == {op, "invalid"}, counts
    for group in counts.values():
        assert group["cases"] >= PER_STREAM // 2 and group["failures"] == 0, counts
    # Judged, not skipped: nothing declared unsupported, .out Cases included.
    assert all(group.get("unsupported", 0) == 0 for group in counts.values()), counts
