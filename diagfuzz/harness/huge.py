"""The suite's huge tier (``diagfuzz.suite.test_huge``): the nightly profile's Cases past
2**31 elements, judged on the GPU by ``diagfuzz.oracles.check_huge``.

The Cases are made, not drawn (``diagfuzz.strategies.huge_cases``, from the item's seed, so
each run of the profile judges new ones): a few per op the run fuzzes, of the dtypes it
fuzzes. They run in an executor of their own (crash and hang isolation, and its GPU memory
given back when the item ends), and their findings reach the report as a shard's do.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from diagfuzz.core import huge

if TYPE_CHECKING:
    from diagfuzz.harness.shard import Shard


def run_huge_tier(shard: Shard) -> None:
    """Judge the huge Cases of ``shard``'s run; skipped with the reason off a CUDA GPU."""
    from diagfuzz.execution.parent import ProcessRunner
    from diagfuzz.harness import planning
    from diagfuzz.harness.worker import learnt
    from diagfuzz.strategies import huge_cases

    plan = shard.session.plan
    device = plan.device or planning.device()
    reason = huge.skip_reason(device)
    if reason:
        pytest.skip(reason)
    dtypes = plan.dtypes

    def allowed(op: str) -> tuple[str, ...] | None:
        return None if dtypes is None else tuple(dtypes.get(op, ()))

    cases = huge_cases(shard.seed, ops=tuple(plan.ops), dtypes=allowed)
    timeout = max(plan.timeout or 0.0, huge.TIMEOUT)
    with ProcessRunner(plan.impl, device, timeout, oracle="check_huge", strict=plan.strict,
                       workdir=Path(plan.run_dir) / "huge", learnt=learnt(plan)) as runner:
        shard.judge(cases, runner.run)
