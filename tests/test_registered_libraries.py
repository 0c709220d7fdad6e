"""Libraries that register their kernels into aten (``tests/registered``, CPU key): the
references stay aten's own, a registered library is judged through aten's public ops with
proof its kernel ran, and the registration audit flags what breaks autograd or compile."""

from __future__ import annotations

import importlib
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from diagfuzz import oracles
from diagfuzz.core import dispatch
from diagfuzz.core.case import Case
from diagfuzz.impl import ImplError, load_impl, provided_ops, registration_lines
from diagfuzz.specs import spec_of

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(torch.cuda.is_available(),
                                reason="the planted libraries register at the CPU key, "
                                       "which a GPU run does not judge")


@pytest.fixture
def library() -> Iterator[Any]:
    """Import a planted library (it registers on import); destroy its registrations and
    forget it afterwards, so no later test meets it."""
    def load(name: str) -> Any:
        return importlib.import_module(f"tests.registered.{name}")

    yield load
    package = sys.modules.get("tests.registered")
    for name in [n for n in sys.modules if n.startswith("tests.registered.")]:
        lib = getattr(sys.modules.pop(name), "LIB", None)
        if lib is not None and lib.m is not None:
            lib._destroy()
        if package is not None:  # the next import runs the module again
            vars(package).pop(name.rpartition(".")[2], None)


def _embed(offset: int, dtype: str) -> Case:
    """A diag_embed Case from its spec's warm-up shape: a 4 x 4 result, diagonal of 3."""
    warm = next(c for c in spec_of("diag_embed").warm_up_cases() if c.dtype == dtype)
    return warm.replace(offset=offset)


def _huge_offset() -> Case:
    return next(c for c in spec_of("diag_embed").error_cases() if c.invalid == "huge_offset")


def test_a_planted_override_leaves_every_reference_bit_unchanged() -> None:
    """Every op's references (aten's, the device kernel's, the independent ones) for every
    warm-up Case, before and after a library overrides the family and the ops the oracle
    itself uses with kernels that raise: the same bits. Outside the oracle's judging the
    override is live. In a subprocess: the override would break this worker."""
    script = textwrap.dedent("""
        import torch
        from diagfuzz.core import dispatch
        from diagfuzz.core.bits import bits
        from diagfuzz.specs import all_specs, arguments

        def references():
            out = []
            with dispatch.aten_only():
                for spec in all_specs():
                    for case in spec.warm_up_cases():
                        args = arguments(case, "cpu")
                        expected, _ = spec.reference(case, args)
                        found = [expected, spec.aten_kernel(case, args)]
                        if spec.others is not None:
                            found += [t for _, t in spec.others(case, args, "aten")]
                        out.append([(str(t.dtype), tuple(t.shape), tuple(t.stride()),
                                     bits(t.contiguous()).tolist()) for t in found])
            return out

        before = references()
        import tests.registered.overrides_everything as planted
        assert dispatch.overrides("tests"), "the override was not watched"
        try:
            torch.zeros(2).clone()
        except RuntimeError as exc:
            assert "planted override" in str(exc)
        else:
            raise AssertionError("the override is not live outside the oracle")
        after = references()
        assert before == after, "a reference changed under the planted override"
        print("unchanged", len(before))
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    count = int(done.stdout.split()[-1])
    assert count >= 5 * 6  # every op's warm-up Cases


def test_the_oracle_passes_aten_itself_with_a_planted_override_loaded(library: Any) -> None:
    """An override of the family's kernels changes nothing the oracle decides about aten
    itself (before, aten's reference was the override: a correct impl failed)."""
    library("correct")  # right values; the point is that it registers
    planted = library("planted")
    assert dispatch.overrides("tests")
    aten = load_impl("diagfuzz.impl:aten")
    for case in (_embed(-1, "float16"), _embed(1, "float32"), _huge_offset()):
        assert oracles.check(case, aten).ok, case
    assert planted.LIB.m is not None


def test_a_registered_library_is_blamed_not_the_reference(library: Any) -> None:
    """``registered:`` calls aten's public op; the planted diag_embed bug is a bitwise
    mismatch against aten's reference and the wrong exception type an error-parity
    failure, where the library's registration once made both sides the library."""
    impl = load_impl("registered:tests.registered.planted")
    assert impl.served.keys() == {"diag_embed", "diag_1d", "diagonal_backward"}
    bug = oracles.check(_embed(-1, "float16"), impl)
    assert bug.kind == "mismatch" and bug.check.startswith("bitwise:"), bug
    parity = oracles.check(_huge_offset(), impl)
    assert parity.kind == "error-parity" and "TypeError" in parity.message, parity
    assert oracles.check(_embed(1, "float16"), impl).ok
    assert ("calls: diag_embed: torch.ops.aten.diag_embed → diag_embed CPU kernel registered "
            "by tests (tests/registered/planted.py:25)") in registration_lines(impl)
    assert provided_ops(impl) == ("diagonal_backward", "diag_embed", "diag_1d")
    assert oracles.check(spec_of("diag").warm_up_cases()[0], impl).unsupported  # a matrix


def test_an_adapter_of_a_library_that_registers_finds_the_same_and_warns(
        library: Any) -> None:
    impl = load_impl("tests.registered.planted_adapter")
    assert oracles.check(_embed(-1, "float16"), impl).kind == "mismatch"
    assert oracles.check(_huge_offset(), impl).kind == "error-parity"
    lines = registration_lines(impl)
    assert any(line.startswith("warning: tests registered 2 aten kernel(s)")
               for line in lines), lines


def test_a_correct_registration_passes_every_oracle(library: Any) -> None:
    library("correct")
    impl = load_impl("registered:tests.registered.correct")
    assert set(impl.served) == {"diagonal", "diag_embed", "diag", "diag_1d",
                                "diagonal_backward"}
    for op in impl.served:
        spec = spec_of(op)
        for case in [*spec.warm_up_cases(), *spec.compile_cases()]:
            verdict = oracles.check(case, impl)
            assert verdict.ok and not verdict.details.get("skipped"), verdict
        for case in spec.error_cases():
            assert oracles.check(case, impl).ok, case
        for case in spec.compile_cases():
            assert oracles.check_registration(case, impl).ok, case


def test_a_registration_that_never_serves_is_not_reached(library: Any) -> None:
    impl = load_impl("registered:tests.registered.wrong_key")
    case = spec_of("diagonal").warm_up_cases()[0]
    verdict = oracles.check(case, impl)
    assert (verdict.kind, verdict.check) == ("dispatch", "not-reached"), verdict
    assert "aten served" in verdict.message


def test_the_audit_flags_an_autograd_function_at_the_autograd_key(library: Any) -> None:
    impl = load_impl("registered:tests.registered.autograd_function")
    case = spec_of("diag_embed").compile_cases()[0]
    assert oracles.check(case, impl).ok  # the values are right
    verdict = oracles.check_registration(case, impl)
    assert verdict.check == "registration:autograd-key", verdict
    assert "AutogradCPU" in verdict.message


def test_the_audit_names_a_plain_kernel_at_the_autograd_key_for_what_it_is(
        library: Any) -> None:
    """No autograd.Function: a kernel at AutogradCPU replaces aten's formula; diag of a
    vector, which decomposes into diag_embed, is flagged for the same registration."""
    impl = load_impl("registered:tests.registered.autograd_kernel")
    for op in ("diag_embed", "diag_1d"):
        verdict = oracles.check_registration(spec_of(op).compile_cases()[0], impl)
        assert verdict.check == "registration:autograd-key", verdict
        assert "a kernel that replaces aten's derivative formula" in verdict.message
        assert "aten::diag_embed at AutogradCPU" in verdict.message


def test_the_audit_flags_the_gradient_a_diag_kernel_drops(library: Any) -> None:
    impl = load_impl("registered:tests.registered.diag_kernel")
    case = spec_of("diag").compile_cases()[0]
    assert oracles.check(case, impl).ok  # the values are right
    verdict = oracles.check_registration(case, impl)
    assert (verdict.kind, verdict.check) == ("mismatch", "registration:gradient"), verdict
    assert "drops the input's gradient" in verdict.message
    assert "aten::diag at CPU" in verdict.message and "CompositeImplicitAutograd" in (
        verdict.message)


def test_a_library_that_registers_nothing_of_the_family_is_a_usage_error(
        library: Any) -> None:
    with pytest.raises(ImplError, match="registered no kernel of the diagonal family"):
        load_impl("registered:tests.registered._kernels")


def test_a_registration_diagfuzz_cannot_defer_stops_the_run(library: Any) -> None:
    """A kernel registered past ``torch.library`` (a C++ extension's way) would replace a
    reference: the canary references differ and loading refuses, naming the kernel."""
    from diagfuzz.impl import ReferenceReplaced, load_proven

    _impl, proof = load_proven("tests.registered.planted_adapter", "cpu")
    assert "bit-identical" in proof and "aten registration(s) deferred" in proof
    with pytest.raises(ReferenceReplaced, match="aten::diag_embed at CPU"):
        load_proven("tests.registered.unwatched", "cpu")
    assert dispatch.unisolated(["aten::diag_embed"])


def test_the_compile_stage_reports_a_dropped_gradient_as_a_finding() -> None:
    """torch.compile parity under the library's registration: the compiled diag's input
    gets no gradient, a mismatch (the oracle once crashed on it). In a fresh process:
    whether torch.compile keeps diag's decomposition depends on what the process
    dispatched before (the gate classifies it flaky where it varies)."""
    script = textwrap.dedent("""
        from diagfuzz import oracles
        from diagfuzz.impl import load_impl
        from diagfuzz.specs import spec_of

        impl = load_impl("registered:tests.registered.diag_kernel")
        case = spec_of("diag").compile_cases()[0]
        verdict = oracles.check_compile(case, impl, backend="aot_eager")
        print(verdict.kind, verdict.check, "|", verdict.message)
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("mismatch compile:grad |"), done.stdout
    assert "no gradient" in done.stdout


def test_diagfuzz_own_kernels_through_their_registration(library: Any) -> None:
    """``registered:diagfuzz.ops:enable``: diagfuzz's kernels as a user's library."""
    import diagfuzz.ops as ops

    was = ops.enabled()
    try:
        impl = load_impl("registered:diagfuzz.ops:enable")
        assert impl.registered_package == "diagfuzz.ops"
        assert {"diagonal", "diag_embed", "diagonal_backward",
                "diagonal_scatter"} <= set(impl.served)
        for op in ("diagonal", "diag_embed"):
            case = spec_of(op).compile_cases()[0]
            assert oracles.check(case, impl).ok and oracles.check_registration(case, impl).ok
    finally:
        if not was:
            ops.disable()


def test_a_library_with_a_switch_is_named_with_it(library: Any) -> None:
    """Forgetting the switch: the error says how to call it; with it, the library runs."""
    with pytest.raises(ImplError, match=r"registered:tests\.registered\.switched:enable"):
        load_impl("registered:tests.registered.switched")
    impl = load_impl("registered:tests.registered.switched:enable")
    assert provided_ops(impl) == ("diag_embed", "diag_1d")
    assert oracles.check(_embed(1, "float32"), impl).ok
