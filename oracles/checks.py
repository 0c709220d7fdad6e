"""The per-Case oracle: run the implementation once (twice at most) and judge it bitwise.

Order of judgement for a valid Case, first failure wins:
  references agree (autograd vs aten, index arithmetic vs aten, on the CPU; then aten's
    kernel on the device vs the CPU reference; if that disagrees but agrees when run
    again alone, the implementation wrote into it: out-of-bounds)
  -> the call returns a Tensor (an exception where aten returns is an error-parity failure)
  -> guard bytes around every allocation intact (out-of-bounds writes)
  -> the input's storage unchanged
  -> device, dtype, shape, contiguous strides
  -> no aliasing with the input (a materialising op returns a new tensor)
  -> raw bits equal the reference (elements holding the sentinel: "unwritten")
  -> metamorphic relations
  -> the Triton kernel ran (dispatch proof)
Invalid Cases get error parity instead.

Device work confined, judgement on the host: the Case is materialised once, on the CPU, and
the references are computed there. ``device_side`` is the only code that touches the device
for a valid Case: one copy of the input there, aten's kernel (the device reference), the
implementation under sentinel allocations, and one copy back of every storage the judgement
reads (input, result and guard bytes, device reference). Every comparison then runs on host
tensors; only facts the host already knows (device, dtype, shape, strides, conj/neg bits,
storage overlap, data pointers) are read from the device tensors themselves. On a GPU that is
a handful of launches and one synchronisation per Case instead of dozens of each (the probe
that counts them: `git show c3eac45:benchmarks/oracle_cost.py`). On the CPU the copies are
no-ops and the same code runs.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch

from diagfuzz.core import counters
from diagfuzz.core.bits import diff, differing, same_bits, storages_overlap
from diagfuzz.core.case import OUT_FORMS as OUT_FORMS  # re-exported
from diagfuzz.core.case import Case, drawn_out_form, dtype_of
from diagfuzz.core.dispatch import aten_only, judged
from diagfuzz.core.impl import provides, unsupported
from diagfuzz.core.origin import raise_origin
from diagfuzz.core.runtime import DEVICE
from diagfuzz.core.verdict import Verdict
from diagfuzz.oracles import inplace, reference
from diagfuzz.oracles.policy import (
    addressing_strides,
    binding_type_ok,
    is_binding_class,
    raised_as,
)
from diagfuzz.oracles.sentinel import PREFERRED, SentinelAllocations, choose_sentinel
from diagfuzz.oracles.transfer import storage_bytes, to_device, to_host
from diagfuzz.specs import arguments, read_tensors, spec_of


def _fail(kind: str, check: str, message: str, case: Case,
          details: dict[str, Any] | None = None) -> Verdict:
    return Verdict(kind, check, message, case, details or {})


def _exception(exc: BaseException) -> dict[str, str]:
    """An exception as evidence: its type, message and where the impl raised it (the
    finding's key, ``diagfuzz.core.origin``)."""
    return {"type": type(exc).__name__, "message": str(exc)[:500],
            "origin": raise_origin(exc)}


def _raised_details(exc: BaseException, expected: BaseException | None = None
                    ) -> dict[str, Any]:
    """Evidence of what the implementation raised (and what aten raised, if it did)."""
    details: dict[str, Any] = {"actual": _exception(exc)}
    if expected is not None:
        details["expected"] = _exception(expected)
    return details


def _has_out(impl: Any, case: Case) -> bool:
    return callable(getattr(impl, spec_of(case.op).out_method, None))


# --- error parity -----------------------------------------------------------------------

@judged
def check_error_parity(case: Case, impl: Any, device: str, *,
                       strict: bool = False) -> Verdict:
    """An invalid Case: the implementation must refuse it as the layer users call would.

    Value-level classes demand exactly aten's exception type (found anywhere in the
    raised exception's chain, see ``policy.exception_chain``); binding-level classes
    (``policy.BINDING_CLASSES``) demand only an exception, or with ``strict`` one of the
    public bindings' types. Returning a result where aten raises is "error-parity". If
    aten accepts the Case after all, the implementation must return
    the same result bit for bit.
    """
    return error_parity_batch([case], impl, device, strict=strict)[0]


@dataclass
class _ParityCall:
    """One error-parity Case between aten's call and the implementation's."""

    case: Case
    ref_args: dict[str, Any]
    impl_args: dict[str, Any]
    ref_result: Any = None
    ref_exc: BaseException | None = None


def error_parity_batch(cases: list[Case], impl: Any, device: str, *,
                       strict: bool = False) -> list[Verdict]:
    """``check_error_parity`` of each Case: aten's calls first, then the
    implementation's."""
    verdicts: list[Verdict | None] = [None] * len(cases)
    calls: list[tuple[int, _ParityCall]] = []
    for i, case in enumerate(cases):
        refused = _out_skipped(case, impl)
        if refused:
            verdicts[i] = refused
            continue
        ref_args = arguments(case, device)
        # The twin is made before aten sees ref_args.
        calls.append((i, _ParityCall(case, ref_args, _twin_arguments(case, ref_args))))
    with aten_only():
        for _, call in calls:
            try:
                call.ref_result = reference.call_op(reference.ATEN, call.case, call.ref_args)
            except Exception as exc:  # aten's refusal is the expected outcome
                call.ref_exc = exc
    for i, call in calls:
        verdicts[i] = _parity_verdict(call, impl, strict)
    return [v for v in verdicts if v is not None]


def _parity_verdict(call: _ParityCall, impl: Any, strict: bool) -> Verdict:
    """The implementation's call of an error-parity Case, judged against aten's."""
    case, ref_exc = call.case, call.ref_exc
    try:
        actual = reference.call_op(impl, case, call.impl_args)
    except Exception as exc:
        if ref_exc is None:
            return _fail("error-parity", "error-parity",
                         f"impl raised {type(exc).__name__} where aten returns a result",
                         case, _raised_details(exc))
        return _parity_of_raise(case, exc, ref_exc, strict)
    if ref_exc is not None:
        return _fail("error-parity", "error-parity",
                     f"impl returned a result where aten raises {type(ref_exc).__name__}",
                     case, {"expected": _exception(ref_exc)})
    name = spec_of(case.op).inplace
    if name and inplace.overlaps(call.impl_args[name]):
        # aten's device kernel accepts an in-place write into shared memory that its CPU
        # kernel refuses: its bits are its order of writes, so only the object is judged.
        if actual is not call.impl_args[name]:
            return _fail("mismatch", "inplace:returned",
                         f"the in-place op returned another tensor, not its {name}", case,
                         {"tensor": name})
        return Verdict("pass", "error-parity", "aten accepts this Case on this device; "
                       "elements share memory, so their bits are not compared", case)
    found = _compare(case, call.ref_result, actual, "aten")
    return found or Verdict("pass", "error-parity", "aten accepts this Case", case)


def _parity_of_raise(case: Case, exc: BaseException, ref_exc: BaseException,
                     strict: bool) -> Verdict:
    """Both raised: judge the implementation's exception by the Case's invalid class."""
    details = _raised_details(exc, ref_exc)
    if is_binding_class(case.invalid):
        details["level"] = "binding"
        if strict and not binding_type_ok(exc):
            return _fail("error-parity", "error-parity",
                         f"impl raised {type(exc).__name__}; at the binding level torch "
                         "raises TypeError, ValueError or RuntimeError (--diagfuzz-strict)",
                         case, details)
        return Verdict("pass", "error-parity", "", case, details)
    details["level"] = "value"
    matched = raised_as(exc, type(ref_exc))
    if matched is None:
        return _fail("error-parity", "error-parity",
                     f"impl raised {type(exc).__name__}, aten raises "
                     f"{type(ref_exc).__name__}", case, details)
    if matched is not exc:
        details["unwrapped"] = type(matched).__name__
    return Verdict("pass", "error-parity", "", case, details)


def _twin_arguments(case: Case, args: dict[str, Any]) -> dict[str, Any]:
    """``arguments(case, device)`` again, from ``args`` (its first result), cheaper.

    Each tensor read is a copy of ``args``' one (its whole storage, bit for bit, viewed
    alike), ``out`` a new empty tensor like ``args``' one; the other arguments (ints and
    the ``input_sizes`` list, which no op changes) are shared. What ``materialise`` would
    make again, without the seeded random fill (about 15 us a Case of the invalid stream):
    the reference and the implementation still never share a buffer.
    """
    twin = dict(args)
    for name in read_tensors(case, args):
        tensor = args.get(name)
        if isinstance(tensor, torch.Tensor):
            storage = storage_bytes(tensor).clone()
            twin[name] = torch.empty(0, dtype=tensor.dtype, device=tensor.device).set_(
                storage.untyped_storage(), tensor.storage_offset(), tensor.shape,
                tensor.stride())
    out = args.get("out")
    if isinstance(out, torch.Tensor):
        twin["out"] = torch.empty(0, dtype=out.dtype, device=out.device)
    return twin


# --- comparison -------------------------------------------------------------------------

def _metadata(case: Case, expected: torch.Tensor, actual: Any,
              device: torch.device | None = None) -> Verdict | None:
    """Device (``device``; default ``expected``'s), dtype, shape, the reference's strides
    where they address anything (aten's layout: contiguous, or the input's for an op that
    clones its storage), the reference's storage offset (0, or the input's for such an
    op; the sentinel allocator's tensors start their storages as fresh ones do), no lazy
    conj/neg bit."""
    if not isinstance(actual, torch.Tensor):
        return _fail("mismatch", "metadata", f"impl returned {type(actual).__name__}, "
                     "not a Tensor", case)
    device = expected.device if device is None else device
    want = tuple(int(s) for s in expected.stride())
    offset = int(expected.storage_offset())
    if not (device == actual.device and expected.dtype == actual.dtype
            and expected.shape == actual.shape and _same_addressing(want, actual)
            and actual.storage_offset() == offset):
        found = _metadata_field(case, device, expected, actual, want, offset)
        if found:
            return found
    if actual.is_conj() or actual.is_neg():
        return _fail("mismatch", "metadata:lazy-bits", "result has a lazy conj/neg bit set",
                     case)
    return None


def _metadata_field(case: Case, device: torch.device, expected: torch.Tensor,
                    actual: torch.Tensor, want: tuple[int, ...],
                    offset: int = 0) -> Verdict | None:
    """The first of device, dtype, shape, strides that differs, as a Verdict."""
    for name, e, a in (
        ("device", str(device), str(actual.device)),
        ("dtype", str(expected.dtype), str(actual.dtype)),
        ("shape", list(expected.shape), list(actual.shape)),
        ("strides", list(want), list(actual.stride())),
        ("storage_offset", offset, actual.storage_offset()),
    ):
        if name == "strides" and _same_addressing(want, actual):
            continue
        if e != a:
            return _fail("mismatch", f"metadata:{name}",
                         f"{name} {a} differs from expected {e}", case,
                         {"field": name, "expected": e, "actual": a})
    return None


def _same_addressing(want: tuple[int, ...], actual: torch.Tensor) -> bool:
    """Whether ``actual``'s strides address its elements as the contiguous ``want`` does:
    strides of size-1 dims, and every stride of an empty tensor, move no address."""
    shape = tuple(actual.shape)
    return addressing_strides(shape, actual.stride()) == addressing_strides(shape, want)


def _bits(case: Case, expected: torch.Tensor, actual: torch.Tensor, source: str,
          sentinel: int | None = None) -> Verdict | None:
    """Raw bits (metadata already equal); elements holding the sentinel make it "unwritten"."""
    if same_bits(expected, actual):
        return None
    positions = differing(expected, actual)
    details = diff(expected, actual, positions, sentinel)
    # Most differing elements hold the sentinel: never written. (A few can hold it by
    # chance where a 1-byte dtype reads wrong elements: those are wrong values.)
    if sentinel is not None and 2 * details["sentinel_elements"] > details["differing"]:
        return _fail("unwritten", "sentinel",
                     f"{details['sentinel_elements']} of {expected.numel()} elements still hold "
                     f"the sentinel {details['sentinel']} (never written)", case, details)
    return _fail("mismatch", f"bitwise:{source}",
                 f"{len(positions)} of {expected.numel()} elements differ in bits from "
                 f"the {source} reference", case, details)


def _compare(case: Case, expected: torch.Tensor, actual: Any, source: str,
             sentinel: int | None = None) -> Verdict | None:
    """Metadata, then raw bits, of two tensors on one device."""
    return _metadata(case, expected, actual) or _bits(case, expected, actual, source, sentinel)


def _references_agree(case: Case, args: dict[str, Any] | Callable[[], dict[str, Any]],
                      expected: torch.Tensor, source: str) -> Verdict | None:
    """The host references must agree with each other before they can judge anything
    (``args`` a callable: fresh arguments for them, which an in-place op writes)."""
    given = args() if callable(args) else args
    for name, other in spec_of(case.op).others(case, given, source):
        found = _compare(case, expected, other, source)
        if found:
            return _disagree(case, name, source, found)
    return None


def _disagree(case: Case, name: str, source: str, found: Verdict) -> Verdict:
    return _fail("mismatch", f"reference:{name}-vs-{source}",
                 f"the {name} reference disagrees with the {source} reference: "
                 f"{found.message}", case, found.details)


# --- the device side --------------------------------------------------------------------

@dataclass
class DeviceRun:
    """One call of the implementation on the device, and host copies of what it left.

    The device tensors (``args``: the call's arguments; ``tensors``: what the op reads, by
    name; ``result``, ``out``, ``reference``) are kept for what the host knows without
    reading memory: metadata, data pointers, storage overlap. Their bytes are read only
    through the host copies (``*_host``, ``guards``).
    """

    args: dict[str, Any]
    tensors: dict[str, torch.Tensor]
    alloc: SentinelAllocations
    result: Any = None
    out: torch.Tensor | None = None
    raised: BaseException | None = None
    reference: torch.Tensor | None = None
    reference_raised: BaseException | None = None
    inputs_host: dict[str, torch.Tensor] = field(default_factory=dict)
    result_host: torch.Tensor | None = None
    reference_host: torch.Tensor | None = None
    guards: list[torch.Tensor | None] = field(default_factory=list)
    #: An in-place op's operand's version counter and storage (data pointer, bytes)
    #: before the call.
    version: int = 0
    storage: tuple[int, int] = (0, 0)

    @property
    def device(self) -> torch.device:
        return next(iter(self.tensors.values())).device


def _on_device(case: Case, host_args: dict[str, Any], device: str) -> dict[str, Any]:
    """``host_args`` with every tensor the op reads copied to ``device`` (whole storages)."""
    args = dict(host_args)
    for name, tensor in read_tensors(case, host_args).items():
        args[name] = to_device(tensor, device)
    return args


def device_side(impl: Any, case: Case, host_args: dict[str, Any], shape: torch.Size,
                byte: int, device: str, with_reference: bool) -> DeviceRun:
    """Everything the oracle does on the device for one run of the implementation.

    The storages the op reads go to the device (one copy each); aten's own kernel runs on
    them (the device reference, ``with_reference``); the implementation runs on them with
    sentinel-filled guarded allocations; then every storage the judgement reads comes back
    in one copy.
    """
    run = upload(case, host_args, byte, device, with_reference)
    if run.reference_raised is None:
        with run.alloc:
            call_impl(impl, case, run, shape)
        bring_back([run])
    return run


def upload(case: Case, host_args: dict[str, Any], byte: int, device: str,
           with_reference: bool) -> DeviceRun:
    """A run's inputs on the device and, ``with_reference``, aten's kernel on them."""
    args = _on_device(case, host_args, device)
    name = spec_of(case.op).inplace
    if name:  # the implementation writes a storage of its own, even on the CPU
        args = inplace.twin_arguments(args, name)
    run = DeviceRun(args, read_tensors(case, args), SentinelAllocations(byte))
    if with_reference:
        try:
            run.reference = spec_of(case.op).aten_kernel(
                case, inplace.twin_arguments(args, name) if name else args)
        except Exception as exc:  # aten refuses on this device: error parity decides
            run.reference_raised = exc
    return run


#: aten's warning for a non-empty ``out`` it resizes.
_RESIZED = "An output with one or more elements was resized"


def out_form(case: Case, shape: tuple[int, ...]) -> str:
    """A valid ``.out`` Case's ``out`` (``OUT_FORMS``): the one it draws, "fresh" where a
    result of ``shape`` has nothing to transpose."""
    form = drawn_out_form(case)
    if form == "transposed" and (len(shape) < 2 or min(shape[-2:]) < 2):
        return "fresh"  # nothing to transpose
    return form


def _swapped(shape: tuple[int, ...] | torch.Size) -> tuple[int, ...]:
    """``shape`` with its last two dims swapped (a transposed ``out``'s storage order)."""
    return (*shape[:-2], shape[-1], shape[-2])


def _out_tensor(case: Case, shape: torch.Size, device: torch.device) -> torch.Tensor:
    """The ``out`` of ``out_form`` (allocated inside the sentinel allocations)."""
    dtype = dtype_of(case.out_dtype or case.dtype)
    where = case.out_device or device
    form = out_form(case, tuple(shape))
    if form == "empty":
        return torch.empty(0, dtype=dtype, device=where)
    if form == "misshapen":
        return torch.empty(math.prod(shape) + 1, dtype=dtype, device=where)
    if form == "transposed":
        return torch.empty(_swapped(shape), dtype=dtype, device=where).transpose(-1, -2)
    return torch.empty(shape, dtype=dtype, device=where)


def _out_laid_out(case: Case, expected: torch.Tensor) -> torch.Tensor:
    """``expected`` laid out as aten leaves ``out_form``'s ``out``: its strides when it had
    the result's shape, contiguous when resized."""
    if out_form(case, tuple(expected.shape)) != "transposed":
        return expected.clone(memory_format=torch.contiguous_format)
    laid = torch.empty(_swapped(expected.shape), dtype=expected.dtype,
                       device=expected.device)
    return laid.transpose(-1, -2).copy_(expected)


def _storage_of(t: torch.Tensor) -> tuple[int, int]:
    storage = t.untyped_storage()
    return storage.data_ptr(), storage.nbytes()


def call_impl(impl: Any, case: Case, run: DeviceRun, shape: torch.Size) -> None:
    """The implementation's call of ``run``, inside active sentinel allocations."""
    args = run.args
    name = spec_of(case.op).inplace
    if name:
        run.version = args[name]._version
        run.storage = _storage_of(args[name])
    try:
        if "out" in args:
            run.out = args["out"] = _out_tensor(case, shape, run.device)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", _RESIZED, UserWarning)
            run.result = reference.call_op(impl, case, args)
    except Exception as exc:
        run.raised = exc


def bring_back(runs: list[DeviceRun]) -> None:
    """Host copies of every storage the judgement of ``runs`` reads: one copy (``to_host``)
    and one synchronisation for them all."""
    wanted: list[torch.Tensor] = []
    places = [_wanted(run, wanted) for run in runs]
    host = to_host(wanted)
    for run, (names, result, ref, buffers) in zip(runs, places, strict=True):
        run.inputs_host = {name: host[i] for name, i in names.items()}
        run.result_host = None if result is None else host[result]
        run.reference_host = None if ref is None else host[ref]
        run.guards = [None if i is None else host[i] for i in buffers]


def _wanted(run: DeviceRun, wanted: list[torch.Tensor]
            ) -> tuple[dict[str, int], int | None, int | None, list[int | None]]:
    """Append to ``wanted`` what ``run``'s judgement reads; where each went."""
    def on_device(t: Any) -> bool:
        return (isinstance(t, torch.Tensor) and t.layout == torch.strided
                and t.device == run.device)

    names = {}
    for name, tensor in run.tensors.items():  # the inputs-unchanged check reads them
        names[name] = len(wanted)
        wanted.append(storage_bytes(tensor))
    result = ref = None
    if on_device(run.result):
        result = len(wanted)
        wanted.append(run.result)
    if run.reference is not None and on_device(run.reference):
        ref = len(wanted)
        wanted.append(run.reference)
    buffers: list[int | None] = []
    for a in run.alloc.allocations:
        buffers.append(None if a.regrown() else len(wanted))
        wanted += [] if a.regrown() else [a.buffer]
    return names, result, ref, buffers


# --- the valid path (host side) ---------------------------------------------------------

def _changed_words(now: torch.Tensor, before: torch.Tensor, dtype: torch.dtype) -> list[int]:
    """Storage word indices (words of ``dtype``'s width) whose bytes differ."""
    width = min(dtype.itemsize, 8)  # complex128 is two int64 words
    changed = (now != before).nonzero().reshape(-1) // width
    return changed.unique().tolist()


def _guards_broken(case: Case, run: DeviceRun) -> Verdict | None:
    """The implementation wrote outside a buffer it allocated (guard bytes changed)."""
    violations = run.alloc.guard_violations(run.guards)
    if not violations:
        return None
    return _fail("mismatch", "out-of-bounds",
                 f"{len(violations)} buffer(s) written outside their bounds (guard bytes "
                 "changed)", case, {"buffers": violations})


def _judge(case: Case, tensors: dict[str, torch.Tensor], snapshots: dict[str, torch.Tensor],
           expected: torch.Tensor, source: str, run: DeviceRun) -> Verdict | None:
    """The implementation's run, judged on host copies (see the module docstring)."""
    found = _guards_broken(case, run)
    if found:
        return found
    for name, snapshot in snapshots.items():
        if not torch.equal(run.inputs_host[name], snapshot):
            changed = _changed_words(run.inputs_host[name], snapshot, tensors[name].dtype)
            return _fail("mismatch", "input-unchanged",
                         f"the implementation wrote {len(changed)} word(s) of {name}'s "
                         "storage", case, {"tensor": name, "storage_words": changed[:8]})
    result = run.result
    if isinstance(result, torch.Tensor):
        for name, tensor in run.tensors.items():
            if storages_overlap(result, tensor):
                return _fail("alias", "alias",
                             f"result shares storage with {name}: the op returns a new "
                             "tensor", case, {"tensor": name})
    # An .out call writes into the out it is given (``out_form``): the result has out's
    # layout, not the functional result's.
    laid_out = _out_laid_out(case, expected) if run.out is not None else expected
    found = _metadata(case, laid_out, result, run.device)
    if found:
        if run.out is not None:
            found.details["out"] = out_form(case, tuple(expected.shape))
        return found
    if run.out is not None and result.data_ptr() != run.out.data_ptr():
        return _fail("mismatch", "out-returned", "the .out overload did not return out",
                     case)
    assert run.result_host is not None  # a Tensor result on the device: brought back
    found = _bits(case, expected, run.result_host, source, run.alloc.byte)
    broken = _relations(case, tensors, run.result_host)
    if found and run.out is not None:
        found.details["out"] = out_form(case, tuple(expected.shape))
    if found:
        if broken:
            found.details["also_breaks"] = broken[0]
        return found
    if broken:
        return _fail("mismatch", broken[0], broken[1], case, broken[2])
    return None


def _judge_inplace(plan: ValidPlan, run: DeviceRun) -> Verdict | None:
    """An in-place op's run, judged on host copies: it returned its input object, whose
    view holds the reference's bits, whose storage outside the view holds its own, and
    whose version counter moved (the module docstring of ``oracles/inplace.py``)."""
    case, expected, source = plan.case, plan.expected, plan.source
    name = spec_of(case.op).inplace
    found = _guards_broken(case, run)
    if found:
        return found
    given = run.args[name]
    if run.result is not given:
        what = ("a new tensor sharing its storage"
                if isinstance(run.result, torch.Tensor) and storages_overlap(run.result, given)
                else type(run.result).__name__ if not isinstance(run.result, torch.Tensor)
                else "a new tensor")
        return _fail("mismatch", "inplace:returned",
                     f"the in-place op returned {what}, not its {name} (the very tensor)",
                     case, {"tensor": name, "returned": what})
    if _storage_of(given) != run.storage:
        return _fail("mismatch", "inplace:storage",
                     f"the in-place op gave {name} another storage (set_, .data =): other "
                     "views of its memory never see the write", case, {"tensor": name})
    found = _metadata(case, expected, given, run.device)
    if found:
        return found
    after = run.inputs_host[name]
    if plan.overlap_values is not None:
        wrong = inplace.overlap_violations(plan.tensors[name], after, plan.overlap_values)
        if wrong:
            return _fail("mismatch", "inplace:overlap",
                         f"{len(wrong)} memory location(s) of {name}'s view, whose elements "
                         "share memory, do not hold what the op gives an element there",
                         case, {"tensor": name, "storage_elements": wrong[:8]})
        outside = inplace.outside_view(plan.tensors[name], plan.snapshots[name], after)
    else:
        assert run.result_host is not None
        found = _bits(case, expected, run.result_host, source)
        if found:
            return found
        outside = inplace.outside_view(expected, storage_bytes(expected), after)
    if outside:
        return _fail("mismatch", "inplace:outside-view",
                     f"the in-place op wrote {len(outside)} element(s) of {name}'s storage "
                     "outside its view", case, {"tensor": name,
                                                "storage_elements": outside[:8]})
    if given._version == run.version:
        return _fail("mismatch", "inplace:version",
                     f"{name}'s version counter did not move: autograd cannot see the write",
                     case, {"tensor": name, "version": run.version})
    # The relations hold of each element: not where elements share memory.
    broken = (None if plan.overlap_values is not None or run.result_host is None
              else _relations(case, plan.tensors, run.result_host))
    if broken:
        return _fail("mismatch", broken[0], broken[1], case, broken[2])
    return None


def _relations(case: Case, tensors: dict[str, torch.Tensor],
               result: torch.Tensor) -> tuple[str, str, dict[str, Any]] | None:
    """The first metamorphic relation of the op's spec that ``result`` breaks."""
    for relation in spec_of(case.op).relations:
        broken = relation.check(case, tensors, result)
        if broken:
            return relation.name, broken[0], broken[1]
    return None


def _device_reference_agrees(case: Case, expected: torch.Tensor, source: str,
                             run: DeviceRun) -> Verdict | None:
    """aten's kernel on the device gives the CPU reference's metadata and bits."""
    found = _metadata(case, expected, run.reference, run.device)
    if found is None and run.reference_host is not None:
        found = _bits(case, expected, run.reference_host, source)
    return _disagree(case, "device", source, found) if found else None


def _reference_changed_by_impl(case: Case, host: dict[str, Any], expected: torch.Tensor,
                               source: str, device: str, found: Verdict) -> Verdict:
    """A disagreeing device reference, told apart from a stray write of the impl.

    The device reference is computed before the implementation runs and read back after
    it; a write outside the impl's own buffers (beyond the guard bytes) can land in it.
    Only on disagreement (the failure path), aten's kernel runs again on fresh copies of
    the inputs, alone: if that agrees, the implementation changed memory it did not own.
    """
    args = _on_device(case, host, device)
    name = spec_of(case.op).inplace
    try:
        alone = spec_of(case.op).aten_kernel(
            case, inplace.twin_arguments(args, name) if name else args)
    except Exception:
        return found
    (alone_host,) = to_host([alone])
    device_of = next(iter(read_tensors(case, args).values())).device
    if _metadata(case, expected, alone, device_of) or _bits(case, expected, alone_host,
                                                             source):
        return found  # aten's device kernel itself disagrees: a reference problem
    return _fail("mismatch", "out-of-bounds",
                 "the implementation wrote outside its buffers: aten's device result, "
                 "computed before it ran, changed while it ran (alone, it agrees)",
                 case, {"buffers": [], "foreign": "device reference",
                        "evidence": found.details})


def _raised(case: Case, exc: BaseException) -> Verdict:
    return _fail("error-parity", "error-parity",
                 f"impl raised {type(exc).__name__} where aten returns a result",
                 case, {"actual": _exception(exc)})


def served(case: Case, impl: Any) -> int:
    """The dispatch proof's counter so far: calls of the kernels a ``registered:`` library
    registered, else launches of the op's Triton kernels (diagfuzz's own registration)."""
    calls = getattr(impl, "calls", None)
    if getattr(impl, "registered_package", None) and callable(calls):
        return int(calls())
    return sum(counters.launches(kernel) for kernel in spec_of(case.op).launch_counters)


def dispatch_unproven(case: Case, impl: Any, expected: torch.Tensor,
                      before: int, after: int | None = None) -> Verdict | None:
    """The dispatch proof: an impl that calls through a registration (diagfuzz's own, or a
    ``registered:`` library's) must have run a kernel of it between ``before`` and
    ``after`` (``served``; ``after`` None: now), unless the result is empty. A call aten
    served is "not reached": never a pass."""
    if expected.numel() == 0:
        return None
    package = getattr(impl, "registered_package", None)
    counters = spec_of(case.op).launch_counters
    if not package and not (getattr(impl, "uses_triton_registration", False) and counters):
        return None
    if (served(case, impl) if after is None else after) != before:
        return None
    if package:
        return _fail("dispatch", "not-reached",
                     f"not reached: no kernel {package} registered ran, aten served the "
                     f"{case.op} call", case, {"library": package, "calls": before})
    kernels = " or ".join(counters)
    return _fail("dispatch", "dispatch",
                 f"the Triton {kernels} kernel did not run: aten served the call",
                 case, {"kernel": kernels, "launches": before})


@dataclass
class ValidPlan:
    """A valid Case between its host references and its runs on the device.

    ``sentinels``: one byte no reference element repeats, or two where all 256 occur
    (``sentinel.py``); ``launches``: the dispatch proof's counter before and after the
    implementation's calls (``after`` None while they are not over).
    """

    case: Case
    host: dict[str, Any]
    expected: torch.Tensor
    source: str
    tensors: dict[str, torch.Tensor]
    snapshots: dict[str, torch.Tensor]
    sentinels: list[int]
    before: int = 0
    after: int | None = None
    #: An in-place op on a view whose elements share memory: what the op gives each
    #: element (``inplace.overlap_violations``); its bits are then order-free only there.
    overlap_values: torch.Tensor | None = None


def _out_skipped(case: Case, impl: Any) -> Verdict | None:
    """A ``.out`` Case of an impl without that ``.out`` method is unsupported: counted
    apart, never a pass, and no combination it holds counts as reached."""
    if (case.out_dtype or case.out_device) and not _has_out(impl, case):
        method = f"{spec_of(case.op).method_name}_out"
        return Verdict("unsupported", "capability", f"the impl has no {method}", case,
                       {"skipped": "out"})
    return None


def plan_valid(case: Case, host: dict[str, Any]) -> ValidPlan | Verdict | None:
    """The host side of a valid Case, on ``host`` (``arguments(case, "cpu")``): the
    references and their agreement, input snapshots, the sentinel bytes. A Verdict when the
    references disagree; None when aten refuses the Case (error parity decides). Runs
    inside the caller's ``aten_only`` block."""
    spec = spec_of(case.op)
    name = spec.inplace
    # An in-place op's references write twins of its input (oracles/inplace.py).
    given = (lambda: inplace.twin_arguments(host, name)) if name else (lambda: host)
    overlap = bool(name) and inplace.overlaps(host[name])
    try:
        if overlap:  # order-free values: the op on a copy whose elements own their memory
            args = dict(host, **{name: host[name].contiguous()})
            values = spec.reference(case, args)[0].clone()
        expected, source = spec.reference(case, given())
    except Exception:  # aten refuses a Case not marked invalid: parity decides
        return None
    found = None if overlap else _references_agree(case, given, expected, source)
    if found:
        return found
    tensors = read_tensors(case, host)
    # On the CPU the device inputs are this memory.
    snapshots = {name: storage_bytes(t).clone() for name, t in tensors.items()}
    byte = choose_sentinel(expected)
    # All 256 byte values occur: two runs with different sentinels (see sentinel.py).
    sentinels = [byte] if byte is not None else list(PREFERRED[:2])
    plan = ValidPlan(case, host, expected, source, tensors, snapshots, sentinels)
    if overlap:
        plan.overlap_values = values
    return plan


def judge_runs(plan: ValidPlan, runs: Iterable[DeviceRun], impl: Any, device: str,
               strict: bool) -> Verdict:
    """The verdict of a valid Case from its runs, in order (the first with the device
    reference), first failure wins: a single judgement makes each run only when the one
    before passed (``runs`` a generator), a batch made them all before."""
    case, expected, source = plan.case, plan.expected, plan.source
    for n, run in enumerate(runs):
        if run.reference_raised is not None:
            return check_error_parity(case, impl, device, strict=strict)
        found = (_device_reference_agrees(case, expected, source, run)
                 if n == 0 and plan.overlap_values is None else None)
        if found:
            return _reference_changed_by_impl(case, plan.host, expected, source, device,
                                              found)
        if run.raised is not None:
            return _raised(case, run.raised)
        found = (_judge_inplace(plan, run) if spec_of(case.op).inplace else
                 _judge(case, plan.tensors, plan.snapshots, expected, source, run))
        if found:
            return found
    found = dispatch_unproven(case, impl, expected, plan.before, plan.after)
    if found:
        return found
    return Verdict("pass", "all", "", case, {"reference": source,
                                             "sentinel": f"0x{plan.sentinels[0]:02x}"})


@judged
def check_valid(case: Case, impl: Any, device: str, *, strict: bool = False) -> Verdict:
    """A valid Case: the full bitwise judgement (see the module docstring)."""
    skipped = _out_skipped(case, impl)
    if skipped:
        return skipped
    host = arguments(case, "cpu")  # the one materialisation; the device gets a copy
    with aten_only():
        plan = plan_valid(case, host)
    if plan is None:
        return check_error_parity(case, impl, device, strict=strict)
    if isinstance(plan, Verdict):
        return plan
    plan.before = served(case, impl)
    shape = plan.expected.shape
    runs = (device_side(impl, case, host, shape, sentinel, device, with_reference=n == 0)
            for n, sentinel in enumerate(plan.sentinels))
    return judge_runs(plan, runs, impl, device, strict)


@judged
def check(case: Case, impl: Any, device: str = DEVICE, *, strict: bool = False) -> Verdict:
    """Judge ``impl`` on ``case``: error parity for invalid Cases, the full check otherwise.

    A Case outside what the implementation declares it supports (``diagfuzz.impl.
    unsupported``: an op it does not provide, a dtype it does not list, its ``supports``
    hook) is "unsupported", not run. ``strict`` ignores declarations (every Case runs and is
    judged) and demands the public bindings' exception types for binding-level classes.
    """
    refused = capability_refusal(case, impl, strict)
    if refused:
        return refused
    if case.invalid:
        return check_error_parity(case, impl, device, strict=strict)
    return check_valid(case, impl, device, strict=strict)


def capability_refusal(case: Case, impl: Any, strict: bool) -> Verdict | None:
    """"unsupported" for a Case outside what the impl declares (``strict``: only an op it
    does not provide); None for a Case to judge."""
    if not strict:
        reason = unsupported(impl, case)
        if reason:
            return Verdict("unsupported", "capability", reason, case)
    elif not provides(impl, case.op):
        return Verdict("unsupported", "capability", f"the impl provides no {case.op}", case)
    return None


__all__ = ["check", "check_error_parity", "check_valid"]
