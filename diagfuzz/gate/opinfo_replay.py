"""``diagfuzz replay --opinfo``: PyTorch's OpInfo samples of the family, judged bitwise.

The same Cases as the gate's OpInfo stage (``diagfuzz.strategies.opinfo``), in one executor
against one impl: the first few failing Cases of each cause, then one line per cause
(signature) with its count, so a maintainer who trusts op_db sees what bitwise judging adds
to it. The gate gives each cause a shrunk reproducer; this command is the quick look.
"""

from __future__ import annotations

from collections import Counter

from diagfuzz.core.exits import ExitCode
from diagfuzz.core.signature import signature_of
from diagfuzz.execution.parent import ExecutorError, ProcessRunner
from diagfuzz.gate.usage import UsageError, check_ops_provided

#: Failing Cases printed per cause (each cause's count covers them all).
SHOWN = 3


def replay_opinfo(impl: str, device: str | None, timeout: float,
                  ops: set[str] | None = None) -> int:
    """Judge every OpInfo Case against ``impl``; the exit code (0 all pass, 1 a failure,
    2 the executor broke; a UsageError where op_db does not import)."""
    from diagfuzz.gate.stages import opinfo_samples, torch_version
    from diagfuzz.impl import load_impl, provided_ops

    provided = provided_ops(load_impl(impl))  # as the gate: an op it lacks is skipped
    check_ops_provided(",".join(ops) if ops else None, provided, impl)
    with ProcessRunner(impl, device, timeout=timeout) as runner:
        samples = opinfo_samples(runner.device)
        if samples.skipped:
            raise UsageError(f"--opinfo: {samples.skipped}")
        cases = [c for c in samples.cases
                 if c.op in provided and (ops is None or c.op in ops)]
        print(f"OpInfo of torch {torch_version()}: {samples.summary()}", flush=True)
        lacking = sorted({c.op for c in samples.cases if ops is None or c.op in ops}
                         - set(provided))
        if lacking:
            print(f"skipped: the Cases of {', '.join(lacking)} ({impl} provides none)",
                  flush=True)
        print(f"judging {len(cases)} of them against {impl}", flush=True)
        causes: Counter[str] = Counter()
        failed = unsupported = 0
        try:
            for case in cases:
                verdict = runner.run(case)
                unsupported += verdict.unsupported
                if verdict.ok:
                    continue
                failed += 1
                cause = signature_of(verdict).describe()
                causes[cause] += 1
                if causes[cause] <= SHOWN:  # a cause's first Cases; the count says the rest
                    print(f"{verdict.kind:>12} [{verdict.check}] {case.describe()}\n"
                          f"{'':>13}{verdict.message}", flush=True)
        except ExecutorError as exc:
            print(f"diagfuzz replay --opinfo: {exc}", flush=True)
            return ExitCode.ERROR
    for cause, count in causes.most_common():
        more = f" ({count - SHOWN} not listed above)" if count > SHOWN else ""
        print(f"  {count:>5} Cases: {cause}{more}")
    skipped = f" ({unsupported} unsupported by the impl, not judged)" if unsupported else ""
    print(f"{len(cases) - failed}/{len(cases)} OpInfo Cases pass with {impl}{skipped}; "
          f"{len(causes)} cause(s)")
    return ExitCode.FAILURE if failed else ExitCode.CLEAN
