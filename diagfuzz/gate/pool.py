"""The fixed stages' executors: how many, and which of them judges each Case.

The fixed stages (corpus, covering, error parity, OpInfo, torch.compile, audit) are judged
by a pool of executors (``FanoutRunner``) beside the fuzz suite. A JIT-compiled library
(FlagGems) compiles one kernel per specialisation in each process that meets it, so the
Cases of one specialisation (``specialisation``) go to one executor: each is compiled once,
in one process, however many executors there are. ``Router`` hands out the groups as
executors run short of work, the largest first, so the pool stays balanced; what is judged
does not depend on it (``stages.run_cases`` records findings in the stage's Case order).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from diagfuzz.execution.fanout import FanoutRunner
from diagfuzz.execution.parent import ProcessRunner
from diagfuzz.execution.timeouts import Calibration, KnownFaults

if TYPE_CHECKING:
    from diagfuzz.core.case import Case, Layout

#: The most executors the fixed stages take by default: the covering stage's ~3,800 Cases
#: are ~900 specialisations, so more only add start-ups (a CUDA context and warm-up each).
MAX_STAGE_EXECUTORS = 8
#: How ``--stage-executors auto`` chooses (the help and ``--plan`` both say it).
STAGE_EXECUTORS_RULE = (f"auto: one per CPU the fuzz suite's workers leave, less one for "
                        f"the gate, 1 to {MAX_STAGE_EXECUTORS}")


def auto_stage_executors(cpus: int, suite_workers: int) -> int:
    """``STAGE_EXECUTORS_RULE``: the gate profile judges each Case as a worker draws it, so
    a worker and its executor busy one CPU between them; the gate's own thread records
    the verdicts. On 2 CPUs this is 1: a second executor would only slow the suite."""
    return max(1, min(MAX_STAGE_EXECUTORS, cpus - suite_workers - 1))


def grown_stage_executors(cpus: int, device: str, started: int) -> int:
    """The fixed stages' executors once the fuzz suite has ended, on a CPU: one per CPU
    (at most ``MAX_STAGE_EXECUTORS``), since the suite's workers have left theirs and the
    gate's own thread only records verdicts. A 2-CPU gate's covering stage otherwise
    judged its last minutes on one executor beside an idle CPU. On a GPU ``started``: a
    new executor's start (a CUDA context, the impl's import) costs more than it saves."""
    if str(device).startswith("cuda"):
        return started
    return max(started, min(MAX_STAGE_EXECUTORS, cpus))


def stage_pool(impl: str, device: str, executors: int, timeout: float, workdir: Path,
               strict: bool, learnt: tuple[Calibration, KnownFaults] | None = None
               ) -> FanoutRunner:
    """``executors`` executors, each logging (and timing) under ``workdir/<index>``, all
    calibrating their timeouts and learning confirmed faults together (``learnt``); a Case
    with the shape of its op's confirmed hang or crash is not run (``fault_shapes``)."""
    runners = [ProcessRunner(impl, device, timeout=timeout, strict=strict,
                             workdir=workdir / str(index), learnt=learnt)
               for index in range(executors)]
    for runner in runners:
        runner.block_fault_shapes = True
    return FanoutRunner(runners)


def split_compile_lane(pool: FanoutRunner) -> tuple[FanoutRunner, FanoutRunner | None]:
    """(the pool's other executors, its last one alone) where the pool has two or more.

    The torch.compile stage spends its seconds in inductor (its import, then one compile
    a Case), not in the oracle, so with an executor of its own it runs beside the other
    stages instead of after them. With one executor there is nothing to run beside:
    ``(pool, None)``, and the stage runs in turn."""
    if len(pool.runners) < 2:
        return pool, None
    return FanoutRunner(pool.runners[:-1]), FanoutRunner(pool.runners[-1:])


# --- affinity ---------------------------------------------------------------------------

def layout_class(layout: Layout) -> str:
    """What a kernel library specialises a tensor's layout on: contiguous, expanded (a
    zero stride), else strided; ``+offset`` when its data does not start the storage (a
    pointer Triton no longer knows aligned)."""
    from diagfuzz.core.case import contiguous_strides

    dims = [(st, want) for st, want, n in zip(layout.strides, contiguous_strides(layout.shape),
                                              layout.shape, strict=True) if n > 1]
    kind = ("contiguous" if all(st == want for st, want in dims)
            else "expanded" if any(st == 0 for st, _ in dims) else "strided")
    return kind + ("+offset" if layout.storage_offset else "")


def specialisation(case: Case) -> Hashable:
    """The compiled specialisation a JIT library would meet ``case`` with: op, invalid
    class, dtype, rank, every operand's layout class, and the ``out=`` call with its dtype.
    Coarser than a library's own key (Triton's divisibility by 16) at worst groups two of
    its specialisations, which still compile once each in that one process."""
    return (case.op, case.invalid, case.dtype, len(case.sizes), layout_class(case.layout),
            tuple((name, layout_class(layout)) for name, layout, _ in case.others),
            case.out_dtype, bool(case.out_device))


class Router:
    """Which executor judges which Case of one stage.

    The Cases are grouped by ``specialisation``; a group goes whole to one executor, the
    next group (largest first, then in the stage's order) to whichever executor has the
    fewest Cases in flight once its own group is all sent. ``next`` says what to submit.
    """

    def __init__(self, cases: Sequence[Case], executors: int) -> None:
        groups: dict[Hashable, list[int]] = {}
        for index, case in enumerate(cases):
            groups.setdefault(specialisation(case), []).append(index)
        self.executors = max(1, executors)
        #: Groups not yet given to an executor, largest first (stable: the stage's order).
        self._groups = deque(sorted(groups.values(), key=len, reverse=True))
        self._lanes: list[deque[int]] = [deque() for _ in range(self.executors)]
        #: Per executor, the indices of the Cases it was given, in order.
        self.given: list[list[int]] = [[] for _ in range(self.executors)]

    def add_executor(self) -> None:
        """One more executor takes groups from now on (the pool grew)."""
        self.executors += 1
        self._lanes.append(deque())
        self.given.append([])

    def next(self, in_flight: Sequence[int]) -> tuple[int, int] | None:
        """(executor, index of the Case in the stage's list) to submit next, or None when
        every Case is given. ``in_flight``: each executor's Cases unanswered now."""
        ready = [i for i in range(self.executors) if self._lanes[i] or self._groups]
        if not ready:
            return None
        executor = min(ready, key=lambda i: (in_flight[i], i))
        lane = self._lanes[executor]
        if not lane:
            lane.extend(self._groups.popleft())
        index = lane.popleft()
        self.given[executor].append(index)
        return executor, index
