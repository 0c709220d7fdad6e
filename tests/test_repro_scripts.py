"""Reproducers: standalone scripts that exit 1 while the bug is there and 0 once it is fixed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from diagfuzz.core import corpus
from diagfuzz.core.verdict import Verdict
from diagfuzz.harness.reproducers import (
    reproducer_source,
    run_reproducer,
    script_name,
    write_reproducer,
)
from tests.faulty.cases import square

# Runs a script with Hypothesis made unimportable: a reproducer must not need it.
NO_HYPOTHESIS = """
import runpy, sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "hypothesis" or name.startswith("hypothesis."):
            raise ImportError("hypothesis is blocked in this test")
sys.meta_path.insert(0, Block())
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def _run(script: Path, *args: str, env: dict[str, str] | None = None,
         block_hypothesis: bool = False) -> subprocess.CompletedProcess[str]:
    prefix = ["-c", NO_HYPOTHESIS] if block_hypothesis else []
    return subprocess.run([sys.executable, *prefix, str(script), *args], capture_output=True,
                          text=True, check=False, env=env)


def test_crash_reproducer_fails_then_passes_with_a_fixed_impl(tmp_path: Path) -> None:
    script = write_reproducer(square(1), tmp_path, impl="tests.faulty.abort:impl",
                              timeout=30, verdict=Verdict("crash", "executor:died", "", square(1)),
                              reproducibility="5/5")
    assert script.name == script_name(square(1))
    broken = _run(script, block_hypothesis=True)
    assert broken.returncode == 1, broken.stdout + broken.stderr
    assert "[1/1] crash [executor:died]" in broken.stdout and "SIGABRT" in broken.stdout
    fixed = _run(script, "--impl", "diagfuzz.impl:aten", "--in-process")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "0/1 repetitions failed" in fixed.stdout
    assert "[1/1] pass" in fixed.stdout and "pass [all]: " not in fixed.stdout


# The same for diagfuzz: a Python without it (the system's, not the venv's).
NO_DIAGFUZZ = NO_HYPOTHESIS.replace('"hypothesis"', '"diagfuzz"').replace(
    '"hypothesis."', '"diagfuzz."')


def test_reproducer_without_diagfuzz_exits_3_not_1(tmp_path: Path) -> None:
    """Exit 1 says the bug is there; a Python that cannot import diagfuzz must not say so."""
    script = write_reproducer(square(1), tmp_path, impl="diagfuzz.impl:aten")
    result = subprocess.run([sys.executable, "-c", NO_DIAGFUZZ, str(script)],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 3, result.stdout + result.stderr
    assert "cannot import diagfuzz" in result.stderr


def test_hang_reproducer_reports_a_hang(tmp_path: Path) -> None:
    script = write_reproducer(square(-1), tmp_path / "hang.py", impl="tests.faulty.hang:impl")
    result = _run(script, "--timeout", "3")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "hang [executor:timeout]" in result.stdout


def test_mismatch_reproducer_in_process_prints_the_bit_diff(tmp_path: Path) -> None:
    script = write_reproducer(square(1, n=4), tmp_path, impl="tests.faulty.wrong:impl")
    result = _run(script, "--in-process", "--device", "cpu", block_hypothesis=True)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "mismatch" in result.stdout
    assert "input: float32, shape [4, 4], strides [4, 1], storage offset 0" in result.stdout
    assert "0x" in result.stdout  # the verdict's details carry hex bit patterns


def test_flaky_reproducer_with_repeat(tmp_path: Path) -> None:
    import os

    env = dict(os.environ, DIAGFUZZ_FAULTY_COUNTER=str(tmp_path / "calls"))
    script = write_reproducer(square(0), tmp_path, impl="tests.faulty.flaky:impl")
    result = _run(script, "--repeat", "3", "--in-process", env=env)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "1/3 repetitions failed" in result.stdout  # calls 1, 2 pass; 3 is wrong


def test_a_flaky_reproducer_repeats_its_ratios_r_by_default(tmp_path: Path) -> None:
    """Run as printed, a flaky finding's script meets the bug as its label says it does
    (k of R), not on one repetition that passes two times in three."""
    import os

    env = dict(os.environ, DIAGFUZZ_FAULTY_COUNTER=str(tmp_path / "calls"))
    script = write_reproducer(square(0), tmp_path, impl="tests.faulty.flaky:impl",
                              reproducibility="1/3", repeat=3)
    assert "flaky: each run makes 3 repetitions" in script.read_text()
    result = _run(script, "--in-process", env=env)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "1/3 repetitions failed" in result.stdout


def test_a_cold_first_calls_reproducer_says_it_needs_a_fresh_process() -> None:
    story = "fails on its first call in a fresh process, passes when called again"
    text = reproducer_source(square(0), story=story)
    assert f"When:    {story}" in text and "--in-process runs it in this script" in text
    assert "When:" not in reproducer_source(square(0))


def test_an_impl_that_does_not_import_exits_4(tmp_path: Path) -> None:
    script = write_reproducer(square(0), tmp_path, impl="tests.faulty.no_such:impl")
    result = _run(script, "--in-process")
    assert result.returncode == 4 and "no_such" in result.stderr


def test_repeat_must_be_positive(tmp_path: Path) -> None:
    result = _run(write_reproducer(square(0), tmp_path), "--repeat", "0")
    assert result.returncode == 4 and "--repeat" in result.stderr  # a usage error


def test_source_is_stable_and_embeds_the_case() -> None:
    text = reproducer_source(square(2), impl="m:a", device="cuda")
    assert text == reproducer_source(square(2), impl="m:a", device="cuda")
    assert "import hypothesis" not in text and "from hypothesis" not in text
    assert "IMPL = 'm:a'" in text and "DEVICE = 'cuda'" in text
    namespace: dict[str, object] = {}
    exec(compile(text, "repro", "exec"), namespace)  # defines, does not run (no __main__)
    from diagfuzz.core.case import Case

    assert Case.from_json(namespace["CASE_JSON"]) == square(2)


def test_run_reproducer_accepts_a_corpus_file(tmp_path: Path) -> None:
    saved = corpus.save(square(1), tmp_path, impl="tests.faulty.wrong:impl")
    result = run_reproducer(saved, ["--in-process"], capture=True)
    assert result.returncode == 1 and "mismatch" in result.stdout
    with pytest.raises(FileNotFoundError):
        run_reproducer(tmp_path / "missing.py")


# Reproducer scripts as earlier diagfuzz commits wrote them (the text as written, each file
# named by its commit), for a wrong impl: the names they import (diagfuzz.case,
# diagfuzz.executor, diagfuzz.impl, diagfuzz.oracles, diagfuzz.harness.findings) and what
# they call on them are a contract, so each must still run against this package.
WRITTEN = sorted((Path(__file__).parent / "reproducers").glob("written_by_*.py"))


@pytest.mark.parametrize("script", WRITTEN, ids=[p.stem for p in WRITTEN])
def test_reproducers_written_by_earlier_versions_still_run(script: Path) -> None:
    repo = Path(__file__).resolve().parents[1]  # the scripts import IMPL from their cwd
    isolated = subprocess.run([sys.executable, str(script), "--timeout", "60"], cwd=repo,
                              capture_output=True, text=True, check=False)
    assert isolated.returncode == 1, isolated.stdout + isolated.stderr
    assert "[1/1] mismatch [bitwise:aten]" in isolated.stdout
    assert "1/1 repetitions failed: the bug is there" in isolated.stdout
    fixed = subprocess.run([sys.executable, str(script), "--in-process", "--impl",
                            "diagfuzz.impl:aten"], cwd=repo, capture_output=True, text=True,
                           check=False)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "[1/1] pass [all]" in fixed.stdout and "0/1 repetitions failed" in fixed.stdout


def test_there_are_reproducers_of_earlier_versions() -> None:
    assert len(WRITTEN) >= 2, WRITTEN  # one per reproducer format
