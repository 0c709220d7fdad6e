"""The judgement runs on host copies, and stays as strict as when it read device memory.

On the CPU the oracle's copies to and from the device are no-ops (the same memory), so a
test here also runs with an *emulated* device: ``to_device`` makes a real copy of the input's
storage, and ``to_host`` copies every storage back and then scribbles over the "device"
memory it copied from (on a GPU: the real copies, and the same scribbling). A verdict that
still read device memory after the copy back would change; the verdicts below are the same
with and without the emulation. The faults are the mutants of tests/mutants, on fixed Cases.
"""

from __future__ import annotations

import importlib
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import diagfuzz.ops as ops
from diagfuzz import oracles
from diagfuzz.core.case import Case, Layout, Values, upload
from diagfuzz.core.verdict import Verdict
from diagfuzz.core.words import as_words
from diagfuzz.impl import aten, triton_aten
from diagfuzz.oracles import checks, transfer
from diagfuzz.oracles.sentinel import SentinelAllocations
from diagfuzz.oracles.transfer import host_view, storage_bytes
from diagfuzz.specs import index_reference, spec_of

DEVICE = ops.DEVICE
SCRIBBLE = 0x77


def patch_aten_kernel(monkeypatch: pytest.MonkeyPatch, replace_with: Any) -> Any:
    """Make the oracle use ``replace_with(real, case, args)`` as every op's device reference
    (each spec's ``aten_kernel``); returns nothing useful: the patch undoes itself."""
    import dataclasses

    from diagfuzz.oracles import checks
    from diagfuzz.specs import spec_of

    def patched(op: str) -> Any:
        spec = spec_of(op)
        return dataclasses.replace(
            spec, aten_kernel=lambda case, args: replace_with(spec.aten_kernel, case, args))

    monkeypatch.setattr(checks, "spec_of", patched)


def fwd(sizes: tuple[int, ...] = (4, 5), offset: int = 1, dtype: str = "float32",
        **values: Any) -> Case:
    return Case("diagonal", sizes, offset, 0, 1, dtype, Layout.contiguous(sizes),
                Values(**values))


def bwd(sizes: tuple[int, ...] = (3, 4), offset: int = 0, dtype: str = "float32",
        dim1: int = 0, dim2: int = 1) -> Case:
    geo = index_reference.geometry(sizes, offset, dim1, dim2)
    return Case("diagonal_backward", sizes, offset, dim1, dim2, dtype,
                Layout.contiguous(geo.shape), Values(seed=5))


def mutant(name: str) -> Any:
    return importlib.import_module(f"tests.mutants.{name}").impl


def _copy(t: torch.Tensor) -> torch.Tensor:
    """``t``'s geometry over a fresh copy of its whole storage."""
    return host_view(storage_bytes(t).clone(), t)


@pytest.fixture(params=[False, True], ids=["cpu", "emulated-device"])
def emulated(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """With ``True``: copies both ways are real, device memory is scribbled after the copy.

    On a GPU the copies are real already; the scribbling still proves the judgement never
    reads device memory after the copy back.
    """
    if request.param:
        def to_host(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
            # The device path of to_host (join, one copy per device, aligned views), with
            # a copy that also copies host memory (a real GPU copies its own to the host).
            copies = transfer.to_host(tensors, lambda joined: joined.to("cpu", copy=True),
                                      keep_host=False)
            for t in tensors:  # the device memory, no longer to be read by anyone
                storage_bytes(t).fill_(SCRIBBLE)
            return copies

        if torch.device(DEVICE).type == "cpu":  # on a real device the copy there is real
            monkeypatch.setattr(checks, "to_device", lambda t, device: _copy(t))
        monkeypatch.setattr(checks, "to_host", to_host)
    return request.param


def assert_fails(verdict: Verdict, kind: str, check: str) -> None:
    assert (verdict.kind, verdict.check) == (kind, check), str(verdict)
    assert Verdict.from_json(verdict.to_json()) == verdict


@pytest.mark.parametrize("case", [
    fwd(), fwd((2, 3, 4), -1, "complex128", mode="bits"), fwd((4, 4), 0, "bool"),
    fwd((5, 3), 7), bwd(), bwd((3, 4, 5), 1, "float16", 0, 2), bwd((4, 3), -2, "int64"),
    fwd((3, 4), 1).replace(out_dtype="float32"),
], ids=lambda c: c.describe())
@pytest.mark.parametrize("impl", [aten, triton_aten], ids=["aten", "triton_aten"])
def test_correct_impls_pass(emulated: bool, impl: Any, case: Case) -> None:
    verdict = oracles.check(case, impl, DEVICE)
    assert verdict.ok, str(verdict)


@pytest.mark.parametrize("name, case, kind, check", [
    ("unwritten_last", fwd((4, 5)), "unwritten", "sentinel"),
    ("unwritten_last", fwd((2, 3, 4), 0, "complex128"), "unwritten", "sentinel"),
    # Its backward zero-fills first: the unwritten diagonal element holds 0, not grad.
    ("unwritten_last", bwd((4, 4)), "mismatch", "bitwise:autograd"),
    ("overruns_buffer", bwd((3, 4)), "mismatch", "out-of-bounds"),
    ("overruns_buffer", fwd((4, 5)), "mismatch", "out-of-bounds"),
    ("mutates_input", fwd((4, 5)), "mismatch", "input-unchanged"),
    ("aliases_input", fwd((4, 5)), "alias", "alias"),
    ("noncontiguous_result", bwd((3, 4)), "mismatch", "metadata:strides"),
    ("loses_negative_zero", fwd((3, 3), 0, specials=((4, 0x80000000),)),
     "mismatch", "bitwise:aten"),
])
def test_host_judgement_catches_the_mutant(emulated: bool, name: str, case: Case, kind: str,
                                           check: str) -> None:
    assert oracles.check(case, mutant("_base"), DEVICE).ok  # the mutants' correct base
    assert_fails(oracles.check(case, mutant(name), DEVICE), kind, check)


def test_evidence_names_the_unwritten_element_and_the_input_words(emulated: bool) -> None:
    verdict = oracles.check(fwd((2, 4, 5), 1), mutant("unwritten_last"), DEVICE)
    assert verdict.details["sentinel_elements"] == 1
    assert verdict.details["first"][0]["index"] == [4, 1]
    verdict = oracles.check(fwd((4, 5), 1), mutant("mutates_input"), DEVICE)
    assert verdict.details["storage_words"] == [1, 7, 13, 19]  # (0,1) (1,2) (2,3) (3,4)


def test_every_byte_value_occurring_still_runs_twice_and_catches(emulated: bool) -> None:
    specials = tuple((i * 257, i) for i in range(256))
    case = fwd((256, 256), 0, "uint8", specials=specials)
    assert oracles.check(case, aten, DEVICE).ok
    assert_fails(oracles.check(case, mutant("unwritten_last"), DEVICE), "unwritten",
                 "sentinel")


# --- the device reference ---------------------------------------------------------------

def _flip_first_bit(t: torch.Tensor) -> torch.Tensor:
    out = t.clone()
    as_words(out).reshape(out.numel(), -1)[0, 0] ^= 1
    return out


@pytest.mark.parametrize("case, source", [(fwd(), "aten"), (bwd(), "autograd"),
                                          (bwd(dtype="int32"), "aten")])
def test_a_disagreeing_device_reference_is_reported(monkeypatch: pytest.MonkeyPatch,
                                                    emulated: bool, case: Case,
                                                    source: str) -> None:
    patch_aten_kernel(monkeypatch,
                      lambda real, case, args: _flip_first_bit(real(case, args)))
    verdict = oracles.check(case, triton_aten, DEVICE)
    assert_fails(verdict, "mismatch", f"reference:device-vs-{source}")
    assert verdict.details["differing"] == 1


def test_device_reference_metadata_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    patch_aten_kernel(monkeypatch, lambda real, case, args: real(case, args).to(torch.float64))
    verdict = oracles.check(fwd(), aten, DEVICE)
    assert_fails(verdict, "mismatch", "reference:device-vs-aten")
    assert verdict.details["field"] == "dtype"


def test_device_reference_refusal_goes_to_error_parity(monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[str] = []

    def refuses(real: Any, case: Case, args: dict[str, Any]) -> torch.Tensor:
        ran.append(case.op)
        raise RuntimeError("not on this device")

    patch_aten_kernel(monkeypatch, refuses)
    verdict = oracles.check(fwd(), triton_aten, DEVICE)
    assert ran == ["diagonal"]
    assert (verdict.check, verdict.ok) == ("error-parity", True), str(verdict)


def test_device_reference_is_aten_whatever_the_registration() -> None:
    case = fwd((5, 6), -1)
    x = torch.randn(5, 6, device=DEVICE)
    with ops.use_triton(True):
        before = ops.launches("diagonal_copy")
        got = spec_of("diagonal").aten_kernel(case, {"input": x})
        assert ops.launches("diagonal_copy") == before  # no Triton kernel served it
    assert torch.equal(as_words(got), as_words(torch.diagonal(x, -1).contiguous()))
    grad = torch.randn(4, 5, device=DEVICE)
    with ops.use_triton(True):
        got = spec_of("diagonal_backward").aten_kernel(bwd((4, 5, 6), 0, dim1=1, dim2=2),
                                                       {"grad_output": grad})
    with ops.use_triton(False):
        want = torch.ops.aten.diagonal_backward(grad, [4, 5, 6], 0, 1, 2)
    assert torch.equal(as_words(got), as_words(want))


# --- what touches the device, and how often ---------------------------------------------

#: Ops whose result the host reads (a device synchronisation on a GPU).
SYNCS = {"equal", "_local_scalar_dense", "is_nonzero", "nonzero", "item", "masked_select",
         "_unique2", "allclose"}


class _Ops(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.names: Counter[str] = Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        self.names[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))


@pytest.fixture
def device_side_ops(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """Per call of ``device_side``: the aten ops it issued, copies there and back."""
    seen: dict[str, Any] = {"runs": 0, "to_device": 0, "to_host": 0, "ops": Counter()}
    real_side, real_there, real_back = checks.device_side, checks.to_device, checks.to_host

    def device_side(*args: Any, **kwargs: Any) -> Any:
        seen["runs"] += 1
        with _Ops() as mode:
            try:
                return real_side(*args, **kwargs)
            finally:
                seen["ops"].update(mode.names)

    def count(name: str, real: Any) -> Any:
        def counted(*args: Any) -> Any:
            seen[name] += 1
            return real(*args)
        return counted

    monkeypatch.setattr(checks, "device_side", device_side)
    monkeypatch.setattr(checks, "to_device", count("to_device", real_there))
    monkeypatch.setattr(checks, "to_host", count("to_host", real_back))
    yield seen


@pytest.mark.parametrize("case", [fwd(), bwd(), bwd((2, 3, 4), 1, "complex128", 0, 2)],
                         ids=lambda c: c.describe())
def test_one_copy_each_way_and_no_other_sync(device_side_ops: dict[str, Any],
                                            case: Case) -> None:
    assert oracles.check(case, aten, DEVICE).ok
    assert (device_side_ops["runs"], device_side_ops["to_device"],
            device_side_ops["to_host"]) == (1, 1, 1)
    assert not SYNCS & set(device_side_ops["ops"]), device_side_ops["ops"]


def test_two_sentinel_runs_make_two_round_trips(device_side_ops: dict[str, Any]) -> None:
    specials = tuple((i * 257, i) for i in range(256))
    assert oracles.check(fwd((256, 256), 0, "uint8", specials=specials), aten, DEVICE).ok
    assert (device_side_ops["runs"], device_side_ops["to_host"]) == (2, 2)


def test_only_the_implementation_allocates_under_the_sentinel(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The device reference allocates too, before the block: it must get plain memory.
    made: list[SentinelAllocations] = []
    real_enter = SentinelAllocations.__enter__

    def enter(self: SentinelAllocations) -> SentinelAllocations:
        made.append(self)
        return real_enter(self)

    monkeypatch.setattr(SentinelAllocations, "__enter__", enter)
    for case in (fwd(), bwd()):
        made.clear()
        assert oracles.check(case, aten, DEVICE).ok
        assert [len(a.allocations) for a in made] == [1]  # the result, nothing else


def _sentinel_registered() -> bool:
    dump = torch._C._dispatch_dump("aten::empty.memory_format")
    return any("sentinel.py" in line for line in dump.splitlines())


def test_gather_keeps_bits_geometry_and_alignment_of_every_dtype() -> None:
    base = torch.arange(7, dtype=torch.uint8)  # odd sizes: every later chunk needs padding
    wide = torch.randn(6, 5, dtype=torch.complex128)[1:, 2:].t()  # strided, offset
    halves = torch.randn(9).to(torch.float16)[3:]
    flags = torch.tensor([True, False, True])
    nothing = torch.empty(0, dtype=torch.float64)
    tensors = [base, wide, nothing, halves, wide[0], flags, base[2:5]]  # shared storages too
    joined: list[torch.Tensor] = []

    def copy(t: torch.Tensor) -> torch.Tensor:
        joined.append(t)
        return t.clone()

    copies = transfer.gather(tensors, copy)
    assert len(joined) == 1 and joined[0].numel() % transfer.ALIGN == 0
    for t, c in zip(tensors, copies, strict=True):
        assert (c.dtype, c.shape, c.stride()) == (t.dtype, t.shape, t.stride())
        assert c.untyped_storage().data_ptr() != t.untyped_storage().data_ptr()
        assert torch.equal(as_words(c.contiguous()), as_words(t.contiguous()))


def test_sentinel_override_is_registered_only_inside_the_block() -> None:
    assert not _sentinel_registered()
    with SentinelAllocations(0xA5) as alloc:
        assert _sentinel_registered()
        t = torch.empty(3, dtype=torch.int16)
    assert not _sentinel_registered()
    assert torch.equal(t.view(torch.uint8), torch.full((6,), 0xA5, dtype=torch.uint8))
    assert alloc.guard_violations() == []
    plain = torch.empty(3, dtype=torch.int16)
    assert plain.untyped_storage().nbytes() == 6  # no guards outside the block


def test_a_stray_write_into_the_device_reference_is_the_impls_out_of_bounds_write(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The device reference is computed before the impl runs and read back after it, so an
    impl writing far outside its buffers can change it. That is reported as the impl's
    out-of-bounds write (aten's kernel, run again alone, agrees), not as a reference
    disagreement that would point at aten or the harness."""
    made: list[torch.Tensor] = []

    def remembered(real: Any, case: Case, args: dict[str, Any]) -> torch.Tensor:
        made.append(real(case, args))
        return made[-1]

    patch_aten_kernel(monkeypatch, remembered)

    class StrayWrite:
        uses_triton_registration = False

        def diagonal(self, x, offset=0, dim1=0, dim2=1):
            made[0].view(-1)[0] += 1  # lands in the memory of the device reference
            return aten.diagonal(x, offset, dim1, dim2)

        def diagonal_backward(self, *args):
            raise NotImplementedError

    verdict = oracles.check(fwd(), StrayWrite(), DEVICE)
    assert_fails(verdict, "mismatch", "out-of-bounds")
    assert verdict.details["foreign"] == "device reference"
    assert len(made) == 2  # the reference, then aten's kernel alone on the failure path


def test_upload_keeps_every_bit_and_never_waits_for_a_gpu() -> None:
    nan_payload = torch.tensor([0x7FC12345, -0x80000000, 0x7F800001], dtype=torch.int32)
    tensors = [nan_payload.view(torch.float32), torch.tensor([True, False, True]),
               torch.randn(5, dtype=torch.complex128), torch.arange(9, dtype=torch.int8)]
    device = torch.device(ops.DEVICE)
    if device.type != "cuda":  # on the CPU it is no copy at all
        assert all(upload(t, device) is t for t in tensors)
        return
    for t in tensors:
        source = t.clone()
        torch.cuda.set_sync_debug_mode("error")  # a synchronising copy raises here
        try:
            there = upload(source, device)
        finally:
            torch.cuda.set_sync_debug_mode("default")
        as_words(source).fill_(0)  # changing the source at once must not reach the copy
        assert there.device.type == "cuda" and there.dtype == t.dtype
        assert torch.equal(as_words(there.cpu()), as_words(t))


def test_download_copies_every_bit_to_the_host() -> None:
    """On a GPU: every bit back, into pinned memory, a strided view included (the oracle's
    one copy back per Case). On the CPU: no copy at all, as ``.cpu()``."""
    words = torch.tensor([0x7FC12345, -0x80000000, 0x00000001, 0x7F800001], dtype=torch.int32)
    tensors = [words.view(torch.float32), torch.tensor([True, False]),
               torch.arange(12, dtype=torch.int8).reshape(3, 4)[:, 1::2],
               torch.empty(0, 3, dtype=torch.bfloat16)]
    if torch.device(ops.DEVICE).type != "cuda":
        assert all(transfer.download(t) is t for t in tensors)
        return
    for t in tensors:
        host = transfer.download(upload(t.contiguous(), ops.DEVICE)[..., :])
        # (A tensor of no bytes has no allocation to pin: torch reports it unpinned.)
        assert host.device.type == "cpu" and (host.is_pinned() or host.numel() == 0)
        assert host.shape == t.shape and host.dtype == t.dtype
        assert torch.equal(as_words(host.contiguous()), as_words(t.contiguous()))
    strided = upload(torch.arange(12, dtype=torch.int8), ops.DEVICE).reshape(3, 4)[:, 1::2]
    assert torch.equal(transfer.download(strided), torch.tensor([[1, 3], [5, 7], [9, 11]],
                                                               dtype=torch.int8))
