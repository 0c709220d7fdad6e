"""Case: the currency of diagfuzz. A frozen, JSON-serialisable record of one op call.

Strategies draw Cases, the executor runs Cases, the journal, reports, reproducers and the
corpus store Cases. ``materialise`` rebuilds the tensors of a Case bit for bit on any device,
so a Case alone reproduces a failure. Hypothesis never draws a tensor, only Cases, so it
shrinks Cases.

A Case names its op's geometry (sizes, offset, dim1, dim2), its dtype and every tensor the
op reads, each with its own layout and values: the first in ``layout``/``values``, the others
by name in ``others``. What the op makes of them is its spec's business
(``diagfuzz.specs``). The JSON carries a format version; files written before versions
existed (version 1, one tensor) load as they are.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from diagfuzz.core import huge, recycling
from diagfuzz.core.names import DTYPE_NAMES as DTYPE_NAMES  # re-exported
from diagfuzz.core.opnames import op_call
from diagfuzz.core.words import as_words

#: The JSON format ``to_json`` writes; ``from_json`` reads it and every earlier one.
JSON_VERSION = 2


def dtype_of(name: str) -> torch.dtype:
    """The torch dtype called ``name``; a clear error for names this torch lacks."""
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"unknown dtype {name!r} (this torch is {torch.__version__})")
    return dtype


def available_dtypes() -> tuple[str, ...]:
    """The dtype names of DTYPE_NAMES that the installed torch supports."""
    return tuple(n for n in DTYPE_NAMES if isinstance(getattr(torch, n, None), torch.dtype))


@dataclass(frozen=True)
class Layout:
    """Where the tensor the op reads lives: a strided view into a storage of ``storage_size``.

    ``kinds`` names how the layout arose (contiguous, permuted, sliced, offset, expanded,
    channels_last) for coverage reports; shape, strides and storage_offset are the truth.
    """

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    storage_offset: int = 0
    kinds: tuple[str, ...] = ("contiguous",)

    @property
    def storage_size(self) -> int:
        """Elements the storage needs: one past the furthest element the view can reach."""
        if any(s == 0 for s in self.shape):
            return self.storage_offset
        return self.storage_offset + 1 + sum(
            st * (n - 1) for st, n in zip(self.strides, self.shape, strict=True)
        )

    @staticmethod
    def contiguous(shape: tuple[int, ...]) -> Layout:
        """The plain row-major layout of ``shape``."""
        return Layout(tuple(shape), contiguous_strides(shape), 0, ("contiguous",))


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major strides in elements (size-0 and size-1 dims as torch computes them)."""
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


@dataclass(frozen=True)
class Values:
    """How the storage is filled: seeded random values, then special bit patterns.

    ``mode`` is "normal" (random values of the dtype's usual range), "bits" (uniformly
    random bit patterns, NaN payloads included) or "index_hash" (each storage word a hash of
    the seed and its index, made chunk by chunk on any device: the huge tier's,
    ``diagfuzz.core.huge``). ``specials`` overwrite storage elements:
    (storage index, bit pattern as an unsigned integer of the element's width; a complex
    element's pattern is real bits | imaginary bits << half width).
    """

    seed: int = 0
    mode: str = "normal"
    specials: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class Case:
    """One call of an op, complete enough to rebuild every tensor bit for bit.

    ``sizes``, ``offset``, ``dim1`` and ``dim2`` name a diagonal of a tensor of ``sizes``
    (which tensor that is, the op's input or its result, is the op's spec's business).
    ``layout`` and ``values`` describe the first tensor the op reads (diagonal: input;
    diagonal_backward: grad_output); ``others`` the rest, as (argument name, layout,
    values). An invalid Case names its class in ``invalid`` and may replace call arguments
    with raw JSON values in ``raw_args`` (non-tensor or non-integer arguments).
    ``out_dtype``/``out_device`` select the ``.out`` overload with such an ``out`` tensor.
    """

    op: str
    sizes: tuple[int, ...]
    offset: int
    dim1: int
    dim2: int
    dtype: str
    layout: Layout
    values: Values = field(default_factory=Values)
    invalid: str = ""
    raw_args: tuple[tuple[str, Any], ...] = ()
    out_dtype: str = ""
    out_device: str = ""
    others: tuple[tuple[str, Layout, Values], ...] = ()

    def __post_init__(self) -> None:
        # JSON gives lists; tuples keep a Case hashable (sets of Cases, dict keys) and
        # to_dict's values immutable (a Case's JSON is made once).
        object.__setattr__(self, "sizes", tuple(self.sizes))
        object.__setattr__(self, "raw_args", tuple((str(k), _frozen(v))
                                                   for k, v in self.raw_args))
        object.__setattr__(self, "others", tuple((str(n), lay, v) for n, lay, v in self.others))
        if not isinstance(self.op, str) or not self.op.isidentifier():
            raise ValueError(f"Case.op must be an op's name, got {self.op!r}")
        for name, layout, _ in (("layout", self.layout, None), *self.others):
            if len(layout.shape) != len(layout.strides):
                raise ValueError(f"Case {name}: shape {layout.shape} and strides "
                                 f"{layout.strides} differ in rank")

    def operand(self, name: str) -> tuple[Layout, Values]:
        """Layout and values of the tensor argument ``name`` of ``others``."""
        for other, layout, values in self.others:
            if other == name:
                return layout, values
        raise KeyError(f"Case of {self.op} has no tensor {name!r} (has "
                       f"{[n for n, _, _ in self.others]})")

    # --- serialisation -------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The Case as plain JSON values (what ``dataclasses.asdict`` gives, built directly:
        ``asdict`` deep-copies field by field, and serialising each Case three times that
        way was a fifth of a worker's time in a pipelined fuzz run)."""
        data = {
            "version": JSON_VERSION,
            "op": self.op, "sizes": self.sizes, "offset": self.offset, "dim1": self.dim1,
            "dim2": self.dim2, "dtype": self.dtype,
            "layout": _layout_dict(self.layout), "values": _values_dict(self.values),
            "invalid": self.invalid, "raw_args": self.raw_args, "out_dtype": self.out_dtype,
            "out_device": self.out_device,
        }
        if self.others:
            data["others"] = [{"name": n, "layout": _layout_dict(lay), "values": _values_dict(v)}
                              for n, lay, v in self.others]
        return data

    def to_json(self) -> str:
        """One line of JSON; ``from_json`` gives back an equal Case. Made once per Case (the
        journal, the executor and the verdict each need it; a Case is immutable)."""
        text = self.__dict__.get("_json")
        if text is None:
            text = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
            object.__setattr__(self, "_json", text)
        return text

    @staticmethod
    def from_json(text: str | dict) -> Case:
        """Rebuild a Case from ``to_json``'s output (or its parsed dict)."""
        data = json.loads(text) if isinstance(text, str) else dict(text)
        try:
            version = int(data.pop("version", 1))
            if version > JSON_VERSION:
                raise ValueError(f"Case JSON version {version} is newer than this diagfuzz "
                                 f"reads ({JSON_VERSION})")
            layout = data.pop("layout")
            values = data.pop("values", {})
            others = data.pop("others", ())
            return Case(
                **{k: v for k, v in data.items() if k not in ("sizes", "raw_args")},
                sizes=tuple(data["sizes"]),
                raw_args=tuple((k, v) for k, v in data.get("raw_args", ())),
                layout=_layout_of(layout),
                values=_values_of(values),
                others=tuple((o["name"], _layout_of(o["layout"]), _values_of(o["values"]))
                             for o in others),
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"not a diagfuzz Case: {exc}: {str(text)[:200]}") from exc

    def canonical_json(self) -> str:
        """The JSON a Case's identity is hashed from (``diagfuzz.core.corpus.case_id``):
        without the format version, and without ``others`` where there are none, so a
        one-tensor Case keeps the name it had before versions existed."""
        data = self.to_dict()
        data.pop("version")
        return json.dumps(data, sort_keys=True, separators=(",", ":"))

    def replace(self, **changes: Any) -> Case:
        """A copy with ``changes`` applied (dataclasses.replace)."""
        return replace(self, **changes)

    def describe_full(self) -> list[str]:
        """Every field that tells two Cases apart, for a person: the call with its raw
        arguments, and each tensor it reads with its layout and values."""
        spec = op_call(self.op)
        raw = dict(self.raw_args)
        tensors = [(spec.operands[0], self.layout, self.values), *self.others]
        names = [t[0] for t in tensors]
        scalars = {"input_sizes": list(self.sizes), "offset": self.offset, "dim1": self.dim1,
                   "dim2": self.dim2}
        parts = [f"{n}={raw[n]!r}" if n in raw else n for n in names]
        parts += [f"{n}={raw[n]!r}" if n in raw else f"{n}={scalars.get(spec.fields.get(n, n))}"
                  for n in spec.arguments]
        call = ", ".join(parts)
        if self.out_dtype or self.out_device:
            call += f", out=<{self.out_dtype or self.dtype} on {self.out_device or 'device'}>"
        notes = [self.op] if spec.method_name != self.op else []  # diag_1d: diag's method
        notes += [f"invalid: {self.invalid}"] if self.invalid else []
        lines = [f"{spec.method_name}({call})" + (f"  [{'; '.join(notes)}]" if notes else "")]
        for name, layout, values in tensors:
            if name in raw:
                continue
            lines.append(f"{name}: {self.dtype}, shape {list(layout.shape)}, strides "
                         f"{list(layout.strides)}, storage offset {layout.storage_offset} "
                         f"({'+'.join(layout.kinds)})")
            text = f"{'':{len(name)}}  values: seed {values.seed}, {values.mode}"
            if values.specials:
                # What the storage holds: a later special at the same element overwrites.
                held = {i % max(layout.storage_size, 1): b for i, b in values.specials}
                shown = [f"storage[{i}] = {special_repr(self.dtype, b)}"
                         for i, b in sorted(held.items())[:4]]
                more = len(held) - len(shown)
                text += "; specials " + ", ".join(shown) + (f" (+{more} more)" if more
                                                            else "")
            lines.append(text)
        return lines

    def describe(self) -> str:
        """A short human-readable one-liner for test ids, JUnit and reproducer titles: the
        call as the op takes it, its first operand by name with that tensor's sizes
        (diag_embed's ``input=[3]``, diagonal_backward's ``grad_output=[3]``), its other
        arguments (diagonal_backward's ``input_sizes``), dtype and layout. ``sizes``, the
        geometry's tensor (diag_embed's result), is named only where the op takes it."""
        layout = "+".join(self.layout.kinds)
        extra = f" invalid={self.invalid}" if self.invalid else ""
        spec = op_call(self.op)
        raw = dict(self.raw_args)
        first = spec.operands[0]
        scalars = {"input_sizes": list(self.sizes), "offset": self.offset, "dim1": self.dim1,
                   "dim2": self.dim2}
        parts = [f"{first}={raw[first]!r}" if first in raw
                 else f"{first}={list(self.layout.shape)}"]
        parts += [f"{n}={raw[n]!r}" if n in raw else f"{n}={scalars.get(spec.fields.get(n, n))}"
                  for n in spec.arguments]
        return f"{self.op}({', '.join(parts)}, {self.dtype}, {layout}){extra}"


#: The ``out`` a valid ``.out`` Case hands the implementation (``oracles.checks.out_form``):
#: of the result's shape, contiguous ("fresh") or with its last two dims transposed
#: ("transposed": aten writes into out's strides); with no element ("empty") or flat with
#: one element more than the result ("misshapen"): aten resizes either (the second with a
#: deprecation warning, which the oracle silences) and writes it contiguous.
OUT_FORMS = ("fresh", "empty", "transposed", "misshapen")


def drawn_out_form(case: Case) -> str:
    """The ``OUT_FORMS`` entry a ``.out`` Case draws, fixed by the Case: a kernel that
    resizes only an empty ``out``, or writes a given one as if contiguous, is wrong on a
    third of the Cases and right on the others."""
    import zlib

    return OUT_FORMS[zlib.crc32(repr((case.values.seed, case.sizes, case.offset,
                                      case.dtype)).encode()) % len(OUT_FORMS)]


def _layout_dict(layout: Layout) -> dict[str, Any]:
    return {"shape": layout.shape, "strides": layout.strides,
            "storage_offset": layout.storage_offset, "kinds": layout.kinds}


def _values_dict(values: Values) -> dict[str, Any]:
    return {"seed": values.seed, "mode": values.mode, "specials": values.specials}


def _layout_of(data: dict[str, Any]) -> Layout:
    return Layout(shape=tuple(data["shape"]), strides=tuple(data["strides"]),
                  storage_offset=data.get("storage_offset", 0),
                  kinds=tuple(data.get("kinds", ("contiguous",))))


def _values_of(data: dict[str, Any]) -> Values:
    return Values(seed=data.get("seed", 0), mode=data.get("mode", "normal"),
                  specials=tuple((int(i), int(b)) for i, b in data.get("specials", ())))


_WORD = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def special_repr(dtype_name: str, pattern: int) -> str:
    """A special bit pattern as hex and, where it decodes, its value: ``0x8000 (-0.0)``."""
    try:
        dtype = dtype_of(dtype_name)
    except ValueError:
        return hex(pattern)
    width = dtype.itemsize
    text = f"0x{pattern:0{2 * width}x}"
    try:
        if dtype.is_complex:
            half = width // 2
            part = torch.float32 if half == 4 else torch.float64
            real = _decode(pattern & ((1 << 8 * half) - 1), half, part)
            imag = _decode(pattern >> 8 * half, half, part)
            return f"{text} ({real}+{imag}j)"
        return f"{text} ({_decode(pattern, width, dtype)})"
    except (RuntimeError, TypeError, KeyError):
        return text


def _decode(pattern: int, width: int, dtype: torch.dtype) -> Any:
    signed = pattern - (1 << 8 * width) if pattern >= 1 << (8 * width - 1) else pattern
    value = torch.tensor([signed], dtype=_WORD[width]).view(dtype)
    return value.float().item() if dtype.itemsize == 1 and dtype.is_floating_point \
        else value.item()


def _frozen(value: Any) -> Any:
    """Lists (from JSON) as tuples, recursively: raw argument values stay hashable."""
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    return value


# --- materialise ------------------------------------------------------------------------

def _random_storage(dtype_name: str, values: Values, numel: int) -> torch.Tensor:
    """Seeded values on the CPU: the same bits on every machine and device."""
    dtype = dtype_of(dtype_name)
    if values.mode == "index_hash":  # the huge tier's values (diagfuzz.core.huge)
        return huge.storage_of(dtype, values.seed, numel)
    gen = torch.Generator().manual_seed(values.seed)
    if values.mode == "bits" and dtype is not torch.bool:
        storage = torch.empty(numel, dtype=dtype)
        words = as_words(storage).reshape(-1)
        info = torch.iinfo(words.dtype)
        words.copy_(torch.randint(info.min, info.max, (words.numel(),), generator=gen,
                                  dtype=torch.int64))
        return storage
    if values.mode not in ("normal", "bits"):
        raise ValueError("Case.values.mode must be 'normal', 'bits' or 'index_hash', got "
                         f"{values.mode!r}")
    if dtype is torch.bool:
        return torch.randint(0, 2, (numel,), generator=gen).bool()
    if not dtype.is_floating_point and not dtype.is_complex:
        info = torch.iinfo(dtype)
        return torch.randint(info.min, info.max, (numel,), generator=gen,
                             dtype=torch.int64).to(dtype)
    if dtype.is_complex:
        return torch.randn(numel, generator=gen, dtype=torch.complex128).to(dtype)
    return torch.randn(numel, generator=gen, dtype=torch.float64).to(dtype)


def _apply_specials(storage: torch.Tensor, specials: tuple[tuple[int, int], ...]) -> None:
    """Write each special bit pattern into the storage, in place (a later special at the
    same index wins). One indexed write per word half: a Case may carry every element of
    its storage as a special (``diagfuzz.strategies.opinfo``)."""
    if not specials:
        return
    words = as_words(storage).reshape(storage.numel(), -1)  # complex128: [real, imaginary]
    width = 8 * words.element_size()
    last = {index % storage.numel(): bits for index, bits in specials}
    index = torch.tensor(list(last), dtype=torch.int64)
    mask = 2**width - 1
    for half in range(words.shape[1]):
        halves = [(bits >> (width * half)) & mask for bits in last.values()]
        signed = [v - 2**width if v >= 2 ** (width - 1) else v for v in halves]
        words[index, half] = torch.tensor(signed, dtype=words.dtype)


def build_tensor(dtype: str, layout: Layout, values: Values,
                 device: str | torch.device = "cpu") -> torch.Tensor:
    """One tensor, rebuilt bit for bit: a storage made on the CPU (seeded, then specials;
    at the address of a freed one of its size, ``recycling``), moved to ``device``, viewed
    with ``layout``'s shape, strides and storage offset."""
    storage = _random_storage(dtype, values, max(layout.storage_size, 1))
    _apply_specials(storage, values.specials)
    storage = upload(recycling.take(storage), device)
    return storage.as_strided(layout.shape, layout.strides, layout.storage_offset)


def materialise(case: Case, device: str | torch.device = "cpu",
                name: str | None = None) -> torch.Tensor:
    """The first tensor the op reads (or its other tensor ``name``), rebuilt bit for bit
    on ``device`` (``build_tensor``)."""
    layout, values = (case.layout, case.values) if name is None else case.operand(name)
    return build_tensor(case.dtype, layout, values, device)


#: Largest storage ``upload`` stages through pinned memory: bigger ones (a reproducer of a
#: large Case) take the plain copy, as pinning gigabytes is slow and torch's host allocator
#: keeps the block for the life of the process. Fuzz Cases are far below it.
STAGE_MAX_BYTES = 1 << 24


def upload(t: torch.Tensor, device: str | torch.device) -> torch.Tensor:
    """``t`` copied to ``device`` without the host waiting for the copy (CUDA), else ``.to``.

    Why: a copy from pageable host memory makes the host wait for the GPU, so each valid
    Case waited twice instead of once and each invalid Case once instead of never
    (benchmarks/probes/sync_census.py on an H200). Staged through a fresh pinned buffer (torch's
    caching host allocator keeps it until the copy is done), the copy is queued like a
    kernel. It removes those waits; what they cost where processes share a GPU is not
    pinned down (BENCHMARKS.md). Callers pass whole contiguous storages, which both copies
    move as bytes, never as values (no bool or NaN normalised).
    """
    device = torch.device(device)
    if (device.type != "cuda" or t.device.type != "cpu"
            or t.numel() * t.element_size() > STAGE_MAX_BYTES):
        return t.to(device)
    staged = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
    staged.copy_(t)  # always a copy: the caller may change t once this returns
    return staged.to(device, non_blocking=True)



__all__ = ["DTYPE_NAMES", "JSON_VERSION", "STAGE_MAX_BYTES", "Case", "Layout", "Values",
           "available_dtypes", "build_tensor", "contiguous_strides",
           "dtype_of", "materialise", "special_repr", "upload"]
