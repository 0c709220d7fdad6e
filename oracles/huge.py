"""The huge tier's oracle: one Case past 2**31 elements, judged on the device in chunks.

``check`` copies every storage to the host and judges there: at 2**31 elements and more
that is gigabytes of host memory and minutes per Case. ``check_huge`` keeps everything on
the device and lean: each input storage is made there chunk by chunk from its
``index_hash`` values (``diagfuzz.core.huge``), aten's own kernel is the
reference, the implementation runs on the same inputs after it, and the judgement reads
device memory in chunks: the inputs regenerated chunk by chunk and compared (no copy kept),
no aliasing, metadata (``checks._metadata``: device, dtype, shape, addressing strides,
storage offset, lazy bits), then the bits of every element. Only a handful of differing
elements ever reach the host. Not checked here, for memory: guard bytes and sentinel
allocations (a block of the result's size is filled with 0x5A bytes and freed just before
the implementation runs, so an element it never writes shows as a wrong one rather than a
stale right one), the CPU references (aten's device
kernel is the reference), the metamorphic relations. The dispatch proof is.

Every verdict carries the Case's memory in ``details``: the estimate checked against the
cap (``DIAGFUZZ_HUGE_MAX_GIB``; a Case above it is skipped, a pass with ``skipped``) and,
on a GPU, the peak the Case took (``torch.cuda.max_memory_allocated`` above what was held
before it). The device's cache is emptied after each Case, for the jobs beside it.
"""

from __future__ import annotations

import time
from math import prod
from typing import Any

import torch

from diagfuzz.core import huge
from diagfuzz.core.bits import diff, storages_overlap, unravel
from diagfuzz.core.case import Case, Layout, Values, dtype_of
from diagfuzz.core.dispatch import aten_only, judged
from diagfuzz.core.geometry import diagonal_of
from diagfuzz.core.runtime import DEVICE
from diagfuzz.core.verdict import Verdict
from diagfuzz.core.words import as_words
from diagfuzz.oracles import reference
from diagfuzz.oracles.checks import (
    _exception,
    _metadata,
    capability_refusal,
    check_error_parity,
    dispatch_unproven,
    served,
)
from diagfuzz.specs import arguments, spec_of

#: Differing elements brought to the host for a verdict's evidence (its symptom).
SAMPLE = 256
#: The byte freed memory holds when the implementation allocates its result (``_poison``).
POISON = 0x5A


def _fail(kind: str, check: str, message: str, case: Case,
          details: dict[str, Any] | None = None) -> Verdict:
    return Verdict(kind, check, message, case, details or {})


def operands(case: Case) -> list[tuple[str, Layout, Values]]:
    """Every tensor the op reads: (argument name, layout, values), in argument order."""
    first = spec_of(case.op).first.name
    return [(first, case.layout, case.values), *case.others]


def _reads(case: Case) -> dict[str, int]:
    return {name: max(layout.storage_size, 1) for name, layout, _ in operands(case)}


def result_elements(case: Case) -> int:
    """Elements of the result's storage: the tensor of ``Case.sizes`` or its diagonal (a
    storage as large as the input's for an op that clones it)."""
    spec = spec_of(case.op)
    if spec.full != "result":
        dim1, dim2 = spec.dims or (case.dim1, case.dim2)
        return prod(diagonal_of(case.sizes, case.offset, dim1, dim2).shape)
    reads = _reads(case)
    return max([prod(case.sizes), *(reads[o.name] for o in spec.operands if o.role == "full")])


def estimate_bytes(case: Case) -> int:
    """Device bytes the Case takes at most, as far as the oracle knows: the inputs'
    storages, the reference and the result, and the judgement's chunk temporaries."""
    item = dtype_of(case.dtype).itemsize
    reads = _reads(case)
    result = result_elements(case)
    largest = max([result, *reads.values()])
    return (sum(reads.values()) + 2 * result) * item + 4 * 8 * min(huge.CHUNK, largest)


def _build(case: Case, device: str) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """The tensors the op reads, made on ``device`` chunk by chunk, and their storages."""
    dtype = dtype_of(case.dtype)
    tensors, storages = {}, {}
    for name, layout, values in operands(case):
        if values.mode != "index_hash" or values.specials:
            raise ValueError(f"check_huge judges index_hash values without specials; "
                             f"{name} of {case.describe()} has {values.mode!r}")
        storage = huge.storage_of(dtype, values.seed, max(layout.storage_size, 1), device)
        storages[name] = storage
        tensors[name] = storage.as_strided(layout.shape, layout.strides,
                                           layout.storage_offset)
    return tensors, storages


def _poison(nbytes: int, device: str) -> None:
    """Fill a block of the result's size with POISON and free it: the implementation's
    allocation of that size gets it back (CUDA's caching allocator, the CPU's heap), so an
    element it never writes holds POISON, not the right value a previous run left there."""
    block = torch.empty(max(nbytes, 1), dtype=torch.uint8, device=device)
    block.fill_(POISON)
    del block


def _first_differing(ne: torch.Tensor) -> int:
    """The flat position of the first True of a contiguous bool tensor (which has one)."""
    return int(ne.reshape(-1).to(torch.uint8).argmax())


def _sample(expected: torch.Tensor, actual: torch.Tensor, d: int, start: int,
            ne: torch.Tensor) -> dict[str, Any]:
    """Evidence of the first chunk that differs: its first few differing elements (values,
    bits, index in the whole tensor) and the symptom of up to SAMPLE of them."""
    shape = tuple(ne.shape)
    flat = ne.reshape(-1)
    first = _first_differing(ne)
    window = flat[first:first + 64 * SAMPLE].nonzero().reshape(-1)[:SAMPLE] + first
    index = [unravel(int(p), shape) for p in window.tolist()]
    for i in index:
        i[d] += start
    columns = [torch.tensor([i[k] for i in index], device=expected.device)
               for k in range(expected.dim())]
    e, a = expected[tuple(columns)].cpu(), actual[tuple(columns)].cpu()
    found = diff(e, a, torch.arange(len(index)))
    for entry, where in zip(found["first"], index, strict=False):
        entry["index"] = where
    return found


def _bits(case: Case, expected: torch.Tensor, actual: torch.Tensor) -> Verdict | None:
    """Every element's bits, a slab of the longest dim at a time (metadata already
    equal, so the two address their elements alike)."""
    if expected.numel() == 0:
        return None
    if expected.dim() == 0:
        expected, actual = expected.reshape(1), actual.reshape(1)
    d = max(range(expected.dim()), key=lambda k: expected.shape[k])
    rest = expected.numel() // expected.shape[d]
    step = max(1, huge.CHUNK // max(rest, 1))
    total, evidence = 0, None
    for start in range(0, expected.shape[d], step):
        count = min(step, expected.shape[d] - start)
        e, a = expected.narrow(d, start, count), actual.narrow(d, start, count)
        ne = as_words(e) != as_words(a)
        if ne.dim() > e.dim():  # complex128: two words an element
            ne = ne.any(-1)
        n = int(ne.sum())
        if n and evidence is None:
            evidence = _sample(expected, actual, d, start, ne)
        total += n
    if not total:
        return None
    assert evidence is not None
    evidence.update(differing=total, numel=expected.numel())
    return _fail("mismatch", "bitwise:aten",
                 f"{total} of {expected.numel()} elements differ in bits from the aten "
                 "reference", case, evidence)


def _inputs_unchanged(case: Case, storages: dict[str, torch.Tensor]) -> Verdict | None:
    """Each input storage still holds its index_hash values (regenerated, chunk by chunk)."""
    for name, _, values in operands(case):
        first, changed = huge.first_change(storages[name], values.seed)
        if changed:
            return _fail("mismatch", "input-unchanged",
                         f"the implementation wrote {changed} word(s) of {name}'s storage",
                         case, {"tensor": name, "storage_words": [first],
                                "changed_words": changed})
    return None


def _judge(case: Case, impl: Any, device: str) -> Verdict:
    """Build, run the reference and the implementation, and judge (module docstring)."""
    spec = spec_of(case.op)
    tensors, storages = _build(case, device)
    args = arguments(case, device, tensors)
    try:
        with aten_only():
            expected = spec.aten_kernel(case, args)
        refused: BaseException | None = None
    except Exception as exc:  # aten refuses a Case not marked invalid: parity decides
        refused = exc
    _poison(result_elements(case) * dtype_of(case.dtype).itemsize, device)
    before = served(case, impl)
    try:
        actual = reference.call_op(impl, case, args)
    except Exception as exc:
        if refused is not None:
            return Verdict("pass", "error-parity", "aten refuses this Case too", case)
        return _fail("error-parity", "error-parity",
                     f"impl raised {type(exc).__name__} where aten returns a result",
                     case, {"actual": _exception(exc)})
    if refused is not None:
        return _fail("error-parity", "error-parity",
                     f"impl returned a result where aten raises {type(refused).__name__}",
                     case, {"expected": _exception(refused)})
    if isinstance(actual, torch.Tensor) and actual.device.type == "cuda":
        torch.cuda.synchronize(actual.device)
    found = _inputs_unchanged(case, storages)
    if found:
        return found
    if isinstance(actual, torch.Tensor):
        for name, tensor in tensors.items():
            if storages_overlap(actual, tensor):
                return _fail("alias", "alias", f"result shares storage with {name}: the op "
                             "returns a new tensor", case, {"tensor": name})
    # The inputs' device ("cuda:0"), not the name asked for ("cuda"): they differ as values.
    where = next(iter(tensors.values())).device
    found = (_metadata(case, expected, actual, where) or _bits(case, expected, actual)
             or dispatch_unproven(case, impl, expected, before))
    if found:
        return found
    return Verdict("pass", "huge", "", case, {"reference": "aten (device)"})


def _gib(n: float) -> float:
    return round(n / 2**30, 3)


@judged
def check_huge(case: Case, impl: Any, device: str = DEVICE, *,
               strict: bool = False) -> Verdict:
    """Judge ``impl`` on a huge Case on ``device`` (module docstring): capability first,
    as ``check`` does; a skipped Case (no CUDA GPU and the threshold not lowered, or an
    estimate above the memory cap) passes with ``details["skipped"]``."""
    refused = capability_refusal(case, impl, strict)
    if refused:
        return refused
    if case.invalid:
        return check_error_parity(case, impl, device, strict=strict)
    estimate = estimate_bytes(case)
    memory: dict[str, Any] = {"estimate_gib": _gib(estimate), "peak_gib": None}
    skip = huge.skip_reason(device)
    if not skip and estimate > huge.max_bytes():
        skip = (f"its estimate {_gib(estimate)} GiB exceeds the cap {_gib(huge.max_bytes())} "
                f"GiB ({huge.MAX_GIB_ENV})")
    if skip:
        return Verdict("pass", "huge", f"skipped: {skip}", case, {"skipped": skip, **memory})
    cuda = torch.device(device).type == "cuda"
    if cuda:
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        held = torch.cuda.memory_allocated(device)
    started = time.perf_counter()
    try:
        verdict = _judge(case, impl, device)
    finally:
        if cuda:
            torch.cuda.synchronize(device)
            memory["peak_gib"] = _gib(torch.cuda.max_memory_allocated(device) - held)
    memory["seconds"] = round(time.perf_counter() - started, 3)
    if cuda:
        torch.cuda.empty_cache()  # the tensors died with _judge: give the memory back
    verdict.details.update(memory)
    return verdict


__all__ = ["check_huge", "estimate_bytes"]
