"""Judge a batch of Cases: the per-Case oracle's checks, with the costs a Case pays once
paid once per batch.

What a single judgement (``checks.check``) pays per Case and a batch pays once: the
sentinel allocator's registration (~0.3 ms each way on an H200 host, a third of a Case),
and the copy back with its synchronisation.
Everything else is the single path's own code, step for step: materialisation, the host
references, uploads, aten's device kernel, the implementation's call (once per Case, its
contract unchanged) and the host-side judgement of every check.

Why the verdicts equal single judgements: each Case keeps its own inputs, sentinel byte,
guarded allocations and dispatch counter. What a batch shares is memory and time: a stray
write of one Case's kernel may land in another's buffers, and an asynchronous CUDA error
surfaces at the batch's one synchronisation. So a batch's failing verdicts are not final:
the executor judges those Cases again alone (``diagfuzz.execution.child``), and a batch
that crashes, hangs or leaves the context unhealthy is judged again one Case at a time in
a fresh executor (``diagfuzz.execution.parent``).
"""

from __future__ import annotations

from typing import Any

from diagfuzz.core.case import Case
from diagfuzz.core.dispatch import aten_only, judged
from diagfuzz.core.runtime import DEVICE
from diagfuzz.core.verdict import Verdict
from diagfuzz.oracles.checks import (
    DeviceRun,
    ValidPlan,
    _out_skipped,
    bring_back,
    call_impl,
    capability_refusal,
    error_parity_batch,
    judge_runs,
    plan_valid,
    served,
    upload,
)
from diagfuzz.oracles.sentinel import PREFERRED, SentinelAllocations
from diagfuzz.specs import arguments

#: The most Cases one batch takes: the executor's batches (``diagfuzz.execution.child``).
MAX_BATCH = 64


@judged
def check_batch(cases: list[Case], impl: Any, device: str = DEVICE, *,
                strict: bool = False) -> list[Verdict]:
    """``checks.check`` of every Case of ``cases``, in order (see the module docstring)."""
    verdicts: list[Verdict | None] = [None] * len(cases)
    parity: list[int] = []
    hosts: list[tuple[int, dict[str, Any]]] = []
    for i, case in enumerate(cases):
        settled = capability_refusal(case, impl, strict) or (
            None if case.invalid else _out_skipped(case, impl))
        if settled:
            verdicts[i] = settled
        elif case.invalid:
            parity.append(i)
        else:
            hosts.append((i, arguments(case, "cpu")))  # the one materialisation
    plans: list[tuple[int, ValidPlan]] = []
    with aten_only():
        for i, host in hosts:
            plan = plan_valid(cases[i], host)
            if plan is None:
                parity.append(i)
            elif isinstance(plan, Verdict):
                verdicts[i] = plan
            else:
                plans.append((i, plan))
    runs = _run_on_device(plans, impl, device)
    for (i, plan), plan_runs in zip(plans, runs, strict=True):
        if plan_runs[0].reference_raised is not None:
            parity.append(i)
        else:
            verdicts[i] = judge_runs(plan, plan_runs, impl, device, strict)
    parity.sort()
    for i, verdict in zip(parity, error_parity_batch([cases[i] for i in parity], impl,
                                                     device, strict=strict), strict=True):
        verdicts[i] = verdict
    return [v for v in verdicts if v is not None]


def _run_on_device(plans: list[tuple[int, ValidPlan]], impl: Any,
                   device: str) -> list[list[DeviceRun]]:
    """Every run of every plan: uploads and aten's device kernel first, then the
    implementation's calls under one sentinel registration, then one copy back."""
    runs = []
    for _, plan in plans:
        first = upload(plan.case, plan.host, plan.sentinels[0], device, with_reference=True)
        rest = [] if first.reference_raised is not None else [
            upload(plan.case, plan.host, byte, device, with_reference=False)
            for byte in plan.sentinels[1:]]
        runs.append([first, *rest])
    called: list[DeviceRun] = []
    with SentinelAllocations(PREFERRED[0]) as alloc:
        for (_, plan), plan_runs in zip(plans, runs, strict=True):
            if plan_runs[0].reference_raised is not None:
                continue
            plan.before = served(plan.case, impl)
            for run in plan_runs:
                alloc.record_into(run.alloc)
                call_impl(impl, plan.case, run, plan.expected.shape)
                called.append(run)
            plan.after = served(plan.case, impl)
    if called:
        bring_back(called)
    return runs


__all__ = ["MAX_BATCH", "check_batch"]
