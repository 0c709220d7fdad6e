"""torch.compile's compile seconds in this process, kept across ``torch._dynamo.reset()``.

Dynamo times each frame's whole compile (``_compile.compile_inner`` in
``torch._dynamo.utils.compilation_time_metrics``), but its ``reset()`` clears that record,
and the torch.compile parity oracle resets before every Case. That oracle banks the
record first (``bank``), so ``seconds`` is every compile of the process. Nothing here
imports Dynamo: a process that never loaded it compiled nothing.
"""

from __future__ import annotations

import sys

#: Dynamo's timer around one frame's whole compile (tracing, AOT, inductor, codegen).
COMPILE_TIMER = "_compile.compile_inner"

_banked = 0.0


def _recorded() -> float:
    utils = sys.modules.get("torch._dynamo.utils")
    metrics = getattr(utils, "compilation_time_metrics", None)
    if not isinstance(metrics, dict):
        return 0.0
    try:
        return float(sum(metrics.get(COMPILE_TIMER, ())))
    except (TypeError, ValueError):
        return 0.0


def bank() -> None:
    """Keep Dynamo's record so far: call it right before ``torch._dynamo.reset()``."""
    global _banked
    _banked += _recorded()


def seconds() -> float:
    """Seconds torch.compile has spent compiling in this process (0 where Dynamo was never
    loaded)."""
    return _banked + _recorded()
