"""The ``diagfuzz`` command line: replay a corpus, run a reproducer, usage errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from diagfuzz.core import corpus
from diagfuzz.gate.cli import main, parser
from tests.faulty.cases import square


def test_replay_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for offset in (0, 1, -1):
        corpus.save(square(offset), tmp_path)
    assert main(["replay", str(tmp_path), "--impl", "tests.faulty.wrong:impl",
                 "--timeout", "30"]) == 1
    out = capsys.readouterr().out
    assert "mismatch" in out and "2/3 corpus Cases pass" in out
    assert main(["replay", str(tmp_path), "--impl", "diagfuzz.impl:aten"]) == 0
    assert main(["replay", str(tmp_path / "empty")]) == 4  # usage error
    assert main(["replay", str(tmp_path), "--impl", "tests.faulty.nope:impl"]) == 4
    assert "nope" in capsys.readouterr().err


def test_replay_runs_each_case_against_the_impl_it_records(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]
                                                           ) -> None:
    corpus.save(square(1), tmp_path, impl="tests.faulty.wrong:impl")  # a library's finding
    assert main(["replay", str(tmp_path), "--timeout", "30"]) == 1
    assert "0/1 corpus Cases pass with tests.faulty.wrong:impl" in capsys.readouterr().out
    assert main(["replay", str(tmp_path), "--impl", "diagfuzz.impl:aten"]) == 0


def test_repro_runs_corpus_files_and_scripts(tmp_path: Path) -> None:
    saved = corpus.save(square(1), tmp_path, impl="tests.faulty.wrong:impl")
    assert main(["repro", str(saved), "--in-process"]) == 1
    assert main(["repro", str(saved), "--in-process", "--impl", "diagfuzz.impl:aten"]) == 0
    assert main(["repro", str(tmp_path / "missing.py")]) == 4  # usage error


def test_repro_keeps_a_flaky_scripts_own_repeat_unless_given(tmp_path: Path, capfd) -> None:
    """``diagfuzz repro SCRIPT`` runs the script as printed: a flaky finding's R repetitions
    by default, ``--repeat N`` where the user asks for N."""
    from diagfuzz.harness.reproducers import write_reproducer

    script = write_reproducer(square(0), tmp_path, impl="diagfuzz.impl:aten", repeat=3)
    assert main(["repro", str(script), "--in-process"]) == 0
    assert "0/3 repetitions failed" in capfd.readouterr().out
    assert main(["repro", str(script), "--in-process", "--repeat", "2"]) == 0
    assert "0/2 repetitions failed" in capfd.readouterr().out


def test_corpus_files_are_stable_and_reviewable(tmp_path: Path) -> None:
    first = corpus.save(square(1), tmp_path, impl="a:b", reproducibility="5/5")
    again = corpus.save(square(1), tmp_path, impl="c:d")  # kept: same Case, same file
    assert first == again and '"impl": "a:b"' in first.read_text()
    assert first.name == f"diagonal-{corpus.case_id(square(1))}.json"
    assert len(first.read_text().splitlines()) < 25  # one field per line
    (tmp_path / "bare.json").write_text(square(2).to_json())
    assert corpus.load(tmp_path) == [square(2), square(1)]  # file-name order
    (tmp_path / "bad.json").write_text('{"op": "diagonal"}')
    with pytest.raises(ValueError, match=r"bad\.json"):
        corpus.load(tmp_path)


def test_repo_corpus_loads() -> None:
    entries = corpus.entries(Path(__file__).parents[1] / "corpus")
    # Each file still bears its Case's name: a Case whose JSON changed would be saved anew.
    assert entries and all(e.path.name == corpus.file_name(e.case) for e in entries)


def test_gate_options_parse() -> None:
    args = parser().parse_args(["gate", "--impl", "m:a", "--budget", "10", "-n", "2",
                                "--junit", "j.xml", "--report", "r.json", "--timeout", "5"])
    assert (args.impl, args.budget, args.workers, args.timeout) == ("m:a", 10, "2", 5.0)
    assert args.junit == Path("j.xml") and args.report == Path("r.json")


def test_plan_imports_an_impl_of_the_current_directory(tmp_path: Path) -> None:
    import shutil
    import subprocess
    import sys

    script = shutil.which("diagfuzz", path=str(Path(sys.executable).parent))
    if script is None:
        pytest.skip("no diagfuzz console script beside this interpreter")
    (tmp_path / "local_impl.py").write_text(
        "import torch\n\n\ndef diagonal(x, offset=0, dim1=0, dim2=1):\n"
        "    return torch.diagonal(x, offset, dim1, dim2).clone()\n")
    # The suite's line is what this reads: the OpInfo and covering lines, which load
    # PyTorch's samples and build the covering arrays, are left out.
    proc = subprocess.run([script, "gate", "--impl=local_impl", "--plan", "--no-opinfo",
                           "--no-covering"], cwd=tmp_path,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "over the streams diagonal, invalid" in proc.stdout
    # The suite splits the profile's budget over the two streams that run (what its
    # planning does: examples_per_shard), as the run then reports it.
    from diagfuzz.harness.profiles import BUDGETS
    from diagfuzz.harness.sharding import examples_per_shard

    gate = BUDGETS["gate"]
    per_shard = examples_per_shard(gate.total, gate.shards, 2)
    assert per_shard > gate.examples  # more per stream than in a full library's run
    assert (f"~{per_shard * gate.shards * 2:,} Cases (the gate profile: {per_shard} "
            f"Cases x {gate.shards} shards x 2 streams)") in proc.stdout, proc.stdout
    missing = subprocess.run([script, "gate", "--impl=no_such_impl", "--plan"], cwd=tmp_path,
                             capture_output=True, text=True, check=False)
    assert missing.returncode == 4 and "no_such_impl" in missing.stderr


def test_version_is_the_projects(capsys) -> None:
    import tomllib

    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    with pytest.raises(SystemExit) as done:
        parser().parse_args(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"diagfuzz {project['project']['version']}"


def test_gate_refuses_an_impl_module_that_is_not_there_before_starting_anything(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["gate", "--impl", "no_such_module_here:impl", "--out", str(tmp_path / "g"),
                 "--no-save"])
    err = capsys.readouterr().err
    assert code == 4
    assert "cannot import 'no_such_module_here': no such module" in err
    assert "started" not in err  # no stage began, the suite's pytest least of all


def test_an_unknown_option_shows_the_subcommands_usage(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["gate", "--bogus"])
    err = capsys.readouterr().err
    assert exited.value.code == 4
    assert err.startswith("usage: diagfuzz gate") and "unrecognized arguments: --bogus" in err


def test_budget_help_and_plan_state_one_split(capsys) -> None:
    """--budget's help and --plan word the suite's split the same way, from one function
    (sharding.suite_split): Cases a shard x shards x streams, and the total."""
    import re

    from diagfuzz.harness.profiles import BUDGETS
    from diagfuzz.harness.sharding import STREAMS, suite_split

    gate = BUDGETS["gate"]
    total, split = suite_split(gate.total, gate.shards, len(STREAMS))
    sub = next(a for a in parser()._actions if hasattr(a, "choices") and a.choices)
    helptext = " ".join(sub.choices["gate"].format_help().split())
    assert f"the gate profile's {total:,}, {split} with every op" in helptext
    assert main(["gate", "--impl", "examples.plain_torch:impl", "--plan",
                 "--budget", "60000", "--no-opinfo", "--no-covering"]) == 0  # the suite's line
    planned = capsys.readouterr().out
    shown = re.search(r"~([\d,]+) Cases \(--budget: ([\d,]+) Cases x (\d+) shards x (\d+) "
                      r"streams\)", planned)
    assert shown, planned
    per_shard, shards, streams = (int(g.replace(",", "")) for g in shown.groups()[1:])
    assert int(shown.group(1).replace(",", "")) == per_shard * shards * streams
    assert suite_split(60000, shards, streams)[1] == (
        f"{per_shard:,} Cases x {shards} shards x {streams} streams")


def test_a_budget_that_is_not_a_number_is_named_as_such(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["gate", "--budget", "abc"])
    err = capsys.readouterr().err
    assert exited.value.code == 4
    assert "--budget: must be a whole number, got 'abc'" in err, err
    assert "_positive_int" not in err

