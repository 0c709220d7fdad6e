"""FlagGems' shipped kernels as a benchmark column (``--flaggems``), where FlagGems ships one.

FlagGems 5.0.2 ships ``diagonal_backward`` (``torch.zeros`` + a pointwise copy kernel),
``diag_embed`` (``torch.zeros`` + a copy kernel) and ``diag`` (its own kernel); the benches
call them directly, as ``examples/flaggems.py`` does, with diagfuzz's registration off. Each
row's FlagGems result is checked bitwise against aten too; a mismatch is reported in the
row (``flaggems_bitwise``), not as ours. Not run on its own: the benches' ``--flaggems``
imports it, with the flag-gems wheel on the path (``examples/fetch_wheels.sh``)::

    PYTHONPATH=SITE python benchmarks/bench_family.py --flaggems    # SITE: where flag-gems is
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = str(Path(__file__).resolve().parents[1])  # examples/ lives at the repository root


def load() -> dict[str, Callable[..., Any]]:
    """op -> FlagGems' function (``backward``, ``embed``, ``diag``); SystemExit if FlagGems
    does not import (``--flaggems`` asked for it)."""
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    try:
        from examples import flaggems
    except ImportError as exc:
        raise SystemExit(f"--flaggems: {exc}") from exc
    return {"backward": flaggems.diagonal_backward, "embed": flaggems.diag_embed,
            "diag": flaggems.diag}


def version() -> str:
    from examples import flaggems

    return flaggems.flag_gems_version


def drop_if_raises(fns: dict[str, Callable[[], Any]], registration: Callable[[bool], Any]
                   ) -> str:
    """Call ``fns["flaggems"]`` once (``registration(False)``: diagfuzz's kernels off); if it
    raises, drop it from the row and say what it raised (FlagGems refuses some dtypes and
    layouts). "" when it ran or the row has no FlagGems column."""
    if "flaggems" not in fns:
        return ""
    try:
        with registration(False):
            fns["flaggems"]()
    except Exception as exc:
        del fns["flaggems"]
        return f"{type(exc).__name__}: {' '.join(str(exc).split())[:120]}"
    return ""
