"""Gate pieces without subprocesses: exit-code rule, suite report parsing, fixed Case sets."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from diagfuzz import gate
from diagfuzz.core.exits import ExitCode
from diagfuzz.core.verdict import Verdict
from diagfuzz.execution.classification import Classification
from diagfuzz.gate import Finding, Result, Stage, exit_code
from diagfuzz.gate import outputs as gate_report
from tests.faulty.cases import square


def _finding(failures: int, runs: int = 5) -> Finding:
    v = Verdict("mismatch", "bitwise:aten", "bits differ", square(1))
    return Finding("fuzz suite", v, classification=Classification(
        square(1), "mismatch", runs, failures, {"mismatch": failures, "pass": runs - failures}))


def test_exit_codes() -> None:
    clean = [Stage("a", ran=3)]
    assert exit_code(clean, []) == ExitCode.CLEAN
    assert exit_code(clean, [_finding(2)]) == ExitCode.FLAKY
    assert exit_code(clean, [_finding(2), _finding(5)]) == ExitCode.FAILURE
    unclassified = Finding("fuzz suite", Verdict("crash", case=square(0)))
    assert exit_code(clean, [unclassified]) == ExitCode.FAILURE
    assert exit_code([Stage("a", error="pytest exited 4")], [_finding(5)]) == ExitCode.ERROR
    cut = [Stage("a", ran=3, cut=True)]
    assert exit_code(cut, []) == ExitCode.CUT == 6
    assert exit_code(cut, [_finding(5)]) == ExitCode.FAILURE  # what was found still counts
    assert exit_code(cut, [_finding(2)]) == ExitCode.FLAKY
    stopped = [Stage("a", ran=3, stopped=True)]
    assert exit_code(stopped, []) == ExitCode.STOPPED == 7
    assert exit_code(stopped, [unclassified]) == ExitCode.FAILURE
    # A stage this machine cannot run fails the gate only when stages are required; one the
    # user left out (--no-...) or that had nothing to do (no ...) never does.
    unrun = [Stage("a", ran=3), Stage("huge tier", skipped="needs a CUDA GPU")]
    assert exit_code(unrun, []) == ExitCode.CLEAN
    assert exit_code(unrun, [], require_stages=True) == ExitCode.ERROR
    # A bug found in what ran still says so: 1, not 3.
    assert exit_code(unrun, [_finding(5)], require_stages=True) == ExitCode.FAILURE
    asked = [Stage("a", ran=3), Stage("b", skipped="--no-opinfo"),
             Stage("c", skipped="no corpus")]
    assert exit_code(asked, [], require_stages=True) == ExitCode.CLEAN


def test_suite_findings_reads_the_plugin_report() -> None:
    from diagfuzz.harness.findings import Finding as SuiteFinding

    found = SuiteFinding.of(Verdict("mismatch", "bitwise:aten", "m", square(1),
                                    {"symptom": "values"}),
                            "suite.py::test_diagonal[shard0]", count=4)
    found.shrunk = True
    dead = SuiteFinding.from_dict({**found.to_dict(), "kind": "harness-error",
                                   "verdict": {"kind": "harness-error", "case": None},
                                   "case": None, "test_ids": ["suite.py::test_invalid[shard1]"]})
    report = {"cases": 30, "findings": [found.to_dict(), dead.to_dict()]}
    ran, findings, unattributed = gate.suite_findings(report)
    assert ran == 30 and len(findings) == 1 and findings[0].verdict.case == square(1)
    assert findings[0].test_id.endswith("[shard0]") and findings[0].count == 4
    assert findings[0].shrunk and findings[0].key == found.signature
    assert unattributed == ["harness-error in suite.py::test_invalid[shard1]: "]


def test_distinct_findings_are_one_per_signature_over_every_stage() -> None:
    suite = Finding("fuzz suite", Verdict("mismatch", "bitwise:aten", "", square(1),
                                          {"symptom": "values"}), count=3)
    again = Finding("corpus replay", Verdict("mismatch", "bitwise:autograd", "", square(2),
                                             {"symptom": "values"}))
    other = Finding("fuzz suite", Verdict("mismatch", "bitwise:aten", "", square(1),
                                          {"symptom": "signed-zero"}))
    compiled = Finding("torch.compile parity", Verdict(
        "mismatch", "compile:grad:bitwise:eager-grad", "", square(1), {"symptom": "values"}),
        oracle="check_compile")
    found = gate.distinct([suite, again, other, compiled])
    # One fix, one finding: the signed-zero Case counts in the wrong-values finding.
    assert [f.stage for f in found] == ["fuzz suite", "torch.compile parity"]
    assert found[0].count == 5
    assert found[0].classes["symptom"] == {"values": 4, "signed-zero": 1}
    assert set(found[0].examples) == {"values", "signed-zero"}
    assert found[0].examples["signed-zero"]["case"] == other.verdict.to_dict()["case"]
    coverage = gate.report_coverage({"diagonal": {"cases": 3, "classes": {"dtype": {
        "float32": 3}}}, "invalid": {"cases": 2, "classes": {"dtype": {"float32": 1}}}})
    assert coverage["group"] == Counter(diagonal=3, invalid=2)
    assert coverage["dtype"] == Counter(float32=4)


def _assert_represents(confirmed: Finding) -> None:
    """``confirmed`` (of ``square(3)``) represents its cause beside a known hang's shrunk
    stall (of ``square(0)``), in either order."""
    from diagfuzz.execution.timeouts import KNOWN_HANG_NOTE

    stall = Finding("fuzz suite", Verdict("hang", "executor:timeout", "", square(0),
                                          {"known_hang": KNOWN_HANG_NOTE}), shrunk=True)
    for order in ([confirmed, stall], [stall, confirmed]):
        (found,) = gate.distinct(order)
        assert found.verdict.case == square(3) and found.count == 2


def test_a_confirmed_hang_represents_its_cause_not_a_known_hangs_shrunk_stall() -> None:
    """On a loaded machine a slow call of an op with a confirmed hang stalls past the short
    allowance and counts as that hang; the suite may even shrink such a stall. The cause's
    representative, which classification re-runs and the reproducer replays, is the
    confirmed hang's Case, or the gate reads the hang as flaky (exit 2)."""
    confirmed = Finding("covering array", Verdict("hang", "executor:timeout", "", square(3)))
    _assert_represents(confirmed)


def test_a_confirmation_another_runner_raced_still_represents_its_cause() -> None:
    """While one runner confirms a hang (alone, the longer allowance), another may confirm
    the op's hang first: the confirmation's verdict is still the confirmed hang
    (``first_attempt``), never a known hang's later stall."""
    from diagfuzz.execution.timeouts import KNOWN_HANG_NOTE, unconfirmed_stall

    raced = {"known_hang": KNOWN_HANG_NOTE, "first_attempt": {"kind": "hang"}}
    assert not unconfirmed_stall("hang", raced)
    confirmed = Finding("covering array", Verdict("hang", "executor:timeout", "", square(3),
                                                  raced))
    _assert_represents(confirmed)


def test_the_suites_merge_keeps_a_confirmed_hang_too() -> None:
    from diagfuzz.execution.timeouts import KNOWN_HANG_NOTE
    from diagfuzz.harness.findings import Finding as SuiteFinding

    confirmed = SuiteFinding.of(Verdict("hang", "executor:timeout", "", square(3)), "t[0]")
    stall = SuiteFinding.of(Verdict("hang", "executor:timeout", "", square(0),
                                    {"known_hang": KNOWN_HANG_NOTE}), "t[1]")
    stall.shrunk = True
    stall.merge(confirmed)
    assert stall.case == square(3)


def _case_dict() -> dict:
    import json

    return json.loads(square(1).to_json())


def test_suite_command_uses_the_plugin_options(tmp_path) -> None:
    opts = gate.Options(impl="m:a", budget=60, workers="3", timeout=9.0, out_dir=tmp_path)
    command = gate.suite_command(opts, tmp_path / "r.json")
    joined = " ".join(command)
    for part in ("-p diagfuzz", "--pyargs diagfuzz.suite", "--hypothesis-profile gate",
                 "-n 3", "--impl m:a", "--diagfuzz-budget 60", "--diagfuzz-timeout 9.0",
                 f"--diagfuzz-report={tmp_path / 'r.json'}", "--diagfuzz-isolation process"):
        assert part in joined
    assert "--diagfuzz-budget" not in gate.suite_command(
        gate.Options(budget=None, out_dir=tmp_path), tmp_path / "r.json")
    narrowed = gate.suite_command(gate.Options(out_dir=tmp_path, dtypes="float32,int8",
                                               ops="diagonal", ranks="2-3", strict=True),
                                  tmp_path / "r.json", max_seconds=12.5)
    for part in ("--diagfuzz-dtypes=float32,int8", "--diagfuzz-ops=diagonal",
                 "--diagfuzz-ranks=2-3", "--diagfuzz-strict", "--diagfuzz-max-seconds=12.5"):
        assert part in narrowed


def test_suite_environment_drops_the_xdist_worker_identity(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw5")
    monkeypatch.setenv("PYTEST_XDIST_TESTRUNUID", "abc")
    monkeypatch.setenv("DIAGFUZZ_SOMETHING", "kept")
    env = gate.suite_environment(gate.Options(out_dir=tmp_path))
    assert not [k for k in env if k.startswith("PYTEST_XDIST")]
    assert env["DIAGFUZZ_SOMETHING"] == "kept" and str(Path.cwd()) in env["PYTHONPATH"]


def test_fixed_case_sets_cover_every_invalid_class() -> None:
    from diagfuzz.strategies._invalid import INVALID_CLASSES

    cases = gate.error_parity_cases()
    assert {(c.op, c.invalid) for c in cases} == {
        (op, cls) for cls, ops in INVALID_CLASSES.items() for op in ops}
    assert all(not c.invalid for c in gate.compile_cases())


def test_markdown_lists_each_failure_with_its_command(tmp_path) -> None:
    finding = _finding(2)
    finding.reproducer = tmp_path / "repro_x.py"
    result = Result(ExitCode.FLAKY, [Stage("fuzz suite", ran=10, failures=[finding])],
                    [finding], "m:a", "cpu", 1.5)
    text = gate_report.markdown(result)
    assert "FLAKY" in text and "flaky 2/5" in text and "(re-runs: mismatch 2, pass 3)" in text
    assert f"python {tmp_path / 'repro_x.py'}" in text
    assert "diagonal · mismatch · bitwise:aten" in text or "diagonal · mismatch" in text
    assert gate_report.to_json(result)["findings"][0]["classification"]["ratio"] == "2/5"


def test_markdown_names_a_stage_the_cap_cut_before_its_first_case() -> None:
    stages = [Stage("corpus replay", ran=4), Stage("fuzz suite", cut=True),
              Stage("huge tier", skipped="needs a CUDA GPU"), Stage("b", skipped="--no-opinfo")]
    text = gate_report.markdown(Result(ExitCode.CUT, stages, [], "m:a", "cpu", 25.0, cut=True))
    assert ("**Not run:** huge tier (needs a CUDA GPU); fuzz suite (ended before it reported a "
            "Case)") in text
    ran = [Stage("fuzz suite", ran=12, cut=True)]
    assert "Not run" not in gate_report.markdown(
        Result(ExitCode.CUT, ran, [], "m:a", "cpu", 25.0, cut=True))


def test_opinfo_without_expecttest_is_skipped_at_once_with_the_fix(monkeypatch) -> None:
    """Refused before torch's test code is imported (seconds), and the reason says what to
    install."""
    import importlib.util

    from diagfuzz.strategies import opinfo

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "expecttest" else real(name, *a))
    imported = []
    monkeypatch.setitem(__import__("sys").modules,
                        "torch.testing._internal.common_methods_invocations",
                        _Refused(imported))
    samples = opinfo.load("cpu")
    assert not samples.cases and "pip install expecttest" in samples.skipped
    assert "pip install expecttest" in opinfo.unavailable()
    assert not imported


class _Refused:
    """A module that records any use (op_db must not be reached)."""

    def __init__(self, uses: list[str]) -> None:
        self._uses = uses

    def __getattr__(self, name: str) -> object:
        self._uses.append(name)
        raise AttributeError(name)


def test_a_stage_stopped_while_it_loaded_its_cases_never_says_it_started() -> None:
    """SIGTERM during a stage's loading (OpInfo's takes seconds): no "started" line after
    "stopping", and the stage is reported as stopped with nothing run."""
    import io

    from diagfuzz.gate.progress import GateProgress
    from diagfuzz.gate.stages import Context, run_cases

    out = io.StringIO()
    ctx = Context(opts=None, progress=GateProgress(stream=out),  # type: ignore[arg-type]
                  stopping=lambda: True)
    stage = ctx.stage("opinfo samples")
    run_cases(ctx, stage, [square(0)], runner=None, oracle="check")  # type: ignore[arg-type]
    assert stage.stopped and stage.ran == 0
    assert "started" not in out.getvalue()


def test_a_stopped_suites_unfinished_shards_are_counted_from_the_progress_files(
        tmp_path: Path) -> None:
    import json

    from diagfuzz.gate import unfinished
    from diagfuzz.harness.findings import Finding as SuiteFinding

    known = SuiteFinding.of(Verdict("mismatch", "bitwise:aten", "", square(1),
                                    {"symptom": "values"}))
    new = SuiteFinding.of(Verdict("alias", "alias", "", square(2)))
    for worker, cases, found in (("gw0", 700, [known]), ("gw1", 500, [known, new])):
        (tmp_path / "run-0" / worker).mkdir(parents=True)
        (tmp_path / "run-0" / worker / "progress.json").write_text(json.dumps(
            {"cases": cases, "findings": [f.to_dict() for f in found]}))
    held = unfinished.progress_counts(tmp_path)
    assert held["cases"] == 1200
    extra = unfinished.unfinished_findings({known.signature}, held["findings"])
    assert [e["kind"] for e in extra] == ["alias"]
    assert unfinished.unfinished_note(300, 1200).startswith(
        "stopped: 300 Cases of shards that finished, 900 of shards that did not")


def test_the_stage_table_counts_failing_cases_and_causes_apart() -> None:
    two = [Finding("fuzz suite", Verdict("mismatch", "bitwise:aten", "", square(1),
                                         {"symptom": "values"}), count=9),
           Finding("fuzz suite", Verdict("alias", "alias", "", square(2)), count=4)]
    stages = [Stage("fuzz suite", ran=30, failures=two),
              Stage("classification", ran=2, note="2 of 2 finding(s) (2 deterministic)")]
    text = gate_report.markdown(Result(ExitCode.FAILURE, stages, two, "m:a", "cpu", 3.0))
    assert "| stage | Cases | failing Cases | causes | unsupported | time | note |" in text
    assert "| fuzz suite | 30 | 13 | 2 | 0 | 0.0 s |" in text
    assert "| classification | — | — | — | — | 0.0 s | 2 of 2 finding(s) (2 deterministic) |" \
        in text
    data = gate_report.to_json(Result(ExitCode.FAILURE, stages, [], "m:a", "cpu", 3.0))
    assert data["stages"][0]["failing_cases"] == 13 and data["stages"][0]["failures"] == 2


def test_a_fixed_stages_counts_stay_its_own_after_the_causes_are_merged() -> None:
    from diagfuzz.gate.run import distinct

    # A fixed stage records one finding per failing Case: three Cases of one cause.
    cases = [Finding("covering array", Verdict("mismatch", "bitwise:aten", "", square(n),
                                               {"symptom": "values"})) for n in (1, 2, 3)]
    stages = [Stage("covering array", ran=10, failures=cases)]
    merged = distinct(cases)
    assert len(merged) == 1 and merged[0].count == 3
    assert merged[0].stages == {"covering array": 3}
    text = gate_report.markdown(Result(ExitCode.FAILURE, stages, merged, "m:a", "cpu", 3.0))
    assert "| covering array | 10 | 3 | 1 | 0 | 0.0 s |" in text
    data = gate_report.to_json(Result(ExitCode.FAILURE, stages, merged, "m:a", "cpu", 3.0))
    assert data["stages"][0]["failing_cases"] == 3 and data["stages"][0]["failures"] == 1


def test_only_shrunk_or_chosen_cases_go_to_the_corpus(tmp_path: Path) -> None:
    from diagfuzz.gate.options import Options
    from diagfuzz.gate.run import Gate

    opts = Options(impl="examples.plain_torch:impl", corpus_dir=tmp_path / "corpus",
                   out_dir=tmp_path / "out", run_dir=tmp_path / "out" / "run", quiet=True)
    shrunk = Finding("fuzz suite", Verdict("mismatch", "bitwise:aten", "", square(1),
                                           {"symptom": "values"}), shrunk=True)
    unshrunk = Finding("fuzz suite", Verdict("alias", "alias", "", square(3)))
    chosen = Finding("error parity", Verdict("error-parity", "error-parity", "", square(2),
                                             {"actual": {"type": "KeyError", "origin": "x"}}))
    saved = Gate(opts)._write_findings([shrunk, unshrunk, chosen])
    assert len(saved) == 2 and all(f.reproducer is not None for f in (shrunk, unshrunk))
    from diagfuzz.core import corpus

    kept = {e.case for e in corpus.entries(tmp_path / "corpus")}
    assert kept == {square(1), square(2)}


def test_spares_follow_the_causes_found_so_far_up_to_max_classify(
        tmp_path: Path, monkeypatch) -> None:
    from diagfuzz.execution.classification import Classifier
    from diagfuzz.gate.options import Options
    from diagfuzz.gate.run import Gate

    asked: list[int] = []
    monkeypatch.setattr(Classifier, "prepare", lambda self, count: asked.append(count))
    gate = Gate(Options(max_classify=2, device="cpu", quiet=True, run_dir=tmp_path))

    def found(stage: str, *kinds: str) -> None:
        gate.ctx.stages.setdefault(stage, Stage(stage)).failures.extend(
            Finding(stage, Verdict(kind, kind, "", square(n)))
            for n, kind in enumerate(kinds))

    gate._prepare_classification()  # nothing found: no classifier, no spare
    assert asked == [] and gate.classifier is None
    found("corpus replay", "mismatch", "mismatch")  # two Cases of one cause
    gate._prepare_classification()
    found("covering array", "mismatch", "alias")  # the same cause again, and a second one
    gate._prepare_classification()
    found("error parity")
    gate._prepare_classification()
    assert asked == [1, 2, 2]
    found("fuzz suite", "crash")  # a third cause
    gate._prepare_classification()
    assert asked[-1] == 2  # --max-classify 2: two spares at most
    gate.stop("test")
    gate._prepare_classification()  # stopped: none more
    assert len(asked) == 4


def test_a_stopped_gate_names_the_stages_it_never_began_and_reports_one_moment(
        tmp_path: Path) -> None:
    from diagfuzz.gate.options import Options
    from diagfuzz.gate.run import Gate

    gate = Gate(Options(opinfo=False, device="cpu", quiet=True, out_dir=tmp_path,
                        run_dir=tmp_path / "run"))
    gate.ctx.stage("corpus replay").seconds = 0.5
    suite = gate.ctx.stage("fuzz suite")  # still running in its thread
    gate.stop_reason = "SIGTERM"
    result = gate.result()
    names = [(s.name, s.stopped, s.note) for s in result.stages]
    assert names == [
        ("corpus replay", False, ""), ("covering array", True, "stopped before it began"),
        ("fuzz suite", True, ""), ("error parity", True, "stopped before it began"),
        ("sequence search", True, "stopped before it began"),
        ("torch.compile parity", True, "stopped before it began"),
        ("registration audit", True, "stopped before it began")]  # no OpInfo: --no-opinfo
    suite.ran = 3000  # the suite's thread counts on after the result was taken
    assert next(s for s in result.stages if s.name == "fuzz suite").ran == 0
    text = gate_report.markdown(result)
    unrun = next(line for line in text.splitlines() if line.startswith("**Not run:**"))
    assert "fuzz suite (ended before it reported a Case)" in unrun
    for name in ("covering array", "error parity", "torch.compile parity"):
        assert f"{name} (stopped before it began)" in unrun
    assert "| fuzz suite | 0 |" in text


def test_a_finding_that_hangs_alone_gets_a_hangs_wait_in_its_reproducer() -> None:
    """An error the run saw that hangs when re-run alone: its reproducer waits as for that
    hang (3x the allowance, at least the floor), not the whole --timeout; a finding that
    re-runs as it was found keeps its own verdict's wait."""
    from diagfuzz.gate.run import _as_it_fails
    from diagfuzz.harness.reproducers import HANG_REPRO_FLOOR, reproducer_timeout

    found = Verdict("error-parity", "errors:aten", "", square(3))
    hung = Verdict("hang", "executor:timeout", "", square(3), {"timeout": 0.5})
    otherwise = Finding("error parity", found, classification=Classification(
        square(3), "hang", 5, 5, {"hang": 5}, hung, processes=5))
    assert reproducer_timeout(_as_it_fails(otherwise), 60.0) == HANG_REPRO_FLOOR
    same = Finding("error parity", found, classification=Classification(
        square(3), "error-parity", 5, 5, {"error-parity": 5}, found))
    assert _as_it_fails(same) is found and reproducer_timeout(found, 60.0) == 60.0
