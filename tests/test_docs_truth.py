"""What the docs and ``--help`` say is what the code does.

One exit-code table (``diagfuzz.core.exits``) behind every ``--help``, the README and
docs/options.md; choice lists in ``--help`` from the registries; every option documented
and every documented option real; the numbers a command prints quoted from that command;
every command in a code block parses. Each check is a function that returns the problems it
finds, so a test can show it catching a planted stale option or number.
"""

from __future__ import annotations

import argparse
import functools
import re
import shlex
import warnings
from pathlib import Path

import pytest

from diagfuzz.core.exits import MEANING, ExitCode, markdown_table, table
from diagfuzz.gate.cli import parser as gate_cli_parser
from diagfuzz.gate.options import Options
from diagfuzz.gate.plan import plan_lines

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
OPTIONS = REPO / "docs" / "options.md"
CODE_DOCS = [README, REPO / "docs" / "campaigns.md", REPO / "docs" / "findings.md"]
OPTION = re.compile(r"`(--[a-z][a-z0-9-]*)")


def block(text: str, name: str) -> str:
    """What stands between ``<!-- name -->`` and ``<!-- /name -->``, code fences dropped."""
    match = re.search(rf"<!-- {name} -->\n(.*?)<!-- /{name} -->", text, re.S)
    assert match, f"no <!-- {name} --> block"
    return "\n".join(line for line in match.group(1).strip().splitlines()
                     if not line.startswith("```"))


def section(text: str, heading: str) -> str:
    """The markdown section under ``heading`` (to the next heading of its level or above)."""
    level = heading.split(" ", 1)[0]
    start = text.index(heading + "\n")
    rest = text[start + len(heading):]
    end = re.search(rf"^#{{1,{len(level)}}} ", rest, re.M)
    return rest[:end.start()] if end else rest


def _gate_parser() -> argparse.ArgumentParser:
    top = gate_cli_parser()
    sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["gate"]


def _plugin_options() -> set[str]:
    from diagfuzz.harness import plugin

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from _pytest.config.argparsing import Parser

        parser = Parser()
    plugin.pytest_addoption(parser)
    return {name for o in parser.getgroup("diagfuzz").options for name in o.names()}


# --- the checks -------------------------------------------------------------------------

def exit_code_problems(readme: str, options: str) -> list[str]:
    """The README's exit-status line and docs/options.md's table against ``ExitCode``."""
    problems = []
    if markdown_table() not in options:
        problems.append("docs/options.md does not quote diagfuzz.core.exits.markdown_table()")
    match = re.search(r"^Exit status \(every command\):(.*?)(?:\n\n|\Z)", readme, re.S | re.M)
    line = " ".join(match.group(1).split()) if match else ""
    said = {int(n) for n in re.findall(r"\b(\d) [a-z`]", line)}
    if said != {int(c) for c in ExitCode}:
        problems.append(f"README's exit-status line names {sorted(said)}, the table "
                        f"{[int(c) for c in ExitCode]}")
    if "`--impl` that does not import" not in line or "4 a usage error" not in line:
        problems.append("README's exit-status line does not say an --impl that does not "
                        "import is 4, a usage error")
    return problems


def option_problems(documented_text: str, real: set[str]) -> list[str]:
    """Options the docs name that the parser lacks, and parser options the docs lack."""
    documented = set(OPTION.findall(documented_text))
    return ([f"documented but not an option: {o}" for o in sorted(documented - real)]
            + [f"an option the docs do not name: {o}" for o in sorted(real - documented)])


@functools.cache
def default_plan() -> str:
    """``diagfuzz gate --plan``'s output for a project without a corpus (what
    ``plan_lines`` prints there), its corpus path as the docs write it. Computed once: it
    loads PyTorch's OpInfo samples and builds every op's covering array."""
    actual = "\n".join(plan_lines(Options(corpus_dir=REPO / "no-corpus-here")))
    return actual.replace(str(REPO / "no-corpus-here"), "corpus")


def plan_problems(options: str, quoted_plan: str | None = None) -> list[str]:
    """The plan quoted in docs/options.md against ``default_plan()``."""
    quoted = quoted_plan if quoted_plan is not None else block(options, "gate-plan")
    actual = default_plan()
    quoted = "\n".join(line for line in quoted.splitlines() if not line.startswith("$ "))
    return [] if quoted == actual else [f"the quoted plan is stale; the command prints:\n"
                                        f"{actual}"]


def profile_problems(options: str) -> list[str]:
    """The profiles table's budgets and tensor caps against ``harness.profiles.BUDGETS``."""
    from diagfuzz.harness.profiles import BUDGETS
    from diagfuzz.harness.sharding import STREAMS

    problems = []
    for name, budget in BUDGETS.items():
        row = next((ln for ln in options.splitlines() if ln.startswith(f"| `{name}`")), "")
        total = budget.examples * budget.shards * len(STREAMS)
        want = f"{budget.examples:,} × {budget.shards} × {len(STREAMS)} = {total:,}"
        if want not in row:
            problems.append(f"profile {name}: the table says {row!r}, the code {want}")
        cap = "2**20" if budget.max_elements == 1 << 20 else f"{budget.max_elements:,}"
        if f"| {cap} |" not in row:
            problems.append(f"profile {name}: max elements should read {cap}")
    return problems


def readme_budget_problems(readme: str) -> list[str]:
    """The README's Cases a stream per profile against ``BUDGETS``."""
    from diagfuzz.harness.profiles import BUDGETS

    problems = []
    for name in ("dev", "ci", "nightly"):
        budget = BUDGETS[name]
        per_stream = budget.examples * budget.shards
        pattern = rf"`{name}`\s*\(([\d,]+)[ )]"
        if name == "dev":
            pattern = r"profile=dev`\s*\(([\d,]+) Cases a stream"
        match = re.search(pattern, readme)
        said = int(match.group(1).replace(",", "")) if match else None
        if said != per_stream:
            problems.append(f"README: {name} {said} Cases a stream, the code {per_stream}")
    return problems


# --- the tests --------------------------------------------------------------------------

def test_exit_codes_are_one_table_in_help_readme_and_docs() -> None:
    assert exit_code_problems(README.read_text(), OPTIONS.read_text()) == []
    top = gate_cli_parser()
    sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    assert top.epilog == table()
    for name, command in sub.choices.items():
        assert command.epilog == table(), name
    assert "--impl that does not import" in MEANING[ExitCode.USAGE]


def test_the_choice_lists_in_help_come_from_the_registries() -> None:
    from diagfuzz.core.case import available_dtypes
    from diagfuzz.specs import SPECS
    from diagfuzz.strategies import LAYOUT_KINDS

    helps = {a.dest: a.help or "" for a in _gate_parser()._actions}
    assert all(op in helps["ops"] for op in SPECS)
    assert all(kind in helps["layouts"] for kind in LAYOUT_KINDS)
    assert all(dtype in helps["dtypes"] for dtype in available_dtypes())
    from diagfuzz.harness import plugin

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from _pytest.config.argparsing import Parser

        parser = Parser()
    plugin.pytest_addoption(parser)
    by_name = {o.names()[0]: o.attrs().get("help", "") for o in
               parser.getgroup("diagfuzz").options}
    assert all(op in by_name["--diagfuzz-ops"] for op in SPECS)
    assert all(kind in by_name["--diagfuzz-layouts"] for kind in LAYOUT_KINDS)


def test_every_option_is_documented_and_every_documented_option_exists() -> None:
    text = OPTIONS.read_text()
    gate_real = {s for a in _gate_parser()._actions for s in a.option_strings
                 if s.startswith("--") and s != "--help"}
    assert option_problems(section(text, "## The gate (`diagfuzz gate`)"), gate_real) == []
    suite = section(text, "## The fuzz suite (`pytest -p diagfuzz --pyargs diagfuzz.suite`)")
    suite_real = _plugin_options() | {"--hypothesis-profile"}
    assert option_problems(suite, suite_real) == []


def test_the_numbers_the_docs_quote_are_the_codes() -> None:
    text = OPTIONS.read_text()
    assert plan_problems(text) == []
    assert profile_problems(text) == []
    assert readme_budget_problems(README.read_text()) == []


def _commands(path: Path) -> list[list[str]]:
    """Every ``diagfuzz ...``, ``pytest ...`` and ``tools/dev gate|fuzz ...`` line of a sh
    code block, as argv (``tools/dev gate`` is ``diagfuzz gate``, ``tools/dev fuzz`` a
    pytest run; a synopsis's brackets dropped)."""
    found = []
    for code in re.findall(r"```(?:sh|yaml)\n(.*?)```", path.read_text(), re.S):
        joined = re.sub(r"\\\n\s*", " ", code)
        for line in joined.splitlines():
            line = line.split(" #", 1)[0].strip()
            line = re.sub(r"^run:\s*", "", line)
            line = re.sub(r"^tools/dev gate\b", "diagfuzz gate", line)
            line = re.sub(r"^tools/dev fuzz\b", "pytest", line)
            if line.startswith(("diagfuzz ", "pytest ")):
                line = line.replace("${{ ", "X").replace(" }}", "")
                found.append(shlex.split(line.replace("[", "").replace("]", "")))
    return found


@pytest.mark.parametrize("path", CODE_DOCS, ids=lambda p: p.name)
def test_every_command_in_the_docs_parses(path: Path) -> None:
    plugin = _plugin_options() | {"--hypothesis-profile", "-n", "-p", "--pyargs", "-q",
                                  "--junitxml", "--rootdir"}
    commands = _commands(path)
    assert commands, f"{path.name}: no command found to check"
    for argv in commands:
        if argv[0] == "diagfuzz":
            try:
                gate_cli_parser().parse_args(argv[1:])
            except SystemExit as exc:
                pytest.fail(f"{path.name}: `{' '.join(argv)}` does not parse (exit {exc.code})")
        else:
            unknown = [a.split("=")[0] for a in argv[1:]
                       if a.startswith("-") and a.split("=")[0] not in plugin]
            assert not unknown, f"{path.name}: `{' '.join(argv)}` names unknown {unknown}"


def test_the_docs_checks_catch_a_planted_stale_option_and_number() -> None:
    text = OPTIONS.read_text()
    gate = section(text, "## The gate (`diagfuzz gate`)")
    real = {s for a in _gate_parser()._actions for s in a.option_strings
            if s.startswith("--") and s != "--help"}
    assert option_problems(gate + "\n| `--no-such-option` | x |", real) == [
        "documented but not an option: --no-such-option"]
    assert option_problems(gate.replace("`--quiet`", "`quiet`"), real) == [
        "an option the docs do not name: --quiet"]
    from diagfuzz.harness.profiles import BUDGETS
    from diagfuzz.harness.sharding import STREAMS

    gate_budget = BUDGETS["gate"]  # the numbers as they read for this many streams (ops)
    cases = gate_budget.examples * gate_budget.shards * len(STREAMS)
    said = f"{gate_budget.examples} × {gate_budget.shards} × {len(STREAMS)} = {cases:,}"
    stale = text.replace(said, "100 × 4 × 3 = 1,200")
    assert stale != text and any("profile gate" in p for p in profile_problems(stale))
    plan = block(text, "gate-plan")
    planted = plan.replace(f"~{cases:,} Cases", "~1,200 Cases")
    assert planted != plan and plan_problems(text, planted)
    assert readme_budget_problems(README.read_text().replace("`ci` (200)", "`ci` (300)"))
    assert exit_code_problems(README.read_text(), text.replace("| 7 |", "| 5 |"))
    assert exit_code_problems(README.read_text().replace(" 7 stopped", " 5 stopped"), text)
