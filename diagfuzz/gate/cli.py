"""The ``diagfuzz`` command: ``gate``, ``repro PATH``, ``replay DIR``, ``merge FILE...``.

Every subcommand checks its arguments before it does any work, and a usage error exits 4
(as pytest's do), never a code that means something about the implementation. The exit
codes (``diagfuzz.core.exits``) and the choice lists in ``--help`` (ops, dtypes, layouts)
are read from the code's own tables, so the help cannot go stale.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from diagfuzz.core import corpus, rundirs
from diagfuzz.core.exits import ExitCode, table
from diagfuzz.core.roots import DEFAULT_IMPL, ImplError
from diagfuzz.gate.usage import UsageError, writable_file

EXIT_FAILURE, EXIT_ERROR, EXIT_USAGE = ExitCode.FAILURE, ExitCode.ERROR, ExitCode.USAGE

DESCRIPTION = """\
diagfuzz: a bitwise test oracle and fuzzer for Triton kernels of PyTorch's diagonal family.

The fuzz suite is a pytest plugin:
  pytest -n auto -p diagfuzz --pyargs diagfuzz.suite --impl=MODULE:ATTR
This command runs the pre-merge gate, reproduces what a run found and merges the
reports of a campaign's partitions (diagfuzz merge)."""

EXIT_CODES = table()


class _Parser(argparse.ArgumentParser):
    """argparse, exiting 4 on a usage error (argparse's own 2 means "flaky" to the gate)."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _whole(text: str) -> int:
    try:
        return int(text)
    except ValueError:  # argparse would name this function in its message
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None


def _positive_int(text: str) -> int:
    value = _whole(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _count(text: str) -> int:
    value = _whole(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def _seconds(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, got {value:g}")
    return value


def _workers(text: str) -> str:
    if text == "auto" or (text.isdigit() and int(text) >= 0):
        return text
    raise argparse.ArgumentTypeError(f"must be 'auto' or a number of workers, got {text!r}")


def _stage_executors(text: str) -> int | None:
    if text == "auto":
        return None
    if text.isdigit() and int(text) >= 1:
        return int(text)
    raise argparse.ArgumentTypeError(f"must be 'auto' or a number of executors (1 or more), "
                                     f"got {text!r}")


def _device(text: str) -> str:
    if text.split(":")[0] in ("cpu", "cuda"):
        return text
    raise argparse.ArgumentTypeError(f"must be cpu or cuda (cuda:N), got {text!r}")


def _names(option: str, value: str | None, valid: Sequence[str]) -> None:
    if value is None:
        return
    chosen = [v.strip() for v in value.split(",") if v.strip()]
    unknown = [v for v in chosen if v not in valid]
    if unknown or not chosen:
        raise UsageError(f"{option} {value!r}: unknown {', '.join(unknown) or 'empty'}; "
                         f"choose from {', '.join(valid)}")


def _op_names() -> tuple[str, ...]:
    from diagfuzz.core.opnames import op_names

    return op_names()


def _check_gate(args: argparse.Namespace) -> None:
    """Everything the gate would otherwise find out late (without torch: the suite starts
    once they are checked, before the gate's own imports)."""
    from diagfuzz.core.names import DTYPE_NAMES, LAYOUT_KINDS, MAX_RANK
    from diagfuzz.core.opnames import op_names

    for option, path in (("--report", args.report), ("--junit", args.junit),
                         ("--summary", args.summary)):
        writable_file(option, path)
    if args.corpus.exists() and not args.corpus.is_dir():
        raise UsageError(f"--corpus {args.corpus}: is a file, not a directory")
    if args.out.exists() and not args.out.is_dir():
        raise UsageError(f"--out {args.out}: is a file, not a directory")
    _names("--ops", args.ops, op_names())
    _names("--dtypes", args.dtypes, DTYPE_NAMES)
    _names("--layouts", args.layouts, LAYOUT_KINDS)
    if args.ranks is not None:
        low, _, high = args.ranks.replace("..", "-").partition("-")
        try:
            pair = (int(low), int(high or low))
        except ValueError:
            pair = (0, -1)
        if not 2 <= pair[0] <= pair[1] <= MAX_RANK:
            raise UsageError(f"--ranks {args.ranks!r}: give N or LO-HI with "
                             f"2 <= LO <= HI <= {MAX_RANK}")


def gate_options(args: argparse.Namespace) -> Any:
    """The gate's ``Options`` from parsed arguments."""
    from diagfuzz.gate.options import Options

    return Options(
        impl=args.impl, budget=args.budget, workers=args.workers, junit=args.junit,
        report=args.report, summary=args.summary, timeout=args.timeout, device=args.device,
        corpus_dir=args.corpus, out_dir=args.out, repeats=args.repeats,
        save_corpus=not args.no_save, suite=not args.no_suite,
        compile_sample=not args.no_compile, opinfo=not args.no_opinfo,
        sequences=not args.no_sequences,
        covering=not args.no_covering,
        max_classify=args.max_classify,
        ops=args.ops, dtypes=args.dtypes, ranks=args.ranks, layouts=args.layouts,
        max_elements=args.max_elements, strict=args.strict, max_seconds=args.max_seconds,
        quiet=args.quiet, huge=args.huge, stage_executors=args.stage_executors,
        require_stages=args.require_stages)


def _gate(args: argparse.Namespace) -> int:
    _check_gate(args)
    opts = gate_options(args)
    if not args.plan:
        _start_suite(opts)  # before the imports below: they take seconds (torch)
    from diagfuzz.gate import outputs as gate_report
    from diagfuzz.gate.plan import plan_lines
    from diagfuzz.gate.run import run_gate

    if args.plan:
        from diagfuzz.impl import import_roots, use_roots

        use_roots(import_roots())  # --impl may name a module of the current directory
        try:
            print("\n".join(plan_lines(opts)))
        except ImplError as exc:
            raise UsageError(str(exc)) from exc
        return ExitCode.CLEAN

    def write(result: Any) -> None:
        # The machine-readable outputs first: a stop's bound can end a slow write (a loaded
        # machine), and a CI reads the JSON report and the JUnit, not the printed summary.
        problems = []
        try:
            gate_report.write_outputs(result, opts.report, opts.junit)
        except OSError as exc:  # checked up front; the summary is printed all the same
            problems.append(f"diagfuzz gate: could not write an output: {exc}")
        finally:
            text = gate_report.markdown(result)
            print(text, flush=True)
            try:
                if opts.summary is not None:
                    opts.summary.write_text(text + "\n", encoding="utf-8")
            except OSError as exc:
                problems.append(f"diagfuzz gate: could not write an output: {exc}")
            for problem in problems:
                print(problem, file=sys.stderr)

    return int(run_gate(opts, write, exit_bounded=True).code)


def _start_suite(opts: Any) -> None:
    """Start the fuzz suite's pytest in this run's directory now: its controller's
    start-up is the gate's critical path, and nothing here has imported torch yet. Not
    where the suite does not run, where the impl is not there (the gate says so), or with
    --require-stages, where the gate may refuse to run anything (it knows only later)."""
    from diagfuzz.core.roots import import_roots, locate_impl, use_roots
    from diagfuzz.gate import suite

    if not opts.suite or opts.require_stages:
        return
    use_roots(import_roots())
    try:
        locate_impl(opts.impl)
    except ImplError:
        return
    opts.out_dir.mkdir(parents=True, exist_ok=True)
    opts.run_dir = rundirs.new_run_dir(opts.out_dir)
    suite.start_early(opts)


def _repro(args: argparse.Namespace) -> int:
    from diagfuzz.harness.reproducers import run_reproducer

    path: Path = args.path
    if path.is_dir():
        raise UsageError(f"repro {path}: is a directory; give one reproducer script or "
                         f"corpus .json file (to run every Case of a corpus: diagfuzz "
                         f"replay {path})")
    if not path.exists():
        raise UsageError(f"repro {path}: no such file")
    if path.suffix not in (".py", ".json"):
        raise UsageError(f"repro {path}: expected a reproducer .py or a corpus .json file")
    forwarded = []
    for flag in ("repeat", "device", "impl", "timeout"):
        value = getattr(args, flag)
        if value is not None:
            forwarded.append(f"--{flag}={value}")
    if args.in_process:
        forwarded.append("--in-process")
    try:
        return run_reproducer(path, forwarded).returncode
    except ValueError as exc:
        raise UsageError(f"repro {path}: {exc}") from exc


def _replay(args: argparse.Namespace) -> int:
    from diagfuzz.execution.parent import ExecutorError, ProcessRunner
    from diagfuzz.impl import import_roots, use_roots

    if args.opinfo:
        from diagfuzz.gate.opinfo_replay import replay_opinfo

        if args.dir is not None:
            raise UsageError(f"replay --opinfo takes no directory (got {args.dir}): it "
                             f"replays PyTorch's OpInfo samples, not a corpus")
        use_roots(import_roots())
        _names("--ops", args.ops, _op_names())
        ops = {op.strip() for op in args.ops.split(",")} if args.ops else None
        try:
            return replay_opinfo(args.impl or DEFAULT_IMPL, args.device, args.timeout, ops)
        except ImplError as exc:
            print(f"diagfuzz replay: {exc}", file=sys.stderr)
            return EXIT_USAGE
    if args.ops:
        raise UsageError("--ops narrows --opinfo only (a corpus replays whole)")
    directory: Path = args.dir or Path(corpus.DEFAULT_DIR)
    if not directory.exists():
        raise UsageError(f"replay {directory}: no such directory")
    if not directory.is_dir():
        raise UsageError(f"replay {directory}: is a file; give a corpus directory (for one "
                         f"file: diagfuzz repro {directory})")
    use_roots(import_roots())
    try:
        found = corpus.entries(directory)
    except ValueError as exc:
        raise UsageError(f"replay {directory}: {exc}") from exc
    if not found:
        raise UsageError(f"replay {directory}: holds no corpus .json files")
    failed = 0
    by_impl: dict[str, list[Any]] = {}
    for entry in found:  # each Case against the impl it was found in, unless --impl says
        impl = args.impl or str(entry.found.get("impl") or DEFAULT_IMPL)
        by_impl.setdefault(impl, []).append(entry)
        use_roots(corpus.recorded_impl_path(entry))  # where it was imported from
    try:
        for impl, group in by_impl.items():
            with ProcessRunner(impl, args.device, timeout=args.timeout) as runner:
                for entry in group:
                    verdict = runner.run(entry.case)
                    failed += not verdict.ok
                    where = f" [{verdict.check}]" if verdict.check else ""
                    print(f"{verdict.kind:>12}{where} {entry.path.name}: "
                          f"{entry.case.describe()}"
                          + (f"\n{'':>13}{verdict.message}" if verdict.message else ""))
    except ImplError as exc:
        print(f"diagfuzz replay: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ExecutorError as exc:
        print(f"diagfuzz replay: {exc}", file=sys.stderr)
        return EXIT_ERROR
    impls = ", ".join(by_impl)
    print(f"{len(found) - failed}/{len(found)} corpus Cases pass with {impls}")
    return EXIT_FAILURE if failed else 0


def parser() -> argparse.ArgumentParser:
    """The argument parser (also documents every option). Imports no torch."""
    from diagfuzz.core.names import DTYPE_NAMES, LAYOUT_KINDS
    from diagfuzz.core.opnames import op_names
    from diagfuzz.gate.options import DEFAULT_BUDGET, Options
    from diagfuzz.gate.pool import STAGE_EXECUTORS_RULE
    from diagfuzz.harness.profiles import BUDGETS
    from diagfuzz.harness.sharding import STREAMS, suite_split

    SPECS = op_names()

    DEFAULT_TIMEOUT = Options.timeout
    defaults = Options()
    gate_budget = BUDGETS["gate"]
    gate_total, gate_split = suite_split(gate_budget.total, gate_budget.shards, len(STREAMS))
    formatter = argparse.RawDescriptionHelpFormatter
    top = _Parser(prog="diagfuzz", description=DESCRIPTION, epilog=EXIT_CODES,
                  formatter_class=formatter)
    from diagfuzz import __version__

    top.add_argument("--version", action="version", version=f"diagfuzz {__version__}")
    sub = top.add_subparsers(dest="command", required=True, parser_class=_Parser)

    g = sub.add_parser(
        "gate", formatter_class=formatter, epilog=EXIT_CODES,
        help="the pre-merge gate: corpus, fuzz suite, error parity, OpInfo samples, "
             "torch.compile sample (--huge: Cases past 2**31 elements)",
        description="The pre-merge gate: replays the corpus, runs the fuzz suite under the "
                    "derandomized gate profile, fixed error-parity Cases, PyTorch's OpInfo "
                    "samples and a torch.compile sample (with --huge, Cases past 2**31 "
                    "elements on the GPU); merges their findings by cause, classifies each "
                    "cause by re-running it in a fresh process, writes its reproducer and "
                    "saves it to the corpus. Prints progress on stderr and a markdown "
                    "summary on stdout. SIGTERM or SIGINT stop it, within 10 s, with the "
                    "outputs of what finished (exit 7 when nothing failed).")
    g.add_argument("--impl", default=DEFAULT_IMPL,
                   help="the implementation under test: MODULE (its functions), MODULE:ATTR "
                        "or path/to/file.py:ATTR, or registered:MODULE[:CALLABLE], a "
                        "library through the aten kernels it registers (importing MODULE, "
                        f"then calling CALLABLE) (default: {DEFAULT_IMPL}, diagfuzz's "
                        "own kernels)")
    g.add_argument("--budget", type=_positive_int, default=DEFAULT_BUDGET,
                   help="fuzz-suite Cases, all shards of the streams that run together, "
                        "split evenly (default: the gate profile's "
                        f"{gate_total:,}, {gate_split} with every op; --plan prints the "
                        "split for the impl's ops)")
    g.add_argument("-n", dest="workers", type=_workers, default="auto",
                   help="pytest-xdist workers (auto)")
    g.add_argument("--stage-executors", type=_stage_executors, default=None,
                   metavar="N|auto",
                   help="executors judging the fixed stages (corpus, covering, error parity, "
                        "OpInfo, torch.compile), each specialisation of an op in one of "
                        "them; from 2, torch.compile takes one alone, beside the others "
                        f"(default {STAGE_EXECUTORS_RULE})")
    g.add_argument("--max-seconds", type=_seconds,
                   help="a wall-clock cap from the gate's start (Python's own start-up, "
                        "2-3 s, comes before it): the gate ends within 5 %% of it, with its "
                        "report, JUnit and summary of what finished (exit 6 if cut with "
                        "nothing found; a stage ended before it reported a Case is named)")
    g.add_argument("--ops", help=f"only these ops, comma-separated ({', '.join(SPECS)})")
    g.add_argument("--dtypes", help="only these dtypes, comma-separated "
                                    f"({', '.join(DTYPE_NAMES)})")
    g.add_argument("--ranks", help="only these ranks: N or LO-HI")
    g.add_argument("--layouts", help="only these layout kinds, comma-separated "
                                     f"({', '.join(LAYOUT_KINDS)})")
    g.add_argument("--max-elements", type=_positive_int,
                   help="largest tensor the suite draws")
    g.add_argument("--strict", action="store_true",
                   help="ignore the impl's capability declarations and demand the Python "
                        "bindings' exception types for binding-level invalid Cases")
    g.add_argument("--junit", type=Path, help="write JUnit XML here")
    g.add_argument("--report", type=Path, help="write the JSON report here")
    g.add_argument("--summary", type=Path, help="also write the markdown summary here")
    g.add_argument("--timeout", type=_seconds, default=DEFAULT_TIMEOUT,
                   help="the most seconds a Case may run without progress before it is a "
                        "hang; below it each op's allowance is calibrated on the times "
                        f"measured in the run (default {DEFAULT_TIMEOUT:g})")
    g.add_argument("--device", type=_device,
                   help="cpu or cuda (default: cuda if there is a GPU)")
    g.add_argument("--corpus", type=Path, default=Path(corpus.DEFAULT_DIR),
                   help="regression corpus to replay first and to save findings to "
                        f"(default ./{corpus.DEFAULT_DIR}/)")
    g.add_argument("--out", type=Path, default=defaults.out_dir,
                   help="each run writes into OUT/run-<UTC time>-<pid>/ (its reproducers "
                        "in repro/, the suite's raw output and journals); OUT/latest points "
                        "at the last run that wrote its outputs; runs beyond the last "
                        f"{rundirs.KEEP} are pruned after a run (default {defaults.out_dir})")
    g.add_argument("--repeats", type=_positive_int, default=defaults.repeats,
                   help=f"re-runs per finding in its fresh process ({defaults.repeats}); "
                        "a sequence a failure needs is replayed twice as many times")
    g.add_argument("--max-classify", type=_count, default=defaults.max_classify,
                   help=f"classify at most this many findings ({defaults.max_classify})")
    g.add_argument("--no-save", action="store_true", help="do not add findings to the corpus")
    g.add_argument("--no-suite", action="store_true", help="skip the fuzz-suite stage")
    g.add_argument("--no-compile", action="store_true", help="skip the torch.compile sample")
    g.add_argument("--no-covering", action="store_true",
                   help="skip the covering Cases (every valid 3-way combination of each "
                        "op's factor model, 4-way of its geometric core)")
    g.add_argument("--no-sequences", action="store_true",
                   help="skip the sequence search (call sequences drawn for bugs that "
                        "depend on what ran before, each in a fresh executor)")
    g.add_argument("--no-opinfo", action="store_true",
                   help="skip PyTorch's OpInfo samples (skipped anyway where "
                        "torch.testing._internal does not import: it needs expecttest)")
    g.add_argument("--huge", action="store_true",
                   help="add the huge tier: a few Cases per op past 2**31 elements and 2**32 "
                        "bytes, judged on the GPU in chunks (CUDA only; skipped elsewhere)")
    g.add_argument("--require-stages", action="store_true",
                   help="a stage that cannot run here (the huge tier without CUDA, OpInfo "
                        "samples without expecttest) is an error: exit 3 before anything "
                        "runs, not a 'Not run' line after the other stages")
    g.add_argument("--quiet", action="store_true",
                   help="no progress lines on stderr (a line per stage start and end, and "
                        "one at least every 10 s): the summary alone")
    g.add_argument("--plan", action="store_true",
                   help="print what the gate would run (Cases per stage and op, budget, "
                        "time cap, output paths) and exit 0, running nothing")
    g.set_defaults(func=_gate)

    r = sub.add_parser("repro", formatter_class=formatter, epilog=EXIT_CODES,
                       help="run a reproducer script or a corpus .json file",
                       description="Run one reproducer script (written by a fuzz run or "
                                   "the gate) or one corpus .json file.")
    r.add_argument("path", type=Path)
    r.add_argument("--repeat", type=_positive_int, metavar="N",
                   help="run the Case N times, each judged (default: the script's, 1, or a "
                        "flaky finding's R): a flaky failure shows as k of N")
    r.add_argument("--device", type=_device, metavar="cpu|cuda",
                   help="where to run it (default: the reproducer's own)")
    r.add_argument("--impl", help="MODULE:ATTR to run it against instead of the recorded one")
    r.add_argument("--timeout", type=_seconds, metavar="SECONDS",
                   help="seconds the Case may take before it counts as a hang (default: the "
                        "reproducer's own)")
    r.add_argument("--in-process", action="store_true",
                   help="run in this process (for a debugger; a crash kills it)")
    r.set_defaults(func=_repro)

    p = sub.add_parser("replay", formatter_class=formatter, epilog=EXIT_CODES,
                       help="replay every Case of a corpus directory, or PyTorch's OpInfo "
                            "samples (--opinfo)",
                       description="Replay every Case of a corpus directory (default "
                                   f"./{corpus.DEFAULT_DIR}/), or with --opinfo every OpInfo "
                                   "sample and error input of the ops, judged bitwise.")
    p.add_argument("dir", type=Path, nargs="?", default=None)
    p.add_argument("--opinfo", action="store_true",
                   help="replay PyTorch's OpInfo samples instead of a corpus (needs "
                        "expecttest: pip install expecttest)")
    p.add_argument("--ops", help=f"with --opinfo: only these ops, comma-separated "
                                 f"({', '.join(SPECS)})")
    p.add_argument("--impl", help="MODULE:ATTR to run every Case against (default: the impl "
                                  f"each file records, else {DEFAULT_IMPL})")
    p.add_argument("--device", type=_device)
    p.add_argument("--timeout", type=_seconds, default=DEFAULT_TIMEOUT)
    p.set_defaults(func=_replay)
    from diagfuzz.gate.merge_cli import add_parser as add_merge

    add_merge(sub, formatter)  # diagfuzz merge: a campaign's partitions as one run
    return top


def _command_parser(top: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    """The parser of subcommand ``name`` (``top`` itself if there is none)."""
    for action in top._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices.get(name, top)
    return top


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``diagfuzz`` console script; returns the exit code."""
    top = parser()
    args: Any
    args, extra = top.parse_known_args(argv)
    if extra:  # refused by the subcommand's parser, so its usage line is the one shown
        _command_parser(top, args.command).error(
            f"unrecognized arguments: {' '.join(extra)}")
    try:
        return int(args.func(args))
    except BrokenPipeError:  # stdout closed early (`| head`): not an error of the command
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return ExitCode.CLEAN
    except UsageError as exc:
        print(f"diagfuzz {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
