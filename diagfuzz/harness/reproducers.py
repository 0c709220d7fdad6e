'''Standalone reproducers: one Python script per distinct failure, and the code that runs them.

A reproducer embeds the Case's JSON and needs only torch, triton and diagfuzz (not
Hypothesis). It rebuilds the exact tensors (``diagfuzz.core.case.materialise``), runs the impl
and ``diagfuzz.oracles.check``, prints each verdict with its bit-level details, and exits 1
while the bug is there, 0 once it is fixed (3 if diagfuzz cannot be loaded, 4 if the impl
cannot: ``diagfuzz.core.exits``). A failure that depends on what ran before (its
classification found the calls it needs: ``diagfuzz.execution.classification``) embeds that
sequence too, and every repetition replays it before the Case. By default each repetition
runs in a fresh executor process (``diagfuzz.execution.parent.ProcessRunner``), so a crash
or a hang is reported as a verdict instead of killing or stalling the script, and
``--repeat N`` means what the classification's ratio means: N fresh replays of the
sequence. ``--in-process`` runs the oracle in the script itself, for a debugger.
'''

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from diagfuzz.core import corpus
from diagfuzz.core.case import Case
from diagfuzz.core.verdict import Verdict
from diagfuzz.execution.history import Call
from diagfuzz.execution.parent import DEFAULT_TIMEOUT
from diagfuzz.impl import DEFAULT_IMPL

_TEMPLATE = '''#!/usr/bin/env python3
"""diagfuzz reproducer: @TITLE@

@FOUND@
Run it:  python @NAME@ [--repeat N] [--device cpu|cuda] [--impl MODULE:ATTR]
                      [--timeout SECONDS] [--in-process] [--alone]
@SEQUENCE_NOTE@Exit:    1 while the bug is there (any repetition fails), 0 once it is fixed,
         3 if diagfuzz cannot be loaded, 4 on a usage error (an --impl that does not
         import included).
Needs:   torch, triton and diagfuzz (not Hypothesis).
"""

import argparse
import json
import os
import sys

CASE_JSON = @CASE_JSON@
#: The calls a fresh process makes before the Case, oldest first: (oracle, Case JSON).
SEQUENCE = @SEQUENCE@
IMPL = @IMPL@
#: Where IMPL is imported from (the directories the run imported it from), after sys.path.
IMPL_PATH = @IMPL_PATH@
DEVICE = @DEVICE@
TIMEOUT = @TIMEOUT@
ORACLE = @ORACLE@
STRICT = @STRICT@
#: Repetitions by default: 1, or a flaky finding's R (it failed in k of R fresh replays).
REPEAT = @REPEAT@


def run_in_this_process(calls, case, impl_spec, device):
    """Rebuild the tensors each call reads, let the oracle run the impl on the calls before
    the Case (their verdicts aside), then on the Case, and compare bits."""
    from diagfuzz import oracles
    from diagfuzz.impl import load_impl

    impl = load_impl(impl_spec)
    for call in calls:
        getattr(oracles, call.oracle)(call.case, impl, device, strict=STRICT)
    return getattr(oracles, ORACLE)(case, impl, device, strict=STRICT)


def run_isolated(calls, case, impl_spec, device, timeout):
    """The same, in a fresh executor process: a crash or hang becomes a verdict."""
    from diagfuzz.execution.history import Call, replay
    from diagfuzz.executor import ProcessRunner

    with ProcessRunner(impl_spec, device, timeout=timeout, oracle=ORACLE,
                       strict=STRICT) as runner:
        return replay(runner, calls, Call(ORACLE, case))[0]


class Parser(argparse.ArgumentParser):
    def error(self, message):
        self.print_usage(sys.stderr)
        self.exit(4, f"{self.prog}: error: {message}\\n")  # a usage error: exit 4


def main(argv=None):
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=REPEAT,
                        help="repetitions, each in a fresh executor that replays SEQUENCE "
                             f"then the Case (default {REPEAT})")
    parser.add_argument("--device", default=DEVICE, help=f"cpu or cuda (default {DEVICE})")
    parser.add_argument("--impl", default=IMPL, help=f"MODULE:ATTR (default {IMPL})")
    parser.add_argument("--timeout", type=float, default=TIMEOUT,
                        help=f"seconds per repetition before it is a hang (default {TIMEOUT})")
    parser.add_argument("--in-process", action="store_true",
                        help="run in this process (for a debugger; a crash kills the script)")
    parser.add_argument("--details", action="store_true",
                        help="also print the verdict's whole evidence as JSON")
    parser.add_argument("--alone", action="store_true",
                        help="the Case alone, without the calls of SEQUENCE before it")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error(f"--repeat must be >= 1, got {args.repeat}")
    for root in (os.getcwd(), *IMPL_PATH):  # where --impl and IMPL are imported from
        if root not in sys.path:
            sys.path.append(root)
    try:
        from diagfuzz.case import Case
        from diagfuzz.harness.findings import evidence_lines
        from diagfuzz.impl import ImplError
    except ImportError as exc:  # not exit 1, which says the bug is there
        print(f"cannot import diagfuzz ({exc}): run this script with the Python that has "
              "diagfuzz installed (e.g. its .venv/bin/python)", file=sys.stderr)
        return 3

    from diagfuzz.execution.history import Call

    case = Case.from_json(CASE_JSON)
    calls = [] if args.alone else [Call(oracle, Case.from_json(text))
                                   for oracle, text in SEQUENCE]
    print("case:  " + "\\n       ".join(case.describe_full()))
    print(f"impl:  {args.impl} on {args.device}")
    if calls:
        print(f"after: {len(calls)} earlier call(s), replayed in the same fresh process in "
              "every repetition (--alone: the Case alone)")
        for i, call in enumerate(calls[:5]):
            print(f"       {i + 1}. {call.describe()}")
        if len(calls) > 5:
            print(f"       ... {len(calls) - 5} more")
    failed = 0
    for i in range(args.repeat):
        try:
            if args.in_process:
                verdict = run_in_this_process(calls, case, args.impl, args.device)
            else:
                verdict = run_isolated(calls, case, args.impl, args.device, args.timeout)
        except ImplError as exc:
            print(f"cannot load the implementation: {exc}", file=sys.stderr)
            return 4
        failed += not verdict.ok
        where = f" [{verdict.check}]" if verdict.check else ""
        said = f": {verdict.message}" if verdict.message else ""
        print(f"[{i + 1}/{args.repeat}] {verdict.kind}{where}{said}")
        for line in evidence_lines(verdict.details):
            print(line)
        if args.details and verdict.details:
            print(json.dumps(verdict.details, indent=2, sort_keys=True, default=repr))
    if failed:
        said = "the bug is there"
    elif args.alone and SEQUENCE:
        said = "no failure alone (it needs the calls of SEQUENCE before it)"
    else:
        said = "no failure (fixed?)"
    print(f"{failed}/{args.repeat} repetitions failed: {said}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
'''


def _literal(text: str) -> str:
    """A Python literal for ``text``: a readable raw triple-quoted string where possible."""
    if "\'\'\'" not in text and not text.endswith("\\"):
        return "r\'\'\'" + text + "\'\'\'"
    return repr(text)


#: The least seconds a hang's reproducer waits for its Case (``reproducer_timeout``).
HANG_REPRO_FLOOR = 10.0


def reproducer_timeout(verdict: Verdict | None, cap: float) -> float:
    """How long a reproducer waits for its Case: ``cap`` (the run's ``--timeout``), but for a
    hang three times the calibrated allowance it stalled past, at least ``HANG_REPRO_FLOOR``
    (a fresh process on this machine): the bug's script answers in seconds, not a minute."""
    if verdict is None or verdict.kind != "hang":
        return cap
    allowance = verdict.details.get("timeout")
    if not isinstance(allowance, (int, float)) or allowance <= 0:
        return cap
    return min(cap, max(HANG_REPRO_FLOOR, 3.0 * float(allowance)))


def script_name(case: Case) -> str:
    """``repro_<op>_<case_id>.py``: stable per Case, like the corpus file name."""
    return f"repro_{case.op}_{corpus.case_id(case)}.py"


def reproducer_source(case: Case, *, impl: str = DEFAULT_IMPL, device: str = "cpu",
                      timeout: float = DEFAULT_TIMEOUT, oracle: str = "check",
                      verdict: Verdict | None = None, reproducibility: str = "",
                      name: str = "", impl_path: Sequence[str] = (),
                      strict: bool = False, sequence: Sequence[Call] = (),
                      story: str = "", repeat: int = 1) -> str:
    """The text of a reproducer script for ``case``; with ``sequence``, the calls a fresh
    process makes before it (a failure that depends on what ran before; ``story`` says
    how, in words), replayed before it in every repetition. ``repeat`` is the script's
    default ``--repeat``: a flaky finding's R, so that the script run as printed meets the
    bug as often as its label says (k of R), not once in a while."""
    pretty = corpus.pretty_case(case)
    if verdict is not None:
        title = f"{verdict.kind} in {case.describe()}"
        found = f"Found:   {verdict.kind}"
        found += f" [{verdict.check}]" if verdict.check else ""
        found += f": {verdict.message}" if verdict.message else ""
    else:
        title, found = case.describe(), "Found:   (no verdict recorded)"
    found += f"\n         impl {impl} on {device}"
    if reproducibility:
        found += f"; reproduced {reproducibility} in fresh processes"
    if repeat > 1:
        found += (f"\n         flaky: each run makes {repeat} repetitions by default, and "
                  "exits 1 if any fails")
    note = ""
    if sequence:
        note = (f"Before:  {len(sequence)} earlier call(s) (SEQUENCE), replayed before the "
                f"Case in the same\n         fresh process: {story or 'what it needs'}.\n")
    elif story:  # a cold first call: the fresh process is the point
        note = (f"When:    {story}; --in-process runs it in this script's own process,\n"
                "         which may have warmed up already.\n")
    calls = "[]"
    if sequence:
        calls = "[\n" + "".join(
            f"    ({call.oracle!r}, {_literal(corpus.pretty_case(call.case))}),\n"
            for call in sequence) + "]"
    replacements = {
        "@SEQUENCE_NOTE@": note.replace('"' * 3, "'" * 3), "@SEQUENCE@": calls,
        "@TITLE@": title.replace('"""', "'''"), "@FOUND@": found.replace('"""', "'''"),
        "@NAME@": name or script_name(case), "@CASE_JSON@": _literal(pretty),
        "@IMPL@": repr(impl), "@DEVICE@": repr(device), "@TIMEOUT@": repr(float(timeout)),
        "@ORACLE@": repr(oracle), "@IMPL_PATH@": repr(tuple(str(p) for p in impl_path)),
        "@STRICT@": repr(bool(strict)), "@REPEAT@": repr(max(1, int(repeat))),
    }
    text = _TEMPLATE
    for key, value in replacements.items():
        text = text.replace(key, value)
    return text


def write_reproducer(case: Case, path: str | os.PathLike[str], **kwargs: object) -> Path:
    """Write the reproducer of ``case`` to ``path`` (a directory: ``script_name(case)`` in it).

    Keyword arguments are ``reproducer_source``'s (impl, device, timeout, oracle, verdict,
    reproducibility, impl_path, strict, sequence, story, repeat).
    """
    path = Path(path)
    if path.is_dir() or not path.suffix:
        path = path / script_name(case)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(reproducer_source(case, name=path.name, **kwargs),  # type: ignore[arg-type]
                    encoding="utf-8")
    path.chmod(0o755)
    return path


def run_reproducer(path: str | os.PathLike[str], args: list[str] | None = None, *,
                   capture: bool = False) -> subprocess.CompletedProcess[str]:
    """Run a reproducer script (or a corpus/Case ``.json`` file, through a temporary one)."""
    path = Path(path)
    args = list(args or [])
    if path.suffix == ".json":
        entry = corpus.read_entry(path)
        impl = entry.found.get("impl") or DEFAULT_IMPL
        with tempfile.TemporaryDirectory(prefix="diagfuzz-repro-") as tmp:
            # The impl from where the file says it was imported, then from here.
            roots = [*corpus.recorded_impl_path(entry), str(Path.cwd())]
            script = write_reproducer(entry.case, tmp, impl=impl, device=_default_device(),
                                      impl_path=list(dict.fromkeys(roots)))
            return _run(script, args, capture)
    if not path.exists():
        raise FileNotFoundError(f"reproducer {path} does not exist")
    return _run(path, args, capture)


def _run(script: Path, args: list[str], capture: bool) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(script), *args], check=False, text=True,
                          capture_output=capture)


def _default_device() -> str:
    import diagfuzz.ops as ops

    return ops.DEVICE
