"""Warm an executor before it reports ready: what the first Cases of a run would load.

Why: a fresh process pays once for much of what a Case uses. CUDA loads each aten kernel's
module on first use (lazy loading: every op and dtype the oracle touches), and torch imports
modules on the first autograd backward (``symbolic_shapes``: 0.25 s on the CPU machine, more
on a GPU host). Paid inside the first shards, it counted as fuzzing time (the report's pace)
although it is start-up. The executor now pays it while the shard is set up.

Nothing here can hide or cause a verdict: only the oracle runs, judging aten against itself
(diagfuzz's kernels and the impl under test are never called; a kernel bug must show as the
failing Case it is, never as an executor that cannot start), its verdicts are dropped, and a
warm-up Case that raises is skipped: the real Case of that kind reports the problem where it
belongs. (Triton's loads of diagfuzz's compiled variants stay in the first Cases.)
"""

from __future__ import annotations

import torch

from diagfuzz.case import DTYPE_NAMES, Case, Layout, Values, contiguous_strides

#: Input sizes, offset and dims of every warm-up Case: a small matrix, a diagonal of 3.
SIZES, OFFSET, DIM1, DIM2 = (3, 4), 1, 0, 1


def warm_up_cases() -> list[Case]:
    """Per op and dtype (those this torch has): one contiguous Case with a special value,
    and one read through a strided view with random bit patterns."""
    cases = []
    diagonal_shape = (3,)
    for name in DTYPE_NAMES:
        if not hasattr(torch, name):
            continue
        for op, shape in (("diagonal", SIZES), ("diagonal_backward", diagonal_shape)):
            contiguous = Layout.contiguous(shape)
            strided = Layout(shape, tuple(2 * s for s in contiguous_strides(shape)), 1,
                             ("sliced", "offset"))
            cases.append(Case(op, SIZES, OFFSET, DIM1, DIM2, name, contiguous,
                              Values(1, "normal", ((0, 0),))))
            cases.append(Case(op, SIZES, OFFSET, DIM1, DIM2, name, strided, Values(2, "bits")))
    return cases


def warm_up(device: str) -> int:
    """Run the warm-up Cases through the oracle on aten; how many it judged."""
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
