"""Why not OpInfo? The project's mutants (tests/mutants/) judged three ways.

1. ``assert_close``: PyTorch's OpInfo samples of the family (each sample and its
   non-contiguous twin, every dtype the op supports here), the mutant's result against the
   torch op's by ``torch.testing.assert_close(equal_nan=True)`` (what PyTorch's OpInfo tests
   do; strides unchecked, -0.0 == +0.0), the expected result a copy made before the
   mutant runs; error inputs by the exception type and message regex op_db names;
   diagonal's backward by ``assert_close`` against aten's ``diagonal_backward`` with a
   seeded grad. Only the ops the mutant provides, as in the other two ways.
2. ``bitwise``: the same samples as Cases (``diagfuzz.strategies.opinfo``) through diagfuzz's
   oracle, in this process (the mutants are plain torch): the gate's OpInfo stage.
3. ``gate``: ``diagfuzz gate --no-opinfo --no-save`` on the mutant (corpus, fuzz suite,
   error parity, torch.compile sample, classification), a subprocess each.

A mutant is caught by a way when at least one of its Cases fails there (the gate: exit 1,
or 2 for a flaky finding). Writes ``results.json`` and ``table.md`` under ``--out``. The
gate column takes about a minute a mutant on 2 CPU cores; ``--gate-from RESULTS`` takes it
from an earlier ``results.json`` instead.

    python benchmarks/opinfo_vs_mutants.py [--out DIR] [--mutants A,B] [--gate-workers N]
                                           [--no-gate | --gate-from RESULTS]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from diagfuzz import oracles  # noqa: E402
from diagfuzz.core.case import available_dtypes  # noqa: E402
from diagfuzz.impl import load_impl  # noqa: E402
from diagfuzz.strategies import opinfo  # noqa: E402
from tests.mutants import MUTANTS  # noqa: E402


def _call(impl: Any, name: str, sample: Any) -> Any:
    """The mutant's op for op_db entry ``name`` on ``sample``."""
    args = opinfo.bound_arguments(name, sample)
    x = sample.input
    if name == "diag":
        return impl.diag(x, args["diagonal"])
    if name == "diag_embed":
        return impl.diag_embed(x, args["offset"], args["dim1"], args["dim2"])
    if name == "diagonal_scatter":
        return impl.diagonal_scatter(x, args["src"], args["offset"], args["dim1"],
                                     args["dim2"])
    return impl.diagonal(x, args["offset"], args["dim1"], args["dim2"])


def _close(actual: Any, expected: torch.Tensor) -> bool:
    try:
        torch.testing.assert_close(actual, expected, equal_nan=True)
    except AssertionError:
        return False
    return True


#: The diagfuzz op an op_db entry calls (its implementation's method).
METHOD = {"diagonal": "diagonal", "diagonal_copy": "diagonal", "linalg.diagonal": "diagonal",
          "diag_embed": "diag_embed", "diagonal_scatter": "diagonal_scatter", "diag": "diag"}


def by_assert_close(impl: Any) -> tuple[int, int]:
    """(samples judged, samples failing) the way PyTorch's OpInfo tests judge them."""
    judged = failing = 0
    for entry in opinfo.op_db_entries():
        if not callable(getattr(impl, METHOD[entry.name], None)):
            continue
        for dtype in entry.supported_dtypes("cpu"):
            if str(dtype).removeprefix("torch.") not in available_dtypes():
                continue
            backward = dtype in entry.supported_backward_dtypes("cpu")
            for _, sample in opinfo.samples_of(entry, dtype):
                expected = entry.op(sample.input, *sample.args, **sample.kwargs).clone()
                judged += 1
                try:
                    ok = _close(_call(impl, entry.name, sample), expected)
                except Exception:
                    ok = False
                failing += not ok
                if (entry.name == "diagonal" and backward
                        and callable(getattr(impl, "diagonal_backward", None))):
                    judged += 1
                    failing += not _backward_close(impl, sample, dtype)
        for error in opinfo.error_inputs_of(entry):
            judged += 1
            failing += not _raises_as_op_db_says(impl, entry.name, error)
    return judged, failing


def _backward_close(impl: Any, sample: Any, dtype: torch.dtype) -> bool:
    from torch.testing import make_tensor

    args = opinfo.bound_arguments("diagonal", sample)
    geometry = (args["offset"], args["dim1"], args["dim2"])
    shape = torch.diagonal(sample.input, *geometry).shape
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(opinfo.SEED)
        grad = make_tensor(shape, dtype=dtype, device="cpu")
    sizes = list(sample.input.shape)
    expected = torch.ops.aten.diagonal_backward(grad, sizes, *geometry)
    try:
        return _close(impl.diagonal_backward(grad, sizes, *geometry), expected)
    except Exception:
        return False


def _raises_as_op_db_says(impl: Any, name: str, error: Any) -> bool:
    try:
        _call(impl, name, error.sample_input)
    except error.error_type as exc:
        return re.search(error.error_regex, str(exc)) is not None
    except Exception:
        return False
    return False


def bitwise(impl: Any, cases: list[Any]) -> tuple[int, int]:
    """(Cases judged, Cases failing) by diagfuzz's oracle."""
    failing = sum(not oracles.check(case, impl, "cpu").ok for case in cases)
    return len(cases), failing


def by_gate(name: str, out: Path, workers: str) -> tuple[int, float]:
    """(exit code, seconds) of the gate on mutant ``name``."""
    run = out / "gates" / name
    run.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "diagfuzz", "gate", "--impl", f"tests.mutants.{name}:impl",
               "--no-opinfo", "--no-save", "--quiet", "-n", workers, "--corpus",
               str(run / "corpus"), "--out", str(run / "out"), "--report",
               str(run / "report.json")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO),
                                                       os.environ.get("PYTHONPATH", "")]))
    t0 = time.monotonic()
    proc = subprocess.run(command, cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, check=False)
    return proc.returncode, time.monotonic() - t0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / ".diagfuzz" / "opinfo-vs-mutants")
    parser.add_argument("--mutants", help="comma-separated names (default: all)")
    parser.add_argument("--gate-workers", default="2")
    parser.add_argument("--no-gate", action="store_true")
    parser.add_argument("--gate-from", type=Path, help="an earlier results.json: its gate "
                                                       "column instead of running the gates")
    args = parser.parse_args()
    names = args.mutants.split(",") if args.mutants else list(MUTANTS)
    args.out.mkdir(parents=True, exist_ok=True)
    earlier = ({r["mutant"]: r.get("gate") for r in
                json.loads(args.gate_from.read_text())["rows"]} if args.gate_from else {})
    samples = opinfo.load("cpu")
    if samples.skipped:
        print(samples.skipped, file=sys.stderr)
        return 4
    rows: list[dict[str, Any]] = []
    for name in names:
        impl = load_impl(f"tests.mutants.{name}:impl")
        row: dict[str, Any] = {"mutant": name, "ops": list(MUTANTS[name]),
                               "doc": _first_sentence(sys.modules[type(impl).__module__])}
        row["assert_close"] = by_assert_close(impl)
        row["bitwise"] = bitwise(impl, samples.cases)
        if args.gate_from:
            row["gate"] = earlier.get(name)
        elif not args.no_gate:
            row["gate"] = by_gate(name, args.out, args.gate_workers)
        rows.append(row)
        print(json.dumps(row), flush=True)
    meta = {"date": time.strftime("%Y-%m-%d"), "torch": torch.__version__,
            "device": "cpu", "opinfo": samples.summary(),
            "command": "python benchmarks/opinfo_vs_mutants.py " + " ".join(sys.argv[1:])}
    (args.out / "results.json").write_text(json.dumps({"meta": meta, "rows": rows},
                                                      indent=1) + "\n")
    (args.out / "table.md").write_text(table(rows) + "\n")
    print(table(rows))
    return 0


def _first_sentence(module: Any) -> str:
    """A mutant's bug in a few words: its docstring's first sentence."""
    text = " ".join((module.__doc__ or "").split())
    return text.split(". ")[0].split(": ")[0].rstrip(".")


def table(rows: list[dict[str, Any]]) -> str:
    """The markdown table docs/oracle.md quotes."""
    def caught(pair: tuple[int, int]) -> str:
        return f"caught ({pair[1]:,} of {pair[0]:,})" if pair[1] else f"missed (0 of {pair[0]:,})"

    lines = ["| mutant (its bug) | OpInfo, `assert_close` | OpInfo, bitwise | the gate |",
             "| --- | --- | --- | --- |"]
    for row in rows:
        gate = row.get("gate")
        verdict = ("not run" if gate is None else
                   "caught" if gate[0] in (1, 2) else f"missed (exit {gate[0]})")
        lines.append(f"| `{row['mutant']}` ({row['doc']}) | "
                     f"{caught(row['assert_close'])} | {caught(row['bitwise'])} | {verdict} |")
    totals = [sum(bool(r[k][1]) for r in rows) for k in ("assert_close", "bitwise")]
    gates = sum(r["gate"][0] in (1, 2) for r in rows if r.get("gate"))
    lines.append(f"| **caught** | **{totals[0]} of {len(rows)}** | **{totals[1]} of "
                 f"{len(rows)}** | **{gates} of {len(rows)}** |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
