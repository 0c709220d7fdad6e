"""One shrink per cause and run: the first shard to claim a signature shrinks it.

Every shard that meets a cause used to shrink it, each with up to ``MAX_SHRINK_STEPS``
candidate Cases; for an implementation that compiles per Case (torch.compile, a JIT
library) that repeated the most expensive work of the run once per shard. A claim is a file
created exclusively under the run directory, in a folder of this run's own id, so a rerun
with the same seed starts with no claims. The other shards report the cause's first failing
Case unshrunk; the controller's merge keeps the shrunk representative.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any


def claims_dir(plan: Any) -> Path:
    """``<run dir>/shrink-claims/<run id>``."""
    return Path(plan.run_dir) / "shrink-claims" / (plan.run_id or "run")


def claim(plan: Any, signature: Any) -> bool:
    """True for the first caller of this run to claim ``signature``; False after that."""
    directory = claims_dir(plan)
    directory.mkdir(parents=True, exist_ok=True)
    name = hashlib.sha256(signature.describe().encode()).hexdigest()[:24]
    try:
        os.close(os.open(directory / name, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    except OSError:  # an unwritable run dir: shrink, as without claims
        return True
    return True
