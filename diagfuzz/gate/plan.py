"""``diagfuzz gate --plan``: what a gate would run, printed without running it.

The docs quote this output for the default options, and a test regenerates the quote, so
the numbers a user reads (Cases per stage and op, budget, time cap, output paths) are the
code's.
"""

from __future__ import annotations

from collections import Counter

from diagfuzz.core import corpus, rundirs
from diagfuzz.gate.options import Options
from diagfuzz.gate.outputs import levels_text
from diagfuzz.gate.pool import STAGE_EXECUTORS_RULE
from diagfuzz.gate.stages import (
    HUGE_SEED,
    OPINFO_STAGE,
    SUITE_SHARE,
    compile_cases,
    covering_for,
    error_parity_cases,
    fixed,
    huge_dtypes,
    opinfo_samples,
)
from diagfuzz.gate.usage import check_ops_provided
from diagfuzz.harness.sequences import EXAMPLES as SEQUENCE_EXAMPLES
from diagfuzz.harness.sequences import FULL_CPUS as SEQUENCE_FULL_CPUS
from diagfuzz.harness.sequences import SECONDS as SEQUENCE_SECONDS
from diagfuzz.harness.sequences import STEPS as SEQUENCE_STEPS
from diagfuzz.impl import capabilities, load_impl, provided_ops


def _per_op(cases: list) -> str:
    counts = Counter(c.op for c in cases)
    return ", ".join(f"{op} {n}" for op, n in counts.items())


def _opinfo_line(opts: Options, provided: tuple[str, ...]) -> str:
    """The OpInfo stage's line: its Cases per op, or why it is skipped."""
    if not opts.opinfo:
        return f"  {OPINFO_STAGE:<20} skipped (--no-opinfo)"
    samples = opinfo_samples(opts.device or "cpu")
    if samples.skipped:
        return f"  {OPINFO_STAGE:<20} skipped: {samples.skipped}"
    cases = fixed(opts, samples.cases, provided)
    return f"  {OPINFO_STAGE:<20} {len(cases):,} Cases ({_per_op(cases)})"


def huge_plan(opts: Options, provided: tuple[str, ...]) -> str:
    """The huge tier's line: its Cases per op, or why it would be skipped."""
    from diagfuzz.core import huge
    from diagfuzz.core.runtime import DEVICE
    from diagfuzz.strategies import huge_cases

    reason = huge.skip_reason(opts.device or DEVICE)
    if reason:
        return f"skipped: {reason}"
    wanted = tuple(op for op in (opts.ops.split(",") if opts.ops else provided)
                   if op in provided)
    cases = huge_cases(HUGE_SEED, ops=wanted or None,
                       dtypes=huge_dtypes(opts, load_impl(opts.impl)))
    return (f"{len(cases):,} Cases ({_per_op(cases)}) past {huge.threshold():,} elements, "
            f"at most {huge.max_bytes() / 2**30:g} GiB each")


def covering_plan(opts: Options, provided: tuple[str, ...]) -> list[str]:
    """The covering stage's lines: its Cases per op and the t-way coverage they give."""
    from diagfuzz.strategies.covering import inapplicable, measure

    if not opts.covering:
        return ["  covering array       skipped (--no-covering)"]
    caps = capabilities(load_impl(opts.impl), provided)
    if opts.strict:
        caps = {op: (None, has_out) for op, (_, has_out) in caps.items()}
    cases = covering_for(opts, provided, caps)
    lines = [f"  covering array       {len(cases):,} Cases ({_per_op(cases)})"]
    # Measured against the model narrowed to what the impl can take, as the run's summary
    # measures it; the rest is named as not applicable.
    excluded = {op: {f: set(v) for f, v in inapplicable(op, dtypes, has_out).items()}
                for op, (dtypes, has_out) in caps.items()}
    for op, found in measure(cases, excluded=excluded).items():
        shares = ", ".join(f"{t}-way {c.share:.0%}" for t, c in found.items())
        lines.append(f"                       {op}: {shares}")
    gone = levels_text({op: drop for op, drop in excluded.items() if drop})
    if gone:
        lines.append(f"                       not applicable (the impl cannot take them): {gone}")
    return lines


def plan_lines(opts: Options) -> list[str]:
    """The plan of a gate run with ``opts``: one line per stage, then limits and outputs."""
    from diagfuzz.core.streams import shards_within_budget
    from diagfuzz.harness.profiles import BUDGETS
    from diagfuzz.harness.sharding import STREAM_OPS, suite_split

    gate = BUDGETS["gate"]
    provided = provided_ops(load_impl(opts.impl))  # ImplError: the caller's usage error
    check_ops_provided(opts.ops, provided, opts.impl)
    wanted = ([op.strip() for op in opts.ops.split(",")] if opts.ops
              else list(STREAM_OPS.values()))
    wanted = [op for op in wanted if op in provided]
    streams = [op for op in STREAM_OPS.values() if op in wanted] + ["invalid"]
    lines = [f"diagfuzz gate --plan: impl {opts.impl}, device "
             f"{opts.device or 'cuda when there is a GPU, else cpu'} (nothing runs)"]
    try:
        replay = fixed(opts, corpus.load(opts.corpus_dir), provided)
        lines.append(f"  corpus replay        {len(replay):,} Cases from {opts.corpus_dir}/")
    except ValueError as exc:
        lines.append(f"  corpus replay        unreadable: {exc}")
    lines += covering_plan(opts, provided)
    if opts.suite:
        # Split over the streams that run (harness.planning), as --budget's help says.
        total = opts.budget or gate.total
        budget, split = suite_split(total, shards_within_budget(gate.shards, total,
                                                                len(streams)), len(streams))
        how = f"{'--budget' if opts.budget else 'the gate profile'}: {split}"
        lines.append(f"  fuzz suite           ~{budget:,} Cases ({how}), derandomized, "
                     f"-n {opts.workers}")
        lines.append(f"                       over the streams {', '.join(streams)}")
    else:
        lines.append("  fuzz suite           skipped (--no-suite)")
    parity = fixed(opts, error_parity_cases(), provided)
    lines.append(f"  error parity         {len(parity):,} Cases ({_per_op(parity)})")
    if opts.sequences:
        lines.append("  sequence search      a pattern sweep (each state pattern once on every "
                     "op, in one fresh executor), then")
        lines.append(f"                       up to {SEQUENCE_EXAMPLES} call sequences of "
                     f"{SEQUENCE_STEPS} steps, each in a fresh executor, while the other "
                     f"stages run ({SEQUENCE_SECONDS:g} s at most;")
        lines.append(f"                       a share of it under {SEQUENCE_FULL_CPUS} CPUs, "
                     "3 s at least)")
    else:
        lines.append("  sequence search      skipped (--no-sequences)")
    lines.append(_opinfo_line(opts, provided))
    if opts.compile_sample:
        sample = fixed(opts, compile_cases(), provided)
        lines.append(f"  torch.compile parity {len(sample):,} Cases ({_per_op(sample)})")
    else:
        lines.append("  torch.compile parity skipped (--no-compile)")
    if opts.huge:
        lines.append(f"  huge tier            {huge_plan(opts, provided)}")
    chosen = (f"{opts.stage_executors} (--stage-executors)" if opts.stage_executors
              else STAGE_EXECUTORS_RULE)
    lines.append(f"  stage executors      {chosen}")
    lines.append("                       for the stages above but the suite and the sequence "
                 "search; each op, dtype, rank")
    lines.append("                       and layout class on one;")
    lines.append("                       from 2, torch.compile parity on one of its own, "
                 "beside the other stages")
    lines.append(f"  classification       each cause's Case {opts.repeats} times in one fresh "
                 f"process (a crash or hang: {opts.repeats} processes);")
    lines.append("                       else the sequence it needs (the Case repeated, or "
                 "its executor's history shrunk),")
    lines.append(f"                       replayed {2 * opts.repeats} times; at most "
                 f"{opts.max_classify} causes, all at once")
    if opts.max_seconds is None:
        lines.append("  time cap             none (--max-seconds S: the fuzz suite's own cap "
                     f"is {SUITE_SHARE:.0%} of the time left, all stops at 95 % of S)")
    else:
        lines.append(f"  time cap             {opts.max_seconds:g} s (the fuzz suite's own "
                     f"cap is {SUITE_SHARE:.0%} of the time left; everything stops at 95 %)")
    lines.append(f"  per-Case timeout     calibrated on measured times, at most "
                 f"{opts.timeout:g} s; a confirmed hang's later Cases stopped at their "
                 f"allowance")
    lines.append(f"  run directory        {opts.out_dir}/run-<UTC time>-<pid>/ (reproducers "
                 "in repro/)")
    lines.append(f"                       then {opts.out_dir}/latest points at it; the last "
                 f"{rundirs.keep()} runs are kept")
    outputs = [f"{flag} {path}" for flag, path in (("--report", opts.report),
                                                   ("--junit", opts.junit),
                                                   ("--summary", opts.summary)) if path]
    lines.append("  outputs              markdown summary on stdout"
                 + (f"; {'; '.join(outputs)}" if outputs else ""))
    lines.append("  corpus               "
                 + (f"one Case per new cause saved to {opts.corpus_dir}/" if opts.save_corpus
                    else "nothing saved (--no-save)"))
    return lines
