"""Warm an executor before it reports ready: what the first Cases of a run would load.

Why: a fresh process pays once for much of what a Case uses. CUDA loads each aten kernel's
module on first use (lazy loading: every op and dtype the oracle touches), and torch imports
modules on the first autograd backward (``symbolic_shapes``: 0.25 s on the CPU machine, more
on a GPU host). Paid inside the first shards, it would count as fuzzing time (the report's
pace) although it is start-up: the executor pays it while the shard is set up.

Nothing here can hide or cause a verdict: only the oracle runs, judging aten against itself
(diagfuzz's kernels and the impl under test are never called; a kernel bug must show as the
failing Case it is, never as an executor that cannot start), its verdicts are dropped, and a
warm-up Case that raises is skipped: the real Case of that kind reports the problem where it
belongs. (Triton's loads of diagfuzz's compiled variants stay in the first Cases.)
"""

from __future__ import annotations

import torch

from diagfuzz.core.case import Case
from diagfuzz.specs import all_specs


def warm_up_cases() -> list[Case]:
    """Every op's warm-up Cases (its spec's: per dtype this torch has, a contiguous Case
    with a special value and one read through a strided view with random bit patterns)."""
    return [case for spec in all_specs() for case in spec.warm_up_cases()]


#: device -> Cases judged by this process's warm-up of it. Once per process and device: an
#: executor forked from the fork server inherits the server's CPU warm-up.
_WARMED: dict[str, int] = {}


def warm_up(device: str) -> int:
    """Run the warm-up Cases through the oracle on aten (once a process and device); how
    many it judged."""
    if device in _WARMED:
        return _WARMED[device]
    _WARMED[device] = _judge_all(device)
    return _WARMED[device]


def _judge_all(device: str) -> int:
    from diagfuzz import oracles
    from diagfuzz.impl import aten

    judged = 0
    for case in warm_up_cases():
        try:
            oracles.check(case, aten, device)
            judged += 1
        except Exception:  # a real Case of this kind reports it
            continue
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return judged
