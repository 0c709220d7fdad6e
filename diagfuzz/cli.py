"""The ``diagfuzz`` command: ``gate``, ``repro PATH``, ``replay DIR``.

Exit codes (all subcommands): 0 clean; 1 a (deterministic) failure; 2 only flaky failures
(gate); 3 could not run (the impl cannot be imported, a missing file, an infrastructure
error).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from diagfuzz import corpus
from diagfuzz.impl import DEFAULT_IMPL, ImplError

EXIT_ERROR = 3


def _gate(args: argparse.Namespace) -> int:
    from diagfuzz import gate, gate_report

    opts = gate.Options(
        impl=args.impl, budget=args.budget, workers=args.workers, junit=args.junit,
        report=args.report, timeout=args.timeout, device=args.device,
        corpus_dir=args.corpus, out_dir=args.out, repeats=args.repeats,
        save_corpus=not args.no_save, suite=not args.no_suite,
        compile_sample=not args.no_compile, max_classify=args.max_classify)
    result = gate.run_gate(opts)
    gate_report.write_outputs(result, opts.report, opts.junit)
    text = gate_report.markdown(result)
    print(text)
    if args.summary is not None:
        args.summary.write_text(text + "\n", encoding="utf-8")
    return result.code


def _repro(args: argparse.Namespace) -> int:
    from diagfuzz.repro import run_reproducer

    forwarded = [f"--repeat={args.repeat}"]
    for flag in ("device", "impl", "timeout"):
        value = getattr(args, flag)
        if value is not None:
            forwarded.append(f"--{flag}={value}")
    if args.in_process:
        forwarded.append("--in-process")
    try:
        return run_reproducer(args.path, forwarded).returncode
    except (FileNotFoundError, ValueError) as exc:
        print(f"diagfuzz repro: {exc}", file=sys.stderr)
        return EXIT_ERROR


def _replay(args: argparse.Namespace) -> int:
    from diagfuzz.executor import ExecutorError, ProcessRunner

    sys.path.insert(0, str(Path.cwd()))
    try:
        found = corpus.entries(args.dir)
    except ValueError as exc:
        print(f"diagfuzz replay: {exc}", file=sys.stderr)
        return EXIT_ERROR
    if not found:
        print(f"diagfuzz replay: no corpus files in {args.dir}", file=sys.stderr)
        return EXIT_ERROR
    failed = 0
    try:
        with ProcessRunner(args.impl, args.device, timeout=args.timeout) as runner:
            for entry in found:
                verdict = runner.run(entry.case)
                failed += not verdict.ok
                where = f" [{verdict.check}]" if verdict.check else ""
                print(f"{verdict.kind:>12}{where} {entry.path.name}: {entry.case.describe()}"
                      + (f"\n{'':>13}{verdict.message}" if verdict.message else ""))
    except (ImplError, ExecutorError) as exc:
        print(f"diagfuzz replay: {exc}", file=sys.stderr)
        return EXIT_ERROR
    print(f"{len(found) - failed}/{len(found)} corpus Cases pass with {args.impl}")
    return 1 if failed else 0


def parser() -> argparse.ArgumentParser:
    """The argument parser (also documents every option)."""
    from diagfuzz.gate import DEFAULT_BUDGET, DEFAULT_TIMEOUT, Options

    defaults = Options()

    top = argparse.ArgumentParser(prog="diagfuzz", description=__doc__.splitlines()[0])
    sub = top.add_subparsers(dest="command", required=True)

    g = sub.add_parser("gate", help="the pre-merge gate: corpus, fuzz suite, error parity, "
                                    "torch.compile sample")
    g.add_argument("--impl", default=DEFAULT_IMPL, help="MODULE:ATTR under test")
    g.add_argument("--budget", type=int, default=DEFAULT_BUDGET,
                   help="fuzz-suite examples, all shards together (default: the gate "
                        "profile's)")
    g.add_argument("-n", dest="workers", default="auto", help="pytest-xdist workers (auto)")
    g.add_argument("--junit", type=Path, help="write JUnit XML here")
    g.add_argument("--report", type=Path, help="write the JSON report here")
    g.add_argument("--summary", type=Path, help="also write the markdown summary here")
    g.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                   help=f"seconds per Case before it is a hang (default {DEFAULT_TIMEOUT:g})")
    g.add_argument("--device", help="cpu or cuda (default: cuda if there is a GPU)")
    g.add_argument("--corpus", type=Path, default=Path(corpus.DEFAULT_DIR),
                   help="regression corpus to replay and to save failures to (corpus/)")
    g.add_argument("--out", type=Path, default=defaults.out_dir,
                   help=f"where reproducers and the suite's raw output go ({defaults.out_dir})")
    g.add_argument("--repeats", type=int, default=defaults.repeats,
                   help=f"re-runs per failure ({defaults.repeats})")
    g.add_argument("--max-classify", type=int, default=defaults.max_classify,
                   help=f"classify at most this many distinct failures ({defaults.max_classify})")
    g.add_argument("--no-save", action="store_true", help="do not add failures to the corpus")
    g.add_argument("--no-suite", action="store_true", help="skip the fuzz-suite stage")
    g.add_argument("--no-compile", action="store_true", help="skip the torch.compile sample")
    g.set_defaults(func=_gate)

    r = sub.add_parser("repro", help="run a reproducer script or a corpus .json file")
    r.add_argument("path", type=Path)
    r.add_argument("--repeat", type=int, default=1)
    r.add_argument("--device")
    r.add_argument("--impl")
    r.add_argument("--timeout", type=float)
    r.add_argument("--in-process", action="store_true")
    r.set_defaults(func=_repro)

    p = sub.add_parser("replay", help="replay every Case of a corpus directory")
    p.add_argument("dir", type=Path, nargs="?", default=Path(corpus.DEFAULT_DIR))
    p.add_argument("--impl", default=DEFAULT_IMPL)
    p.add_argument("--device")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT)
    p.set_defaults(func=_replay)
    return top


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``diagfuzz`` console script; returns the exit code."""
    args = parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
