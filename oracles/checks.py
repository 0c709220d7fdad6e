"""The per-Case oracle: run the implementation once (twice at most) and judge it bitwise.

Order of judgement for a valid Case, first failure wins:
  references agree (autograd vs aten, index arithmetic vs aten, CUDA vs CPU)
  -> the call returns a Tensor (an exception where aten returns is an error-parity failure)
  -> guard bytes around every allocation intact (out-of-bounds writes)
  -> the input's storage unchanged
  -> device, dtype, shape, contiguous strides
  -> no aliasing with the input (a materialising op returns a new tensor)
  -> raw bits equal the reference (elements holding the sentinel: "unwritten")
  -> metamorphic relations
  -> the Triton kernel ran (dispatch proof)
Invalid Cases get error parity instead.
"""

from __future__ import annotations

from typing import Any

import torch

import diagfuzz.ops as ops
from diagfuzz.case import Case, call_arguments, contiguous_strides, dtype_of, materialise
from diagfuzz.oracles import index_reference, metamorphic, reference
from diagfuzz.oracles._bits import diff, differing, same_bits, storage_words, storages_overlap
from diagfuzz.oracles.sentinel import PREFERRED, SentinelAllocations, choose_sentinel
from diagfuzz.verdict import Verdict

#: The Triton kernel (launch counter name) behind each op.
KERNEL = {"diagonal": "diagonal_copy", "diagonal_backward": "diagonal_backward"}


def _fail(kind: str, check: str, message: str, case: Case,
          details: dict[str, Any] | None = None) -> Verdict:
    return Verdict(kind, check, message, case, details or {})


def _exception(exc: BaseException) -> dict[str, str]:
    return {"type": type(exc).__name__, "message": str(exc)[:500]}


def _has_out(impl: Any, case: Case) -> bool:
    name = "diagonal_out" if case.op == "diagonal" else "diagonal_backward_out"
    return callable(getattr(impl, name, None))


def _read_tensor(case: Case, args: dict[str, Any]) -> torch.Tensor:
    return args["input"] if case.op == "diagonal" else args["grad_output"]


# --- error parity -----------------------------------------------------------------------

def check_error_parity(case: Case, impl: Any, device: str) -> Verdict:
    """An invalid Case: the implementation must raise exactly aten's exception type.

    Returning a result where aten raises, or raising another type, is "error-parity". If
    aten (registration off) accepts the Case after all, the implementation must return the
    same result bit for bit.
    """
    if (case.out_dtype or case.out_device) and not _has_out(impl, case):
        return Verdict("pass", "error-parity", "skipped: impl has no .out method", case,
                       {"skipped": "out"})
    try:
        ref_result = reference.call_op(reference.ATEN, case, call_arguments(case, device))
        ref_exc: BaseException | None = None
    except Exception as exc:  # aten's refusal is the expected outcome
        ref_exc = exc
    try:
        actual = reference.call_op(impl, case, call_arguments(case, device))
    except Exception as exc:
        if ref_exc is None:
            return _fail("error-parity", "error-parity",
                         f"impl raised {type(exc).__name__} where aten returns a result",
                         case, {"actual": _exception(exc)})
        if type(exc) is not type(ref_exc):
            return _fail("error-parity", "error-parity",
                         f"impl raised {type(exc).__name__}, aten raises "
                         f"{type(ref_exc).__name__}", case,
                         {"expected": _exception(ref_exc), "actual": _exception(exc)})
        return Verdict("pass", "error-parity", "", case,
                       {"expected": _exception(ref_exc), "actual": _exception(exc)})
    if ref_exc is not None:
        return _fail("error-parity", "error-parity",
                     f"impl returned a result where aten raises {type(ref_exc).__name__}",
                     case, {"expected": _exception(ref_exc)})
    found = _compare(case, ref_result, actual, "aten")
    return found or Verdict("pass", "error-parity", "aten accepts this Case", case)


# --- comparison -------------------------------------------------------------------------

def _metadata(case: Case, expected: torch.Tensor, actual: Any) -> Verdict | None:
    if not isinstance(actual, torch.Tensor):
        return _fail("mismatch", "metadata", f"impl returned {type(actual).__name__}, "
                     "not a Tensor", case)
    want = contiguous_strides(tuple(expected.shape))
    if not (expected.device == actual.device and expected.dtype == actual.dtype
            and expected.shape == actual.shape and actual.stride() == want):
        found = _metadata_field(case, expected, actual, want)
        if found:
            return found
    if actual.is_conj() or actual.is_neg():
        return _fail("mismatch", "metadata:lazy-bits", "result has a lazy conj/neg bit set",
                     case)
    return None


def _metadata_field(case: Case, expected: torch.Tensor, actual: torch.Tensor,
                    want: tuple[int, ...]) -> Verdict | None:
    """The first of device, dtype, shape, strides that differs, as a Verdict."""
    for name, e, a in (
        ("device", str(expected.device), str(actual.device)),
        ("dtype", str(expected.dtype), str(actual.dtype)),
        ("shape", list(expected.shape), list(actual.shape)),
        ("strides", list(want), list(actual.stride())),
    ):
        if e != a:
            return _fail("mismatch", f"metadata:{name}",
                         f"{name} {a} differs from expected {e}", case,
                         {"field": name, "expected": e, "actual": a})
    return None


def _compare(case: Case, expected: torch.Tensor, actual: Any, source: str,
             sentinel: int | None = None) -> Verdict | None:
    """Metadata, then raw bits; elements holding the sentinel make it "unwritten"."""
    found = _metadata(case, expected, actual)
    if found:
        return found
    if same_bits(expected, actual):
        return None
    positions = differing(expected, actual)
    details = diff(expected, actual, positions, sentinel)
    if sentinel is not None and details["sentinel_elements"]:
        return _fail("unwritten", "sentinel",
                     f"{details['sentinel_elements']} of {expected.numel()} elements still hold "
                     f"the sentinel {details['sentinel']} (never written)", case, details)
    return _fail("mismatch", f"bitwise:{source}",
                 f"{len(positions)} of {expected.numel()} elements differ in bits from "
                 f"the {source} reference", case, details)


def _references_agree(case: Case, args: dict[str, Any], expected: torch.Tensor,
                      source: str, device: str) -> Verdict | None:
    """The references must agree with each other before they can judge anything."""
    tensor = _read_tensor(case, args)
    others: list[tuple[str, torch.Tensor]] = []
    if case.op == "diagonal":
        others.append(("index", index_reference.diagonal(tensor, case)))
    else:
        others.append(("index", index_reference.diagonal_backward(tensor, case)))
        if source == "autograd":
            others.append(("aten", reference.ATEN.diagonal_backward(
                tensor, list(case.sizes), case.offset, case.dim1, case.dim2)))
    if torch.device(device).type != "cpu":
        cpu_args = {**args, ("input" if case.op == "diagonal" else "grad_output"):
                    materialise(case, "cpu")}
        cpu_expected, _ = reference.expected(case, cpu_args)
        others.append(("cpu", cpu_expected.to(device)))
    for name, other in others:
        found = _compare(case, expected, other, source)
        if found:
            return _fail("mismatch", f"reference:{name}-vs-{source}",
                         f"the {name} reference disagrees with the {source} reference: "
                         f"{found.message}", case, found.details)
    return None


# --- the valid path ---------------------------------------------------------------------

def _run(impl: Any, case: Case, args: dict[str, Any], expected: torch.Tensor,
         byte: int) -> tuple[Any, SentinelAllocations, torch.Tensor | None]:
    """One call of the implementation with sentinel allocations; (result, allocations, out)."""
    with SentinelAllocations(byte) as alloc:
        out = None
        if "out" in args:
            out = torch.empty(expected.shape, dtype=dtype_of(case.out_dtype or case.dtype),
                              device=case.out_device or expected.device)
            args = {**args, "out": out}
        result = reference.call_op(impl, case, args)
    return result, alloc, out


def _judge(case: Case, tensor: torch.Tensor, snapshot: torch.Tensor, expected: torch.Tensor,
           source: str, result: Any, alloc: SentinelAllocations,
           out: torch.Tensor | None) -> Verdict | None:
    violations = alloc.guard_violations()
    if violations:
        return _fail("mismatch", "out-of-bounds",
                     f"{len(violations)} buffer(s) written outside their bounds (guard bytes "
                     "changed)", case, {"buffers": violations})
    now = storage_words(tensor)
    if not torch.equal(now, snapshot):
        changed = (now != snapshot).nonzero().reshape(-1).cpu()
        return _fail("mismatch", "input-unchanged",
                     f"the implementation wrote {len(changed)} word(s) of its input's storage",
                     case, {"storage_words": changed[:8].tolist()})
    if isinstance(result, torch.Tensor) and storages_overlap(result, tensor):
        return _fail("alias", "alias",
                     "result shares storage with the input: a materialising op must return "
                     "a new tensor", case)
    found = _metadata(case, expected, result)
    if found:
        return found
    if out is not None and result.data_ptr() != out.data_ptr():
        return _fail("mismatch", "out-returned", "the .out overload did not return out",
                     case)
    found = _compare(case, expected, result, source, alloc.byte)
    if found:
        broken = metamorphic.relations(case, tensor, result)
        if broken:
            found.details["also_breaks"] = broken[0]
        return found
    broken = metamorphic.relations(case, tensor, result)
    if broken:
        return _fail("mismatch", broken[0], broken[1], case, broken[2])
    return None


def check_valid(case: Case, impl: Any, device: str) -> Verdict:
    """A valid Case: the full bitwise judgement (see the module docstring)."""
    args = call_arguments(case, device)
    if "out" in args and not _has_out(impl, case):
        return Verdict("pass", "out", "skipped: impl has no .out method", case,
                       {"skipped": "out"})
    # One switch for all references (each would otherwise switch the registration off and
    # on again itself, ~25 us a time); the implementation then runs as the caller left it.
    with ops.use_triton(False):
        try:
            expected, source = reference.expected(case, args)
        except Exception:  # aten refuses a Case not marked invalid: parity decides
            refused = True
        else:
            refused = False
            found = _references_agree(case, args, expected, source, device)
    if refused:
        return check_error_parity(case, impl, device)
    if found:
        return found
    tensor = _read_tensor(case, args)
    snapshot = storage_words(tensor).clone()
    byte = choose_sentinel(expected)
    # All 256 byte values occur: two runs with different sentinels (see sentinel.py).
    bytes_to_use = [byte] if byte is not None else list(PREFERRED[:2])
    kernel = KERNEL[case.op]
    before = ops.launches(kernel)
    for sentinel in bytes_to_use:
        try:
            result, alloc, out = _run(impl, case, args, expected, sentinel)
        except Exception as exc:
            return _fail("error-parity", "error-parity",
                         f"impl raised {type(exc).__name__} where aten returns a result",
                         case, {"actual": _exception(exc)})
        found = _judge(case, tensor, snapshot, expected, source, result, alloc, out)
        if found:
            return found
    if (getattr(impl, "uses_triton_registration", False) and expected.numel() > 0
            and ops.launches(kernel) == before):
        return _fail("dispatch", "dispatch",
                     f"the Triton {kernel} kernel did not run: aten served the call",
                     case, {"kernel": kernel, "launches": before})
    return Verdict("pass", "all", "", case, {"reference": source,
                                             "sentinel": f"0x{bytes_to_use[0]:02x}"})


def check(case: Case, impl: Any, device: str = ops.DEVICE) -> Verdict:
    """Judge ``impl`` on ``case``: error parity for invalid Cases, the full check otherwise."""
    if case.invalid:
        return check_error_parity(case, impl, device)
    return check_valid(case, impl, device)


__all__ = ["check", "check_error_parity", "check_valid"]
