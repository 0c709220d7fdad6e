"""diag_embed, diagonal_scatter, diag, triu and tril: the kernels equal aten bitwise over
hand-written tables (tests/family_table.py), with their .out overloads (triu's and tril's
in-place forms too), errors and launch counts.

aten runs with the registration off; ours is called directly (the registration's own tests
are in test_registration_family.py). diagonal_scatter results are compared storage and all:
aten clones the input's whole storage, and so must we.
"""

from __future__ import annotations

import itertools
import warnings

import pytest
import torch

import diagfuzz.ops as ops
from diagfuzz.core.case import available_dtypes
from tests.bitwise import bitwise_difference
from tests.family_table import (
    TRIANGLES,
    Row,
    diag_rows,
    embed_rows,
    inputs,
    scatter_rows,
    storage_difference,
    tensor,
    triangle_rows,
)
from tests.kernel_table import INT64_MAX, INT64_MIN

ATEN = {
    "diag_embed": lambda x, row: torch.ops.aten.diag_embed(x, row.offset, *row.dims),
    "diagonal_scatter": lambda x, src, row: torch.ops.aten.diagonal_scatter(
        x, src, row.offset, *row.dims),
    "diag": lambda x, row: torch.diag(x, row.offset),
    "triu": lambda x, row: torch.ops.aten.triu(x, row.offset),
    "tril": lambda x, row: torch.ops.aten.tril(x, row.offset),
}
OURS = {
    "diag_embed": lambda x, row: ops.diag_embed(x, row.offset, *row.dims),
    "diagonal_scatter": lambda x, src, row: ops.diagonal_scatter(x, src, row.offset,
                                                                 *row.dims),
    "triu": lambda x, row: ops.triu(x, row.offset),
    "tril": lambda x, row: ops.tril(x, row.offset),
}


def _difference(actual: torch.Tensor, expected: torch.Tensor, row: Row) -> str:
    diff = bitwise_difference(actual, expected)
    if not diff and row.op == "diagonal_scatter":
        diff = storage_difference(actual, expected)
    return diff


@pytest.mark.parametrize("row", embed_rows() + scatter_rows() + triangle_rows(),
                         ids=Row.describe)
def test_kernel_matches_aten_bitwise(row: Row) -> None:
    tensors = inputs(row)
    with ops.use_triton(False):
        expected = ATEN[row.op](*tensors, row)
    before = ops.launches(row.op)
    actual = OURS[row.op](*tensors, row)
    assert _difference(actual, expected, row) == "", row.describe()
    # One launch whenever the result has storage to write, none otherwise.
    assert ops.launches(row.op) - before == int(actual.untyped_storage().nbytes() > 0)


@pytest.mark.parametrize("row", embed_rows()[::5] + scatter_rows()[::4], ids=Row.describe)
def test_out_overload_matches_aten_bitwise(row: Row) -> None:
    """Into an empty ``out`` (resized, contiguous: the one-launch path) and into an ``out``
    of the right shape laid out transposed (aten's copy of the functional result)."""
    tensors = inputs(row)
    overload = getattr(torch.ops.aten, row.op).out
    ours = getattr(ops, f"{row.op}_out")
    args = (*tensors, row.offset, *row.dims)
    with ops.use_triton(False):
        expected = overload(*args, out=torch.empty(0, dtype=tensors[0].dtype,
                                                   device=ops.DEVICE))
    def empty_out() -> torch.Tensor:
        return torch.empty(0, dtype=expected.dtype, device=ops.DEVICE)

    def transposed_out() -> torch.Tensor:
        return torch.empty(tuple(reversed(expected.shape)), dtype=expected.dtype,
                           device=ops.DEVICE).permute(*reversed(range(expected.dim())))

    for make_out in (empty_out, transposed_out):
        with ops.use_triton(False):
            aten_out = overload(*args, out=make_out())
        out = make_out()
        result = ours(*args, out=out)
        assert result is out
        assert bitwise_difference(out, aten_out) == "", row.describe()
        contiguous = expected.new_empty(expected.shape).copy_(out)
        assert bitwise_difference(contiguous, expected) == "", row.describe()


@pytest.mark.parametrize("row", diag_rows(), ids=Row.describe)
def test_diag_reaches_our_kernels_and_matches_aten(row: Row) -> None:
    """torch.diag is CompositeImplicitAutograd: with the registration on it runs
    diag_embed (1-D) or diagonal_copy (2-D) as our kernels."""
    (x,) = inputs(row)
    with ops.use_triton(False):
        expected = torch.diag(x, row.offset)
    op = "diag_embed" if x.dim() == 1 else "diagonal_copy"
    before = ops.launches(op)
    with ops.use_triton():
        actual = torch.diag(x, row.offset)
    assert bitwise_difference(actual, expected) == "", row.describe()
    assert ops.launches(op) - before == int(actual.numel() > 0)


def test_scatter_result_layouts_are_atens() -> None:
    """Sizes, strides, storage offset and storage size as aten's clone_preserve_strides
    makes them: the input's for every layout but an expanded one, whose clone is dense."""
    cases = {
        "contiguous": tensor((4, 6)),
        "permuted": tensor((4, 6), "permuted"),
        "sliced": tensor((2, 3), "sliced"),
        "offset": tensor((3, 4), "offset"),
        "storage": tensor((3, 4), "storage"),
        "expanded": tensor((3, 4), "expanded"),
        "channels_last": tensor((2, 3, 4, 5), "channels_last"),
        "expanded channels_last": tensor((2, 3, 4, 5), "channels_last")[:, :, :1].expand(
            2, 3, 4, 5),
        "empty with zero strides": tensor((4, 1, 3), "expanded")[:0],
    }
    for name, x in cases.items():
        src = torch.ones(x.diagonal().shape, dtype=x.dtype, device=ops.DEVICE)
        with ops.use_triton(False):
            expected = torch.diagonal_scatter(x, src)
        actual = ops.diagonal_scatter(x, src)
        assert (actual.stride(), actual._is_view()) == (expected.stride(), False), name
        assert _difference(actual, expected, Row("diagonal_scatter", (), 0, ())) == "", name
        if name.startswith("expanded"):  # aten's clone: dense, in the input's stride order
            assert actual.storage_offset() == 0
            assert actual.untyped_storage().nbytes() == actual.numel() * actual.element_size()
        else:  # aten's clone of the whole storage, viewed as the input
            assert (actual.stride(), actual.storage_offset()) == (x.stride(),
                                                                  x.storage_offset())
            assert actual.untyped_storage().nbytes() == x.untyped_storage().nbytes()


def test_scatter_of_unordered_and_repeating_diagonals() -> None:
    """Layouts only ``as_strided`` makes: a diagonal whose positions do not grow with its
    index (every program scans it whole) matches aten; one whose positions repeat (aten's
    result depends on its copy_'s write order) is refused."""
    base = torch.arange(100.0, device=ops.DEVICE)
    for sizes, strides in (((2, 2, 3), (1, 2, 2)), ((3, 3, 4), (1, 2, 5)),
                           ((3, 3), (1, 1))):  # the last: its view overlaps, its diagonal not
        x = base.as_strided(sizes, strides, 1)
        src = -torch.arange(1.0, 1 + x.diagonal().numel(), device=ops.DEVICE).reshape(
            x.diagonal().shape)
        with ops.use_triton(False):
            expected = torch.diagonal_scatter(x, src)
        assert _difference(ops.diagonal_scatter(x, src), expected,
                           Row("diagonal_scatter", (), 0, ())) == "", sizes
    x = base.as_strided((3, 3, 3), (2, 1, 1))
    with pytest.raises(RuntimeError, match="repeats storage positions"):
        ops.diagonal_scatter(x, torch.ones(3, 3, device=ops.DEVICE), 0, 1, 2)


def test_scatter_converts_src_like_atens_copy() -> None:
    x = tensor((3, 4))
    for src in (torch.tensor([1.5, -0.0, float("nan")], dtype=torch.float64),
                torch.tensor([7, -3, 2**40]), torch.tensor([True, False, True]),
                torch.tensor([1 + 2j, -0.0j, 3j])):
        src = src.to(ops.DEVICE)
        with ops.use_triton(False), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # complex to real: aten warns once a process
            expected = torch.diagonal_scatter(x, src)
            actual = ops.diagonal_scatter(x, src)
        assert _difference(actual, expected, Row("diagonal_scatter", (), 0, ())) == ""


def test_conj_and_neg_inputs_are_resolved_like_atens_fallback() -> None:
    z = tensor((4, 4), "sliced", "complex64")
    for x in (z.conj(), z.conj().imag):
        assert x.is_conj() or x.is_neg()
        src = tensor(tuple(x.diagonal().shape), "contiguous", str(x.dtype)[6:], 5)
        with ops.use_triton(False):
            expected = torch.diagonal_scatter(x, src)
            embedded = torch.diag_embed(x, 1)
        actual = ops.diagonal_scatter(x, src)
        assert _difference(actual, expected, Row("diagonal_scatter", (), 0, ())) == ""
        assert bitwise_difference(ops.diag_embed(x, 1), embedded) == ""


def test_every_word_of_an_uninitialised_result_is_written(monkeypatch) -> None:
    """Results come from torch.empty / empty_strided: poison what they return, then demand
    aten's bits (an unwritten word shows as 0xA5 bytes)."""
    rows = [Row("diag_embed", (3, 4), -1, (0, 2), "float32", "sliced"),
            Row("diagonal_scatter", (3, 4, 5), 1, (2, 0), "float32", "storage", "permuted"),
            Row("diagonal_scatter", (3, 4, 5), 1, (2, 0), "int8", "expanded", "sliced")]
    tensors = [inputs(row) for row in rows]
    expected = []
    for row, args in zip(rows, tensors, strict=True):
        with ops.use_triton(False):
            expected.append(ATEN[row.op](*args, row))
    for name in ("empty", "empty_strided"):
        monkeypatch.setattr(torch, name, _poisoning(getattr(torch, name)))
    actual = [OURS[row.op](*args, row) for row, args in zip(rows, tensors, strict=True)]
    monkeypatch.undo()
    for row, got, want in zip(rows, actual, expected, strict=True):
        assert _difference(got, want, row) == "", row.describe()


_EMPTY = torch.empty


def _poisoning(real):
    """``real`` (a torch factory) whose storages hold 0xA5 bytes."""
    def poisoned(*args, **kwargs):
        t = real(*args, **kwargs)
        _EMPTY(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage()).fill_(0xA5)
        return t
    return poisoned


INVALID = [
    # (what, op, tensor shapes, arguments after the tensors, aten's exception)
    ("embed dim out of range", "diag_embed", [(3, 4)], (0, 0, 3), IndexError),
    ("embed dim out of range, negative", "diag_embed", [(3, 4)], (0, -4, 1), IndexError),
    ("embed dims identical", "diag_embed", [(3, 4)], (0, 1, -2), RuntimeError),
    ("embed of a 0-d tensor", "diag_embed", [()], (0, -2, -1), IndexError),
    ("embed of a 0-d tensor, dims 0, -1", "diag_embed", [()], (0, 0, -1), RuntimeError),
    ("embed offset INT64_MAX", "diag_embed", [(2, 3)], (INT64_MAX, -2, -1), RuntimeError),
    ("embed offset INT64_MIN", "diag_embed", [(2, 3)], (INT64_MIN, -2, -1), RuntimeError),
    ("embed offset INT64_MIN + 1", "diag_embed", [(2, 3)], (INT64_MIN + 1, -2, -1),
     RuntimeError),
    ("embed too large to allocate", "diag_embed", [(2, 3)], (2**62, -2, -1), RuntimeError),
    ("embed of an empty tensor, too large", "diag_embed", [(0, 3)], (2**62, -2, -1),
     RuntimeError),
    ("scatter dim out of range", "diagonal_scatter", [(3, 4), (3,)], (0, 0, 2), IndexError),
    ("scatter dims identical", "diagonal_scatter", [(3, 4), (3,)], (0, 1, -1), RuntimeError),
    ("scatter of a 1-d tensor", "diagonal_scatter", [(3,), (1,)], (0, 0, 1), IndexError),
    ("scatter of a 0-d tensor", "diagonal_scatter", [(), (1,)], (0, 0, 1), IndexError),
    ("scatter src of the wrong shape", "diagonal_scatter", [(3, 4), (4,)], (0, 0, 1),
     RuntimeError),
    ("scatter src that would broadcast", "diagonal_scatter", [(3, 4), (1,)], (0, 0, 1),
     RuntimeError),
    ("scatter 0-d src", "diagonal_scatter", [(3, 4), ()], (0, 0, 1), RuntimeError),
    ("scatter src of too high rank", "diagonal_scatter", [(3, 4), (1, 3)], (0, 0, 1),
     RuntimeError),
    ("diag of a 0-d tensor", "diag", [()], (0,), RuntimeError),
    ("diag of a 3-d tensor", "diag", [(2, 2, 2)], (0,), RuntimeError),
    ("diag offset INT64_MAX of a 1-d tensor", "diag", [(3,)], (INT64_MAX,), RuntimeError),
    ("triu of a 1-d tensor", "triu", [(3,)], (0,), RuntimeError),
    ("triu of a 0-d tensor", "triu", [()], (INT64_MAX,), RuntimeError),
    ("tril of a 1-d tensor", "tril", [(0,)], (-1,), RuntimeError),
    ("tril of a 0-d tensor", "tril", [()], (0,), RuntimeError),
]


@pytest.mark.parametrize(("what", "op", "shapes", "args", "error"), INVALID,
                         ids=[row[0] for row in INVALID])
def test_invalid_arguments_raise_what_aten_raises(what, op, shapes, args, error) -> None:
    """aten's exception type and the start of its message, through aten with the
    registration on and through our launchers directly; no launch."""
    tensors = [torch.ones(shape, device=ops.DEVICE) for shape in shapes]
    call = getattr(torch, op)
    with ops.use_triton(False), pytest.raises(error) as aten_error:
        call(*tensors, *args)
    counted = ("diag_embed", "diagonal_scatter", "diagonal_copy", "triu", "tril")
    before = [ops.launches(name) for name in counted]
    callers = [call] if op == "diag" else [call, getattr(ops, op)]
    for caller in callers:
        with ops.use_triton(), pytest.raises(error) as ours:
            caller(*tensors, *args)
        assert type(ours.value) is type(aten_error.value)
        assert str(ours.value)[:30] == str(aten_error.value)[:30], what
    assert [ops.launches(name) for name in counted] == before


@pytest.mark.parametrize("op", ["diag_embed", "diagonal_scatter"])
def test_out_of_the_wrong_dtype_is_resized_then_refused_like_aten(op: str) -> None:
    """aten's generated out= wrapper resizes ``out`` before it checks the dtype."""
    x = tensor((2, 3))
    tensors = (x, torch.ones(2, device=ops.DEVICE)) if op == "diagonal_scatter" else (x,)
    overload = getattr(torch.ops.aten, op).out
    outs = []
    for caller in (overload, getattr(ops, f"{op}_out")):
        out = torch.empty(0, dtype=torch.int64, device=ops.DEVICE)
        with ops.use_triton(False), pytest.raises(RuntimeError,
                                                  match="Expected out tensor to have dtype"):
            caller(*tensors, out=out)
        outs.append(out.shape)
    assert outs[0] == outs[1] != (0,)


def test_out_that_aliases_the_input_reads_before_it_writes() -> None:
    """aten computes the functional result, then copies it into ``out``: an ``out`` on the
    input's storage gets that result, not one read from its own half-written words."""
    for op, make in (("diag_embed", lambda x: (x,)),
                     ("diagonal_scatter", lambda x: (x, x.diagonal().flip(0).clone()))):
        x = tensor((3, 3), seed=4)
        with ops.use_triton(False):
            expected = getattr(torch.ops.aten, op)(*make(x))
        y = x.clone()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # diag_embed resizes the 2-D y: aten warns too
            result = getattr(ops, f"{op}_out")(*make(y), out=y)
        assert result is y
        assert bitwise_difference(y, expected) == "", op


def test_expanded_out_raises_like_atens_copy() -> None:
    x = tensor((2, 3))
    out = torch.empty(3, device=ops.DEVICE)[None].expand(2, 3)
    with pytest.raises(RuntimeError, match="more than one element"):
        ops.diagonal_scatter_out(x, torch.ones(2, device=ops.DEVICE), out=out)


def test_bench_family_smoke_runs_and_checks_against_aten(tmp_path) -> None:
    """benchmarks/bench_family.py --smoke runs anywhere (interpreted on CPU) and its
    bitwise checks pass, so the GPU session's grid starts from a working script."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_family.py"
    run = subprocess.run([sys.executable, str(script), "--smoke", "--only", "scatter|diag ",
                          "--out", str(tmp_path)], capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads((tmp_path / "family.json").read_text())
    assert report["meta"]["bitwise_mismatches"] == []
    assert {row["op"] for row in report["rows"]} == {"scatter", "diag"}


# --- triu and tril: .out, in place, dtypes ------------------------------------------------

def _twin(x: torch.Tensor) -> torch.Tensor:
    """``x`` over a copy of its whole storage, viewed alike (sizes, strides, offset)."""
    return torch.empty(0, dtype=x.dtype, device=x.device).set_(
        x.untyped_storage().clone(), x.storage_offset(), x.shape, x.stride())


@pytest.mark.parametrize("row", triangle_rows()[::7], ids=Row.describe)
def test_triangle_out_overloads_match_aten_bitwise(row: Row) -> None:
    """Into an empty ``out`` (resized: the one-launch path), into one of the right shape
    laid out transposed (the functional result copied in) and into the input itself
    (aten's in-place update, storage and all).

    aten's CPU kernel writes a non-contiguous ``out`` of rank 4 and more as if its batch
    dims were one run of ``stride(-3)`` (elements land elsewhere, some past the storage),
    so the transposed ``out`` is compared with aten's functional result."""
    (x,) = inputs(row)
    overload, ours = getattr(torch.ops.aten, row.op).out, getattr(ops, f"{row.op}_out")
    with ops.use_triton(False):
        expected = getattr(torch.ops.aten, row.op)(x, row.offset)
        aten_out = overload(x, row.offset, out=torch.empty(0, dtype=x.dtype,
                                                           device=ops.DEVICE))
    out = torch.empty(0, dtype=x.dtype, device=ops.DEVICE)
    assert ours(x, row.offset, out=out) is out
    assert bitwise_difference(out, aten_out) == "", row.describe()
    transposed = torch.empty(tuple(reversed(x.shape)), dtype=x.dtype,
                             device=ops.DEVICE).permute(*reversed(range(x.dim())))
    assert ours(x, row.offset, out=transposed) is transposed
    with ops.use_triton(False):
        contiguous = expected.new_empty(expected.shape).copy_(transposed)
    assert bitwise_difference(contiguous, expected) == "", row.describe()
    same, twin = _twin(x), _twin(x)
    with ops.use_triton(False):
        overload(twin, row.offset, out=twin)
    assert ours(same, row.offset, out=same) is same
    assert storage_difference(same, twin) == "", row.describe()


@pytest.mark.parametrize("row", triangle_rows()[::2], ids=Row.describe)
def test_in_place_forms_write_atens_bits_into_the_input(row: Row) -> None:
    """``triu_``/``tril_`` return the very tensor they are given, at its own address, and
    its whole storage then holds the bytes aten's in-place op leaves (an expanded input's
    shared elements included); one launch where there is anything to zero."""
    (x,) = inputs(row)
    expected = _twin(x)
    with ops.use_triton(False):
        getattr(expected, f"{row.op}_")(row.offset)
    address, counter = x.data_ptr(), f"{row.op}_"
    before = ops.launches(counter)
    assert getattr(ops, counter)(x, row.offset) is x
    assert x.data_ptr() == address
    assert storage_difference(x, expected) == "", row.describe()
    assert ops.launches(counter) - before == int(x.numel() > 0)


def test_in_place_forms_of_conj_neg_and_self_overlapping_inputs_are_atens() -> None:
    """Conj and neg bits: the values aten's fallback leaves (zeros read back as +0). An
    input whose inner batch dim is expanded: aten's CPU kernel computes elsewhere and its
    copy_ back refuses the overlap, and so do we; its CUDA kernel zeroes in place, and so
    do we; an expanded outer one both zero in place."""
    z = tensor((3, 4), "sliced", "complex64", seed=3)
    for make in (lambda: _twin(z).conj(), lambda: _twin(z).conj().imag):
        for op in TRIANGLES:
            expected, actual = make(), make()
            with ops.use_triton(False):
                getattr(expected, f"{op}_")(1)
            assert getattr(ops, f"{op}_")(actual, 1) is actual
            assert bitwise_difference(actual.resolve_conj().resolve_neg(),
                                      expected.resolve_conj().resolve_neg()) == ""
    base = tensor((2, 1, 3, 4), seed=5)
    for op in TRIANGLES:
        if ops.DEVICE == "cpu":
            with ops.use_triton(False), pytest.raises(RuntimeError) as aten_error:
                getattr(_twin(base).expand(2, 2, 3, 4), f"{op}_")()
            with pytest.raises(RuntimeError) as ours:
                getattr(ops, f"{op}_")(_twin(base).expand(2, 2, 3, 4))
            assert str(ours.value) == str(aten_error.value)
        else:
            expected, actual = _twin(base).expand(2, 2, 3, 4), _twin(base).expand(2, 2, 3, 4)
            with ops.use_triton(False):
                getattr(expected, f"{op}_")()
            assert getattr(ops, f"{op}_")(actual) is actual
            assert storage_difference(actual, expected) == ""
        outer = tensor((1, 2, 3, 4), seed=6)
        expected, actual = _twin(outer).expand(3, 2, 3, 4), _twin(outer).expand(3, 2, 3, 4)
        with ops.use_triton(False):
            getattr(expected, f"{op}_")(-1)
        getattr(ops, f"{op}_")(actual, -1)
        assert storage_difference(actual, expected) == ""


def test_triangle_dtypes_atens_kernels_lack_raise_its_error_unless_empty() -> None:
    """float8: aten's NotImplementedError, from the functional, .out and in-place forms
    and through the registration; an empty input returns before aten's dtype dispatch."""
    from diagfuzz.ops.triangle import SUPPORTED

    lacking = [getattr(torch, d) for d in available_dtypes()
               if getattr(torch, d) not in SUPPORTED]
    for dtype, op in itertools.product(lacking, TRIANGLES):
        x = torch.zeros(2, 3, dtype=dtype, device=ops.DEVICE)
        with ops.use_triton(False), pytest.raises(NotImplementedError) as aten_error:
            getattr(torch, op)(x)
        callers = (getattr(ops, op), getattr(ops, f"{op}_"),
                   lambda t, op=op: getattr(ops, f"{op}_out")(t, out=torch.empty_like(t)))
        for caller in callers:
            with pytest.raises(NotImplementedError) as ours:
                caller(x)
            assert str(ours.value) == str(aten_error.value), (dtype, op)
        with ops.use_triton(), pytest.raises(NotImplementedError):
            getattr(torch, op)(x)
        empty = torch.zeros(0, 3, dtype=dtype, device=ops.DEVICE)
        assert getattr(ops, op)(empty).shape == (0, 3)


def test_triangle_out_of_the_wrong_dtype_is_refused_before_any_resize() -> None:
    """aten's structured out= checks out's dtype first: out keeps its shape."""
    x = tensor((3, 4))
    for op, caller in itertools.product(TRIANGLES, ("aten", "ours")):
        out = torch.empty(2, dtype=torch.int64, device=ops.DEVICE)
        call = (getattr(torch.ops.aten, op).out if caller == "aten"
                else getattr(ops, f"{op}_out"))
        with ops.use_triton(False), pytest.raises(RuntimeError,
                                                  match="Expected out tensor to have dtype"):
            call(x, 0, out=out)
        assert out.shape == (2,), (op, caller)
