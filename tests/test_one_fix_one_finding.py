"""One fix, one finding: a library's kernel for a CompositeImplicitAutograd op (``aten::diag``
at the CPU key, ``tests/registered/diag_kernel.py``, as FlagGems registers its CUDA one)
drops the gradient of every diagfuzz op that reaches it (``diag``, ``diag_1d``), in the
registration audit and in torch.compile parity alike. The maintainer has one thing to
fix, the registration, so the gate has one finding keyed on it; which ops and stages
reached it are counted inside. Other causes keep their own keys."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from diagfuzz import oracles
from diagfuzz.core.signature import Signature, cause_axes, signature_from
from diagfuzz.core.verdict import Verdict
from diagfuzz.gate.stages import AUDIT_STAGE, COMPILE_STAGE, Finding
from diagfuzz.impl import load_impl
from diagfuzz.specs import spec_of

ROOT = Path(__file__).resolve().parent.parent
#: Where ``tests/registered/diag_kernel.py`` registers its ``aten::diag`` kernel.
SITE = "tests/registered/diag_kernel.py:" + str(1 + next(
    i for i, line in enumerate((ROOT / "tests/registered/diag_kernel.py").read_text(
        encoding="utf-8").splitlines()) if line.startswith('LIB.impl("diag"')))

pytestmark = pytest.mark.skipif(torch.cuda.is_available(),
                                reason="the planted libraries register at the CPU key, "
                                       "which a GPU run does not judge")


@pytest.fixture
def library() -> Iterator[None]:
    """Destroy the planted libraries' registrations after the test and forget them."""
    yield
    package = sys.modules.get("tests.registered")
    for name in [n for n in sys.modules if n.startswith("tests.registered.")]:
        lib = getattr(sys.modules.pop(name), "LIB", None)
        if lib is not None and lib.m is not None:
            lib._destroy()
        if package is not None:
            vars(package).pop(name.rpartition(".")[2], None)


def _dropped_gradient_verdicts() -> list[tuple[str, str, Verdict]]:
    """(stage, oracle, verdict) of the audit and of torch.compile parity for ``diag`` and
    ``diag_1d`` under ``diag_kernel``, from the real oracles. In a fresh process: whether
    torch.compile keeps diag's decomposition depends on what the process dispatched
    before (``test_the_compile_stage_reports_a_dropped_gradient_as_a_finding``)."""
    script = textwrap.dedent("""
        import json
        from diagfuzz import oracles
        from diagfuzz.impl import load_impl
        from diagfuzz.specs import spec_of

        impl = load_impl("registered:tests.registered.diag_kernel")
        found = []
        for op in ("diag", "diag_1d"):
            case = spec_of(op).compile_cases()[0]
            found.append(["check_registration",
                          oracles.check_registration(case, impl).to_json()])
            found.append(["check_compile",
                          oracles.check_compile(case, impl, backend="aot_eager").to_json()])
        print(json.dumps(found))
    """)
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", script], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    stage = {"check_registration": AUDIT_STAGE, "check_compile": COMPILE_STAGE}
    return [(stage[oracle], oracle, Verdict.from_json(text))
            for oracle, text in json.loads(done.stdout.splitlines()[-1])]


def _merged(findings: list[Finding]) -> dict[Signature, Finding]:
    """The gate's merge by signature (``diagfuzz.gate.run.distinct``'s rule)."""
    merged: dict[Signature, Finding] = {}
    for finding in findings:
        if finding.key in merged:
            merged[finding.key].absorb(finding)
        else:
            merged[finding.key] = finding
    return merged


def test_a_dropped_gradient_is_one_finding_keyed_on_the_registration() -> None:
    """The audit's ``registration:gradient`` for diag and diag_1d and torch.compile's
    "compiled grad is None" for both: four failing Cases, one signature, the aten
    registration and its site; the ops and the stages are counted inside."""
    verdicts = _dropped_gradient_verdicts()
    assert [(v.kind, v.check) for _, _, v in verdicts] == [
        ("mismatch", "registration:gradient"), ("mismatch", "compile:grad")] * 2, verdicts
    findings = [Finding(stage, verdict, oracle) for stage, oracle, verdict in verdicts]
    assert len({f.key for f in findings}) == 1, [f.key.describe() for f in findings]
    key = findings[0].key
    assert key == Signature("aten::diag@CPU", "mismatch", "registration:gradient",
                            "dropped gradient", SITE), key
    assert key.describe() == ("aten::diag@CPU · mismatch · registration:gradient · "
                              f"dropped gradient · at {SITE}")
    (one,) = _merged(findings).values()
    assert one.count == 4
    assert one.stages == {AUDIT_STAGE: 2, COMPILE_STAGE: 2}
    assert one.classes["op"] == {"diag": 2, "diag_1d": 2}
    # Each verdict names the registration it blames, as plain data.
    for _, _, verdict in verdicts:
        assert verdict.details["dropped_by"] == {
            "op": "aten::diag", "key": "CPU", "module": "tests", "where": SITE}
        assert "aten::diag at CPU" in verdict.message


def _planted_wrong_values(op: str) -> Verdict:
    impl = load_impl("registered:tests.registered.planted")
    case = next(c for c in spec_of(op).warm_up_cases() if c.dtype == "float16")
    verdict = oracles.check(case.replace(offset=-1), impl)  # its negative-offset bug
    assert verdict.kind == "mismatch" and verdict.check.startswith("bitwise:"), verdict
    return verdict


def _drop(op: str, check: str, by: dict[str, str] | None) -> Signature:
    """The signature of a dropped gradient of ``op`` met by ``check``, blamed on ``by``."""
    details = {"library": "lib"} | ({"dropped_by": by} if by else {})
    return signature_from("mismatch", check, {"op": op}, details)


DIAG_AT_CUDA = {"op": "aten::diag", "key": "CUDA", "module": "lib", "where": "lib/reg.py:9"}


def test_the_key_is_the_registration_not_the_op_or_the_stage() -> None:
    """The audit's drop through diag and torch.compile's through diag_1d, blamed on one
    registration, are one signature; the op is counted inside the finding."""
    audit = _drop("diag", "registration:gradient", DIAG_AT_CUDA)
    assert audit == _drop("diag_1d", "compile:grad", DIAG_AT_CUDA)
    assert audit.describe() == ("aten::diag@CUDA · mismatch · registration:gradient · "
                                "dropped gradient · at lib/reg.py:9")
    assert cause_axes({"op": "diag_1d"}, {"dropped_by": DIAG_AT_CUDA})["op"] == "diag_1d"
    # Two registrations that drop a gradient are two fixes, whichever op met them.
    embed_at = {**DIAG_AT_CUDA, "op": "aten::diag_embed", "where": "lib/reg.py:10"}
    assert audit != _drop("diag", "registration:gradient", embed_at)


def test_unrelated_bugs_keep_their_own_signatures(library: None) -> None:
    """Only a dropped gradient is keyed on the registration: a wrong diag_embed and a
    wrong diag of a vector (``tests/registered/planted.py``) stay two findings keyed on
    their ops, and neither is a dropped gradient; a drop no registration explains, and a
    compiled gradient of wrong bits, keep their op."""
    embed = Finding("fuzz suite", _planted_wrong_values("diag_embed"))
    vector = Finding("fuzz suite", _planted_wrong_values("diag_1d"))
    assert embed.key != vector.key
    assert (embed.key.op, vector.key.op) == ("diag_embed", "diag_1d")
    assert embed.key.trigger == vector.key.trigger == "wrong values"
    assert "op" not in embed.classes
    assert _drop("diag", "registration:gradient", DIAG_AT_CUDA) not in {embed.key,
                                                                        vector.key}
    unexplained = _drop("diag", "registration:gradient", None)
    assert unexplained.op == "diag"
    assert unexplained != _drop("diag_1d", "registration:gradient", None)
    assert signature_from("mismatch", "compile:grad:bitwise:eager-grad", {"op": "diag"},
                          {"dropped_by": DIAG_AT_CUDA}).op == "diag"


def test_the_gate_counts_one_gradient_finding(tmp_path: Path) -> None:
    """``diagfuzz gate`` on ``diag_kernel`` (no suite, OpInfo or covering Cases, 7 s):
    the registration audit finds the dropped gradient of diag and diag_1d, and the report
    holds one finding for it, counting both ops. torch.compile parity joins it where it
    meets the drop too; on a CPU its executor (one intra-op thread) gets inductor's own
    code for diag, which keeps the gradient, so there it need not."""
    environ = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = [sys.executable, "-m", "diagfuzz", "gate",
            "--impl", "registered:tests.registered.diag_kernel", "--no-suite",
            "--no-opinfo", "--no-sequences", "--no-covering", "--no-save", "--repeats", "1",
            "--corpus", str(tmp_path / "corpus"), "--out", str(tmp_path / "out"),
            "--report", str(tmp_path / "report.json"), "--stage-executors", "1"]
    done = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env=environ)
    report: dict[str, Any] = json.loads((tmp_path / "report.json").read_text())
    gradient = [f for f in report["findings"]
                if f["signature"]["trigger"] == "dropped gradient"
                or f["verdict"]["check"] == "compile:grad"]
    assert len(gradient) == 1, (done.stdout[-3000:], [f["describe"] for f in gradient])
    (one,) = gradient
    assert one["signature"]["op"] == "aten::diag@CPU"
    assert one["signature"]["origin"] == SITE
    cases = {op: len(spec_of(op).compile_cases()) for op in ("diag", "diag_1d")}
    assert one["stages"][AUDIT_STAGE] == sum(cases.values())  # the audit's every Case
    assert set(one["stages"]) <= {AUDIT_STAGE, COMPILE_STAGE}
    assert set(one["classes"]["op"]) == set(cases)
    assert one["describe"] == ("aten::diag@CPU · mismatch · registration:gradient · "
                               f"dropped gradient · at {SITE}")

