"""diagfuzz's kernels as they were at another git revision, as a benchmark column
(``--against REV``): old and new kernels timed in one process, row by row, in the same
interleaved rounds, so a kernel change is judged without the drift between two runs (two
runs of one commit on the H200 differ by up to 15 % on rows of a few µs).

``extract`` copies ``ops/`` at REV (``git archive``) into ``DIR/diagfuzz_ops_<rev>/``,
renaming its imports of ``diagfuzz.ops`` to that package; ``load`` imports it. The copy
shares the current ``diagfuzz.core`` (geometry, words): compare revisions whose core agrees.
Its registration module is imported but never enabled, so aten keeps the current kernels.
Run ``extract`` where the repository's history is (the GPU machine may only get the copy)::

    python benchmarks/ops_at.py REV DIR     # prints DIR/diagfuzz_ops_<rev>
"""

from __future__ import annotations

import importlib
import io
import math
import re
import statistics
import subprocess
import sys
import tarfile
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def package_name(rev: str) -> str:
    return "diagfuzz_ops_" + re.sub(r"\W", "_", rev)


def extract(rev: str, into: Path) -> Path:
    """``ops/`` at ``rev`` as the package ``into/diagfuzz_ops_<rev>``; returns its path."""
    name = package_name(rev)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", rev, "ops"],
                             capture_output=True, check=True).stdout
    target = into / name
    target.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        for member in tar.getmembers():
            if not member.isfile() or not member.name.endswith(".py"):
                continue
            source = tar.extractfile(member).read().decode()  # type: ignore[union-attr]
            renamed = re.sub(r"\bdiagfuzz\.ops\b", name, source)
            (target / Path(member.name).relative_to("ops")).write_text(renamed)
    return target


def load(path: str | Path) -> ModuleType:
    """Import the package ``extract`` wrote at ``path`` (its functions: diagonal_copy,
    diagonal_backward, diag_embed, diagonal_scatter, each with its ``_out``)."""
    path = Path(path).resolve()
    if not (path / "__init__.py").is_file():
        raise SystemExit(f"--against {path}: not a package written by benchmarks/ops_at.py")
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    return importlib.import_module(path.name)


def column(against_us: float, ours_us: float) -> dict[str, float]:
    """A row's entries: the other revision's time and its ratio to ours (above 1: the
    current kernels are faster)."""
    return {"against_us": against_us, "vs_against": against_us / ours_us}


def row_note(extra: dict) -> str:
    """The printed row's suffix (empty without --against)."""
    if "vs_against" not in extra:
        return ""
    return f" against {extra['against_us']:8.1f} x{extra['vs_against']:5.3f}"


def summary(rows: list[tuple[str, dict]], geomean_tol: float = 0.02,
            row_tol: float = 0.05) -> dict:
    """Geomean of against/ours over the rows, the slowest eight, and the verdict of a
    speed-neutral change: geomean within ``geomean_tol``, no row ``row_tol`` slower."""
    ratios = [(label, extra["vs_against"]) for label, extra in rows if "vs_against" in extra]
    if not ratios:
        return {"rows": 0}
    geomean = math.exp(statistics.fmean(math.log(r) for _, r in ratios))
    slowest = sorted(ratios, key=lambda lr: lr[1])[:8]
    below = [label for label, r in ratios if r < 1 - row_tol]
    return {"rows": len(ratios), "geomean": geomean, "slowest": slowest,
            "rows_below_tol": below,
            "neutral": geomean >= 1 - geomean_tol and not below,
            "tolerances": {"geomean": geomean_tol, "row": row_tol}}


def print_summary(s: dict) -> None:
    if not s.get("rows"):
        print("against: no rows")
        return
    print(f"against/ours over {s['rows']} rows: geomean {s['geomean']:.4f}; "
          f"{len(s['rows_below_tol'])} rows below {1 - s['tolerances']['row']:.2f}; "
          f"speed-neutral: {'yes' if s['neutral'] else 'no'}; slowest:")
    for label, ratio in s["slowest"]:
        print(f"  {label}  x{ratio:.3f}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: python benchmarks/ops_at.py REV DIR")
    print(extract(sys.argv[1], Path(sys.argv[2])))
