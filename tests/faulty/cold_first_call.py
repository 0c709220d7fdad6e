"""``three_causes`` (whose ``diag_embed`` checks its dims with an ``assert``), with each
process's first ``diag_embed`` call taking ``SECONDS`` without progress: what a fresh
executor loads on its first call (CUDA's modules, an impl's lazy imports) where the run's
warm executors had loaded it."""

from __future__ import annotations

import time
from typing import Any

from tests.faulty import three_causes

SECONDS = 1.0


class ColdFirstCall:
    uses_triton_registration = False

    def __init__(self) -> None:
        self._cold = True

    def __getattr__(self, name: str) -> Any:
        return getattr(three_causes, name)

    def diag_embed(self, *args: Any, **kwargs: Any) -> Any:
        if self._cold:
            self._cold = False
            time.sleep(SECONDS)
        return three_causes.diag_embed(*args, **kwargs)


impl = ColdFirstCall()
