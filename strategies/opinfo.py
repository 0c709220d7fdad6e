"""PyTorch's own OpInfo samples and error inputs of the diagonal family, as Cases.

``torch.testing._internal.common_methods_invocations.op_db`` holds hand-written sample
inputs for ``diagonal``, ``diagonal_copy``, ``linalg.diagonal``, ``diag_embed``,
``diagonal_scatter``, ``diag``, ``triu`` and ``tril``, per dtype, plus error inputs
(``triu``'s and ``tril``'s samples are also Cases of ``triu_`` and ``tril_``). Maintainers
trust them, and PyTorch judges them with ``assert_close``. Here each sample becomes a Case
that carries its tensors bit for bit (every storage element as a special,
``Values.specials``), so the oracle judges it as any other Case: bitwise, layout and
aliasing included, with a reproducer and a corpus entry when it fails.

Which samples: every dtype the op supports on the device type (those diagfuzz has), each
sample as written and its non-contiguous twin (``SampleInput.noncontiguous``, as PyTorch's
``test_noncontiguous_samples`` runs them), generated on the CPU under ``torch.manual_seed(0)``
per op and dtype, so the set is the same on every run of one torch. ``diagonal``'s samples
also give ``diagonal_backward`` Cases (what autograd calls for ``diagonal(x).backward(g)``, a
seeded ``g`` of the diagonal's shape) for the dtypes its backward supports. Error inputs
become invalid Cases, judged by error parity.

A Case is kept only when ``diagfuzz.specs.arguments`` rebuilds exactly the sample's call from
it (every tensor's bits, shape, strides and storage offset, every other argument): a sample
the Case model cannot express is counted, never judged wrongly.

Importing ``torch.testing._internal`` needs ``expecttest`` (the ``opinfo`` extra);
``load`` says why it cannot where it cannot.
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from diagfuzz.core.bits import same_bits
from diagfuzz.core.case import Case, Layout, Values, available_dtypes
from diagfuzz.core.words import as_words

#: The op_db entries read, with their non-tensor parameters and defaults, in call order.
PARAMETERS: dict[str, tuple[tuple[str, Any], ...]] = {
    "diagonal": (("offset", 0), ("dim1", 0), ("dim2", 1)),
    "diagonal_copy": (("offset", 0), ("dim1", 0), ("dim2", 1)),
    "linalg.diagonal": (("offset", 0), ("dim1", -2), ("dim2", -1)),
    "diag_embed": (("offset", 0), ("dim1", -2), ("dim2", -1)),
    "diagonal_scatter": (("src", None), ("offset", 0), ("dim1", 0), ("dim2", 1)),
    "diag": (("diagonal", 0),),
    "triu": (("diagonal", 0),),
    "tril": (("diagonal", 0),),
}
#: op_db entries whose samples also make Cases of their in-place variant (diagfuzz's op
#: of that name), as PyTorch's OpInfo tests run ``x.triu_(k)`` on them.
IN_PLACE = {"triu": "triu_", "tril": "tril_"}
#: Seed of the global torch generator while an op's samples of one dtype are made.
SEED = 0


@dataclass
class Samples:
    """The Cases made from op_db, and what could not become one.

    ``skipped`` is set (and nothing else) where op_db cannot be imported. ``dropped`` counts
    samples left out, by reason (a dtype diagfuzz lacks, a call the Case model cannot
    express); ``sources`` counts Cases per op_db entry and kind (sample, noncontiguous,
    backward, error) for the distinct Cases, each under the first source that made it.
    """

    cases: list[Case] = field(default_factory=list)
    skipped: str = ""
    dropped: Counter[str] = field(default_factory=Counter)
    sources: Counter[str] = field(default_factory=Counter)

    def summary(self) -> str:
        """One line: Cases per kind and what was left out."""
        kinds: Counter[str] = Counter()
        for key, n in self.sources.items():
            kinds[key.rsplit(" ", 1)[-1]] += n
        made = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items()))
        text = f"{len(self.cases)} distinct Cases ({made})"
        if self.dropped:
            text += "; left out: " + ", ".join(f"{n} {why}" for why, n in
                                               sorted(self.dropped.items()))
        return text


def op_db_entries() -> list[Any]:
    """The OpInfo entries of ``PARAMETERS`` (ImportError where op_db cannot be imported)."""
    if importlib.util.find_spec("expecttest") is None:
        # What torch's test code needs first: refused at once, not after seconds of its
        # imports (6 s on an H200 host).
        raise ImportError("No module named 'expecttest'")
    from torch.testing._internal.common_methods_invocations import op_db

    return [op for op in op_db if op.name in PARAMETERS and not op.variant_test_name]


def unavailable() -> str:
    """Why op_db cannot be imported here ("" where it can)."""
    try:
        op_db_entries()
    except Exception as exc:  # ImportError (expecttest), or anything torch's test code raises
        return _why(exc)
    return ""


def _why(exc: Exception) -> str:
    hint = (" (pip install expecttest: a dependency of diagfuzz)"
            if "expecttest" in str(exc) else "")
    return f"torch.testing._internal does not import: {type(exc).__name__}: {exc}{hint}"


def load(device_type: str = "cpu", ops: set[str] | None = None) -> Samples:
    """Every OpInfo sample and error input of the family as Cases (``ops`` narrows by
    diagfuzz op name), for the dtypes the op supports on ``device_type``."""
    found = Samples()
    try:
        entries = op_db_entries()
    except Exception as exc:
        found.skipped = _why(exc)
        return found
    seen: set[Case] = set()

    def keep(case: Case | None, source: str, why_not: str = "") -> None:
        if case is None:
            found.dropped[why_not or "calls the Case model cannot express"] += 1
            return
        if ops is not None and case.op not in ops:
            return
        if case not in seen:  # counted once, under the first source that made it
            seen.add(case)
            found.cases.append(case)
            found.sources[source] += 1

    names = set(available_dtypes())
    for entry in entries:
        for dtype in sorted(entry.supported_dtypes(device_type), key=str):
            name = str(dtype).removeprefix("torch.")
            if name not in names:
                found.dropped[f"{name} sample sets (a dtype diagfuzz does not draw)"] += 1
                continue
            backward = dtype in entry.supported_backward_dtypes(device_type)
            for kind, sample in samples_of(entry, dtype):
                case = _checked(entry.name, sample)
                keep(case, f"{entry.name} {kind}")
                if case is not None and entry.name in IN_PLACE:
                    keep(case.replace(op=IN_PLACE[entry.name]), f"{entry.name}_ {kind}")
                if entry.name == "diagonal" and backward:
                    keep(_checked_backward(sample, dtype), f"{entry.name} backward")
        for error in error_inputs_of(entry):
            case = _checked(entry.name, error.sample_input, error.error_type)
            keep(case, f"{entry.name} error")
            if case is not None and entry.name in IN_PLACE:
                keep(case.replace(op=IN_PLACE[entry.name]), f"{entry.name}_ error")
    from diagfuzz.specs import SPECS

    order = {op: i for i, op in enumerate(SPECS)}
    found.cases.sort(key=lambda case: order[case.op])  # report order; stable within an op
    return found


def samples_of(entry: Any, dtype: torch.dtype) -> Iterator[tuple[str, Any]]:
    """The entry's samples of ``dtype`` on the CPU, seeded, each then its non-contiguous
    twin."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        samples = list(entry.sample_inputs("cpu", dtype, requires_grad=False))
    for sample in samples:
        yield "sample", sample
        yield "noncontiguous", sample.noncontiguous()


def error_inputs_of(entry: Any) -> list[Any]:
    if entry.error_inputs_func is None:
        return []
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        return list(entry.error_inputs("cpu"))


# --- one sample as a Case -----------------------------------------------------------------

def bound_arguments(name: str, sample: Any) -> dict[str, Any]:
    """The sample's call as {parameter: value}, defaults filled in (op_db's ``name``)."""
    params = PARAMETERS[name]
    bound = dict(params)
    for (param, _), value in zip(params, sample.args, strict=False):
        bound[param] = value
    bound.update(sample.kwargs)
    return bound


def literal(t: torch.Tensor) -> tuple[Layout, Values]:
    """``t``'s layout, and values holding every element of its storage up to the furthest
    one the view reaches (gaps of a non-contiguous view included), as specials."""
    layout = Layout(tuple(t.shape), tuple(t.stride()), int(t.storage_offset()),
                    _kinds(t))
    size = max(layout.storage_size, 1)
    flat = t.detach().as_strided((size,), (1,), 0)
    words = as_words(flat.resolve_conj().resolve_neg()).reshape(size, -1)
    width = 8 * words.element_size()
    mask = 2**width - 1
    parts = [words[:, half].tolist() for half in range(words.shape[1])]
    specials = tuple((i, sum((p[i] & mask) << (width * h) for h, p in enumerate(parts)))
                     for i in range(size))
    return layout, Values(seed=0, mode="normal", specials=specials)


def _kinds(t: torch.Tensor) -> tuple[str, ...]:
    """The layout kinds of ``t`` for coverage reports (op_db's twins are sliced views with a
    storage offset)."""
    kinds = tuple(k for k, present in (("sliced", not t.is_contiguous()),
                                       ("offset", t.storage_offset() > 0)) if present)
    return kinds or ("contiguous",)


def _case_of(name: str, sample: Any, error: type[BaseException] | None) -> Case | None:
    """The Case of one op_db sample (None where the family's Case model has no place)."""
    x = sample.input
    if not isinstance(x, torch.Tensor):
        return None
    args = bound_arguments(name, sample)
    dtype = str(x.dtype).removeprefix("torch.")
    invalid = _invalid_class(name, x, args) if error is not None else ""
    layout, values = literal(x)
    if name == "diag":
        diagonal = args["diagonal"]
        if x.dim() == 1:
            n = x.shape[0] + abs(diagonal) if isinstance(diagonal, int) else x.shape[0]
            return Case("diag_1d", (n, n), _int(diagonal), 0, 1, dtype, layout, values,
                        invalid=invalid, raw_args=_raw({"diagonal": diagonal}))
        return Case("diag", tuple(x.shape), _int(diagonal), 0, 1, dtype, layout, values,
                    invalid=invalid, raw_args=_raw({"diagonal": diagonal}))
    if name in IN_PLACE:  # triu, tril: dims are the last two, not arguments
        diagonal = args["diagonal"]
        return Case(name, tuple(x.shape), _int(diagonal), -2, -1, dtype, layout, values,
                    invalid=invalid, raw_args=_raw({"diagonal": diagonal}))
    offset, dim1, dim2 = args["offset"], args["dim1"], args["dim2"]
    raw = _raw({"offset": offset, "dim1": dim1, "dim2": dim2})
    geometry = (_int(offset), _int(dim1, 0), _int(dim2, 1))
    if name == "diag_embed":
        sizes = _embed_sizes(x, *geometry)
        return Case("diag_embed", sizes, *geometry, dtype, layout, values, invalid=invalid,
                    raw_args=raw)
    if name == "diagonal_scatter":
        src = args["src"]
        if not isinstance(src, torch.Tensor) or src.dtype != x.dtype:
            return None
        src_layout, src_values = literal(src)
        return Case("diagonal_scatter", tuple(x.shape), *geometry, dtype, layout, values,
                    invalid=invalid, raw_args=raw,
                    others=(("src", src_layout, src_values),))
    return Case("diagonal", tuple(x.shape), *geometry, dtype, layout, values,
                invalid=invalid, raw_args=raw)


def _int(value: Any, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _raw(args: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    """Arguments the geometry fields cannot hold (not a plain int), passed as they are."""
    return tuple((k, v) for k, v in args.items()
                 if not isinstance(v, int) or isinstance(v, bool))


def _embed_sizes(x: torch.Tensor, offset: int, dim1: int, dim2: int) -> tuple[int, ...]:
    """diag_embed's result shape (the Case's sizes); for a call aten refuses, the shape
    with the default dims, as the spec's own invalid Cases have it."""
    meta = torch.empty(x.shape, dtype=x.dtype, device="meta")
    with contextlib.suppress(Exception):
        return tuple(torch.diag_embed(meta, offset, dim1, dim2).shape)
    with contextlib.suppress(Exception):
        return tuple(torch.diag_embed(meta, offset).shape)
    return (*x.shape[:-1], x.shape[-1] + abs(offset), x.shape[-1] + abs(offset)) \
        if x.dim() else (1,)


def _invalid_class(name: str, x: torch.Tensor, args: dict[str, Any]) -> str:
    """The diagfuzz invalid class an error input belongs to (a finding counts Cases by
    class); ``opinfo_error`` where none fits."""
    if name == "diag":
        return "rank0" if x.dim() == 0 else "high_rank" if x.dim() > 2 else "opinfo_error"
    if name in IN_PLACE:
        return {0: "rank0", 1: "rank1"}.get(x.dim(), "opinfo_error")
    rank = x.dim() + (name == "diag_embed")
    dims = [d for d in (args.get("dim1"), args.get("dim2")) if isinstance(d, int)]
    if any(d >= rank for d in dims):
        return "dim_above_range"
    if any(d < -rank for d in dims):
        return "dim_below_range"
    if len(dims) == 2 and rank and dims[0] % rank == dims[1] % rank:
        return "same_dims"
    return "opinfo_error"


def _checked(name: str, sample: Any, error: type[BaseException] | None = None) -> Case | None:
    """The sample's Case, kept only if it rebuilds exactly the sample's call."""
    try:
        case = _case_of(name, sample, error)
    except (TypeError, ValueError):
        return None
    if case is None:
        return None
    from diagfuzz.specs import arguments, spec_of

    try:
        rebuilt = arguments(case, "cpu")
    except Exception:
        return None
    want = bound_arguments(name, sample)
    want[spec_of(case.op).first.name] = sample.input
    return case if _same_call(rebuilt, want, spec_of(case.op)) else None


def _checked_backward(sample: Any, dtype: torch.dtype) -> Case | None:
    """diagonal_backward for a diagonal sample: ``grad_output`` a seeded tensor of the
    diagonal's shape (what ``diagonal(x).backward(g)`` hands aten)."""
    from torch.testing import make_tensor

    x = sample.input
    args = bound_arguments("diagonal", sample)
    offset, dim1, dim2 = args["offset"], args["dim1"], args["dim2"]
    try:
        shape = torch.diagonal(x, offset, dim1, dim2).shape
    except Exception:
        return None
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        grad = make_tensor(shape, dtype=dtype, device="cpu")
    layout, values = literal(grad)
    case = Case("diagonal_backward", tuple(x.shape), offset, dim1, dim2,
                str(dtype).removeprefix("torch."), layout, values)
    from diagfuzz.specs import arguments

    rebuilt = arguments(case, "cpu")
    ok = (same_bits(rebuilt["grad_output"], grad)
          and list(rebuilt["input_sizes"]) == list(x.shape))
    return case if ok else None


def _same_call(rebuilt: dict[str, Any], want: dict[str, Any], spec: Any) -> bool:
    """Whether the rebuilt call equals the sample's: tensors bit for bit with their layout,
    other arguments by value and type."""
    for name, value in want.items():
        if name not in rebuilt:
            return False
        got = rebuilt[name]
        if isinstance(value, torch.Tensor):
            if not (isinstance(got, torch.Tensor) and got.dtype == value.dtype
                    and got.shape == value.shape and got.stride() == value.stride()
                    and got.storage_offset() == value.storage_offset()
                    and same_bits(got, value.resolve_conj().resolve_neg())):
                return False
        elif type(got) is not type(value) or got != value:
            return False
    return True


__all__ = ["PARAMETERS", "SEED", "Samples", "bound_arguments", "error_inputs_of", "literal",
           "load", "op_db_entries", "samples_of", "unavailable"]
