"""Covering Cases: every valid t-way combination of an op's factor model, as Cases.

``classify(case)`` names the level of each factor of the op's model
(``diagfuzz.specs.factors``) that a Case has: the one definition of every level. ``build``
makes a Case of a full assignment of levels, deterministically from a seed, and checks it
against ``classify`` (a Case that classifies otherwise is a bug of the builder, raised).
``covering_cases(op)`` is the op's covering array (``diagfuzz.core.covering``) made into
Cases; ``measure(cases)`` is the 2-, 3- and 4-way coverage of any judged Cases per op.

Not Hypothesis: no draw, no shrinking here; a failing covering Case is judged, grouped and
reproduced as any other Case (the gate's covering stage, the suite's explicit examples).
"""

from __future__ import annotations

import json
import random
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from math import prod
from pathlib import Path

from diagfuzz.core.case import Case, Layout, Values, available_dtypes, contiguous_strides
from diagfuzz.core.covering import Coverage, Model, coverage, covering_array
from diagfuzz.core.geometry import Diagonal, diagonal_of, wrap_dim
from diagfuzz.specs import SPECS, spec_of
from diagfuzz.specs.base import OpSpec
from diagfuzz.specs.factors import MODEL_VERSION, VALUES_OF, layout_factor, model_of
from diagfuzz.strategies._boundary import BOUNDARY_BLOCKS
from diagfuzz.strategies._cases import diagonal_position, view_position
from diagfuzz.strategies._values import COMPLEX_HALVES, FLOAT_FORMATS, special_table

#: The seed of the gate's covering Cases (fixed: the gate is deterministic).
COVERING_SEED = 0
#: The t of the t-way coverage a report gives over every factor of a model (the core's
#: is given at the model's core strength, 4).
STRENGTHS = (2, 3)
#: Combinations never reached that a report names, per op and t.
SHOW_MISSING = 3
#: |offset| from which an offset is "extreme" (past int32).
EXTREME = 2**31
#: The block a "block_edge" diagonal sits at (the smallest of BOUNDARY_BLOCKS: cheap).
BLOCK = BOUNDARY_BLOCKS[0]
#: dtypes of each dtype family, the builder's choices first.
FAMILY_DTYPES = {"float32": ("float32",), "reduced": ("bfloat16", "float16"),
                 "float64": ("float64",),
                 "integer": ("int32", "int64", "int16", "int8", "uint8"),
                 "bool": ("bool",), "complex": ("complex64", "complex128")}
#: Builder attempts per row before it gives up (each draws new free parameters).
ATTEMPTS = 200


# --- classification ----------------------------------------------------------------------

def _dims_levels(case: Case, rank: int, d1: int, d2: int) -> dict[str, str]:
    low, high = min(d1, d2), max(d1, d2)
    if (low, high) == (0, 1):
        pair = "first_two"
    elif (low, high) == (rank - 2, rank - 1):
        pair = "last_two"
    elif high - low == 1:
        pair = "inner"
    else:
        pair = "apart"
    negative = (case.dim1 < 0) + (case.dim2 < 0)
    return {"dims_pair": pair, "dims_order": "ascending" if d1 < d2 else "descending",
            "dims_spelling": ("positive", "mixed", "negative")[negative]}


def offset_level(offset: int, rows: int, cols: int) -> str:
    """The offset's level: its size along the dim it runs along (``offset_class``'s
    classes, with |offset| >= EXTREME "extreme")."""
    if offset == 0:
        return "zero"
    size, magnitude = (cols if offset > 0 else rows), abs(offset)
    if magnitude == 1:
        return "one"
    if magnitude >= EXTREME:
        return "extreme"
    if magnitude == size - 1:
        return "last"
    if magnitude == size:
        return "size"
    return "inside" if magnitude < size else "beyond"


def size_level(sizes: tuple[int, ...], offset: int, d1: int, d2: int) -> str:
    """How the sizes relate (one, offset_equal, batch_equal, square, tall, wide)."""
    rows, cols = sizes[d1], sizes[d2]
    if min(rows, cols) == 1:
        return "one"
    other = rows if offset > 0 else cols
    if offset != 0 and other == abs(offset):
        return "offset_equal"
    batch = [n for d, n in enumerate(sizes) if d not in (d1, d2)]
    if any(n >= 2 and n in (rows, cols) for n in batch):
        return "batch_equal"
    return "square" if rows == cols else "tall" if rows > cols else "wide"


def length_level(length: int) -> str:
    if length == 0:
        return "empty"
    if length == 1:
        return "one"
    return "block_edge" if any(abs(length - b) <= 1 for b in BOUNDARY_BLOCKS) else "small"


def layout_level(layout: Layout) -> str:
    """A layout's level from its kinds (a combination counts as its rarest kind)."""
    kinds = set(layout.kinds)
    for kind, level in (("expanded", "expanded"), ("channels_last", "channels_last"),
                        ("permuted", "transposed"), ("sliced", "sliced"),
                        ("offset", "storage_offset")):
        if kind in kinds:
            return level
    return "contiguous"


def dtype_level(dtype: str) -> str | None:
    for family, names in FAMILY_DTYPES.items():
        if dtype in names:
            return family
    return None


def _special_class(dtype: str, bits: int) -> str:
    """The value level of one special pattern."""
    if dtype in COMPLEX_HALVES:
        half = COMPLEX_HALVES[dtype]
        width = 8 * (8 if half == "float64" else 4)
        real = _special_class(half, bits & ((1 << width) - 1))
        imag = _special_class(half, bits >> width)
        return real if real != "plain" else imag
    if dtype in FLOAT_FORMATS:
        fmt = FLOAT_FORMATS[dtype]
        exp, man = bits & fmt.exp_mask, bits & fmt.man_mask
        if fmt.style == "ieee" and exp == fmt.exp_mask:
            return "nan" if man else "inf"
        if exp == 0:
            return "subnormal" if man else ("signed_zero" if bits & fmt.sign else "plain")
        return "plain"
    table = special_table(dtype)
    return "int_extreme" if dtype != "bool" and bits in table[2:] else "plain"


#: Value levels, rarest first: a Case with several counts as the first it holds.
_VALUE_ORDER = ("nan", "inf", "subnormal", "signed_zero", "int_extreme")


def values_level(case: Case) -> str:
    """The rarest class among the Case's special patterns (any tensor's), else plain."""
    found = {_special_class(case.dtype, bits)
             for values in [case.values, *(v for _, _, v in case.others)]
             for _, bits in values.specials}
    return next((v for v in _VALUE_ORDER if v in found), "plain")


def classify(case: Case) -> dict[str, str]:
    """The level of every factor of ``case.op``'s model that ``case`` has; an invalid Case
    (or one outside the model: rank 5, a float8 dtype) leaves those factors out."""
    if case.invalid or case.raw_args:
        return {}
    spec = spec_of(case.op)
    model = model_of(spec)
    rank = len(case.sizes)
    try:
        d1, d2 = wrap_dim(case.dim1, rank), wrap_dim(case.dim2, rank)
        diag = diagonal_of(case.sizes, case.offset, case.dim1, case.dim2)
    except (IndexError, RuntimeError):
        return {}
    levels: dict[str, str | None] = {"rank": str(rank), **_dims_levels(case, rank, d1, d2),
                                     "offset": offset_level(case.offset, case.sizes[d1],
                                                            case.sizes[d2]),
                                     "offset_sign": "negative" if case.offset < 0
                                     else "positive",
                                     "sizes": size_level(case.sizes, case.offset, d1, d2),
                                     "diag_len": length_level(diag.length),
                                     "dtype": dtype_level(case.dtype),
                                     "values": values_level(case),
                                     "call": "out" if case.out_dtype or case.out_device
                                     else "functional"}
    tensors = [(spec.first.name, case.layout), *((n, lay) for n, lay, _ in case.others)]
    for name, layout in tensors:
        levels[layout_factor(name)] = layout_level(layout)
    out = {}
    for factor in model.factors:
        level = levels.get(factor.name)
        if level in factor.levels:
            out[factor.name] = level
    return out  # type: ignore[return-value]


# --- building ----------------------------------------------------------------------------

class CannotBuild(ValueError):
    """A valid assignment of levels the builder found no Case for (a builder bug)."""


def build(op: str, levels: Mapping[str, str], seed: int = 0,
          dtypes: Collection[str] | None = None) -> Case:
    """A valid Case of ``op`` with exactly ``levels`` (a full assignment of the op's
    model), the same for the same arguments. Free choices (which sizes, which
    special patterns, which dtype of a family: of ``dtypes`` where given) come from a
    seeded ``random.Random``."""
    spec = spec_of(op)
    model = model_of(spec)
    missing = [f.name for f in model.factors if f.name not in levels]
    if missing:
        raise ValueError(f"build({op!r}): no level for {missing}")
    if not model.valid(levels):
        raise ValueError(f"build({op!r}): {dict(levels)} breaks the model's constraints")
    key = json.dumps(sorted(levels.items()))
    rng = random.Random(f"{op}|{seed}|{key}")
    want = {f.name: levels[f.name] for f in model.factors}
    for _ in range(ATTEMPTS):
        case = _attempt(spec, want, rng, dtypes)
        if case is not None and classify(case) == want:
            return case
    raise CannotBuild(f"build({op!r}): no Case found for {want}")


def _attempt(spec: OpSpec, want: Mapping[str, str], rng: random.Random,
             dtypes: Collection[str] | None = None) -> Case | None:
    rank = int(want.get("rank", spec.ranks[0]))
    dims = _dims(spec, want, rank, rng)
    if dims is None:
        return None
    dim1, dim2, d1, d2 = dims
    geometry = _geometry(spec, want, rng)
    if geometry is None:
        return None
    rows, cols, offset = geometry
    sizes = _sizes(want, rank, d1, d2, rows, cols, rng)
    dtype = _dtype(want["dtype"], rng, dtypes)
    if dtype is None:
        return None
    diag = diagonal_of(sizes, offset, d1, d2)
    tensors = []
    for k, operand in enumerate(spec.operands):
        full = operand.role == "full"
        shape = sizes if full else diag.shape
        layout = _layout(want[layout_factor(operand.name)], shape, rng)
        if layout is None:
            return None
        reads = diag if full and operand.specials == "read" else None
        tensors.append((operand.name, layout,
                        _values(want["values"], dtype, layout, reads, rng.randrange(2**31),
                                k)))
    (_, layout, values), *others = tensors
    out = dtype if want["call"] == "out" else ""
    return Case(spec.name, sizes, offset, dim1, dim2, dtype, layout, values, out_dtype=out,
                others=tuple(others))


def _dims(spec: OpSpec, want: Mapping[str, str], rank: int,
          rng: random.Random) -> tuple[int, int, int, int] | None:
    if spec.dims is not None:
        return spec.dims[0], spec.dims[1], spec.dims[0] % rank, spec.dims[1] % rank
    pair = want["dims_pair"]
    pairs = {"first_two": [(0, 1)], "last_two": [(rank - 2, rank - 1)],
             "inner": [(k, k + 1) for k in range(1, rank - 2)],
             "apart": [(a, b) for a in range(rank) for b in range(a + 2, rank)]}[pair]
    if not pairs:
        return None
    low, high = rng.choice(pairs)
    d1, d2 = (low, high) if want["dims_order"] == "ascending" else (high, low)
    spelling = want["dims_spelling"]
    neg1 = spelling == "negative" or (spelling == "mixed" and rng.random() < 0.5)
    neg2 = spelling == "negative" or (spelling == "mixed" and not neg1)
    return (d1 - rank if neg1 else d1), (d2 - rank if neg2 else d2), d1, d2


def _length(level: str, rng: random.Random) -> int:
    return {"empty": 0, "one": 1, "small": rng.randint(2, 5),
            "block_edge": BLOCK + rng.randint(-1, 1)}[level]


def _geometry(spec: OpSpec, want: Mapping[str, str],
              rng: random.Random) -> tuple[int, int, int] | None:
    """(rows, cols, offset) of the diagonal dims with the wanted offset, size relation
    and length; None when this attempt's free choices miss (the caller tries again)."""
    level, relation = want["offset"], want["sizes"]
    negative = want["offset_sign"] == "negative"
    length = _length(want["diag_len"], rng)
    if spec.square:  # an m x m result, m = length + |offset|
        magnitude = {"zero": 0, "one": 1}.get(level, rng.randint(2, 4))
        m = length + magnitude
        if level == "size":
            m = magnitude = rng.randint(2, 5)
        return m, m, -magnitude if negative else magnitude
    # along: the diagonal dim the offset runs along; other: the other one.
    if level == "zero":
        magnitude = 0
    elif level == "one":
        magnitude = 1
    elif level == "extreme":
        magnitude = rng.choice((2**63 - 1, 2**63 if negative else 2**63 - 1, EXTREME + 7))
    else:
        magnitude = rng.randint(2, 6) if length < BLOCK - 1 else rng.randint(2, 3)
    if relation == "offset_equal" and level == "inside":
        magnitude = length  # the other dim, |offset| and the length alike
    if relation == "offset_equal":
        other = magnitude
    elif relation == "one":
        other = 1
    else:
        other = None
    if level in ("zero", "one", "inside"):
        if other is None:
            other = length + rng.choice((0, 0, 1, 2, 3))
        along = magnitude + (length if other > length else length + rng.choice((0, 1, 2)))
        if level == "inside" and along < magnitude + 2:
            along = magnitude + 2
    elif level == "last":
        along = magnitude + 1
        if other is None:
            other = rng.randint(1, 6)
    elif level == "size":
        along = magnitude
        if other is None:
            other = rng.randint(1, 6)
    elif level == "beyond":
        along = rng.randint(1, max(1, magnitude - 1))
        if other is None:
            other = rng.randint(1, 6)
    else:  # extreme
        along = rng.randint(1, 6)
        if other is None:
            other = rng.randint(1, 6)
    if relation == "square":
        other = along if level not in ("zero",) else other
        if level == "zero":
            along = other
    elif relation in ("tall", "wide") and other == along:
        return None
    rows, cols = (other, along) if not negative else (along, other)
    if (relation == "tall" and rows <= cols) or (relation == "wide" and rows >= cols):
        rows, cols = (cols, rows) if level == "zero" else (rows, cols)
    offset = -magnitude if negative else magnitude
    return rows, cols, offset


def _sizes(want: Mapping[str, str], rank: int, d1: int, d2: int, rows: int, cols: int,
           rng: random.Random) -> tuple[int, ...]:
    batch_dims = [d for d in range(rank) if d not in (d1, d2)]
    taken = {rows, cols}
    sizes = [0] * rank
    sizes[d1], sizes[d2] = rows, cols
    for d in batch_dims:
        sizes[d] = rng.choice([n for n in (1, 2, 3, 5) if n not in taken] or [1])
    if want["sizes"] == "batch_equal" and batch_dims:
        sizes[rng.choice(batch_dims)] = rng.choice([n for n in (rows, cols) if n >= 2] or [2])
    return tuple(sizes)


def _dtype(family: str, rng: random.Random,
           dtypes: Collection[str] | None = None) -> str | None:
    names = [d for d in FAMILY_DTYPES[family] if d in available_dtypes()
             and (dtypes is None or d in dtypes)]
    return rng.choice(names) if names else None


def _physical(shape: tuple[int, ...], order: list[int],
              steps: list[int] | None = None) -> tuple[int, ...]:
    """Strides of ``shape`` laid out in ``order`` (outermost first), each dim's stride
    times its step."""
    steps = steps or [1] * len(shape)
    strides = [0] * len(shape)
    size = 1
    for d in reversed(order):
        strides[d] = size * steps[d]
        size *= max(shape[d], 1) * steps[d]
    return tuple(strides)


def _layout(level: str, shape: tuple[int, ...], rng: random.Random) -> Layout | None:
    rank = len(shape)
    plain = contiguous_strides(shape)
    if level == "contiguous":
        return Layout.contiguous(shape)
    if level == "storage_offset":
        return Layout(shape, plain, rng.randint(1, 7), ("offset",))
    if level == "sliced":
        steps = [1] * rank
        steps[rng.randrange(rank)] = rng.randint(2, 3)
        return Layout(shape, _physical(shape, list(range(rank)), steps), 0, ("sliced",))
    if level == "expanded":
        wide = [d for d in range(rank) if shape[d] > 1] or list(range(rank))
        d = rng.choice(wide)
        dense = _physical(tuple(1 if k == d else n for k, n in enumerate(shape)),
                          list(range(rank)))
        return Layout(shape, tuple(0 if k == d else st for k, st in enumerate(dense)), 0,
                      ("expanded",))
    if level == "transposed":
        order = list(reversed(range(rank))) if rng.random() < 0.5 or rank < 3 else \
            rng.sample(range(rank), rank)
        permuted = _physical(shape, order)
        return None if permuted == plain else Layout(shape, permuted, 0, ("permuted",))
    if level == "channels_last" and rank >= 3:
        last = _physical(shape, [0, *range(2, rank), 1])
        return None if last == plain else Layout(shape, last, 0, ("channels_last",))
    return None


def _patterns(level: str, dtype: str) -> list[int]:
    """Bit patterns of value class ``level`` for ``dtype`` (complex: in either half)."""
    if dtype in COMPLEX_HALVES:
        half = COMPLEX_HALVES[dtype]
        width = 64 if half == "float64" else 32
        one = 0x3FF0000000000000 if half == "float64" else 0x3F800000
        return [p | one << width for p in _patterns(level, half)] + [
            one | p << width for p in _patterns(level, half)]
    if level == "int_extreme":
        return list(special_table(dtype)[2:])
    fmt = FLOAT_FORMATS[dtype]
    s, e, m = fmt.sign, fmt.exp_mask, fmt.man_mask
    quiet = 1 << (fmt.man_bits - 1)
    return {"nan": [s | e | quiet | 1, e | 1, e | quiet | m >> 1],
            "signed_zero": [s],
            "subnormal": [1, s | m],
            "inf": [e, s | e]}[level]


def _values(level: str, dtype: str, layout: Layout, diag: Diagonal | None, seed: int,
            k: int) -> Values:
    """Seeded values; for a special level, its patterns on the first elements the op
    reads (the diagonal of a full tensor, all of a diagonal-shaped one)."""
    if level == "plain" or level not in VALUES_OF.get(dtype_level(dtype) or "", ()):
        return Values(seed)
    numel = prod(layout.shape)
    if diag is not None:
        numel = prod(diag.shape)
        where = diagonal_position(layout, diag)
    else:
        where = view_position(layout)
    if numel == 0:
        return Values(seed)
    patterns = _patterns(level, dtype)
    count = min(numel, 4)
    specials = tuple((where((i * 7 + k) % numel), patterns[i % len(patterns)])
                     for i in range(count))
    return Values(seed, "normal", specials)


# --- the covering Cases of an op, and their cache ----------------------------------------

@dataclass(frozen=True)
class CoveringSet:
    """An op's covering Cases and the model rows they were built from."""

    op: str
    rows: tuple[tuple[tuple[str, str], ...], ...]
    cases: tuple[Case, ...]


def cache_dir() -> Path:
    """Where covering arrays are kept between runs (``DIAGFUZZ_CACHE``, else
    ``~/.cache/diagfuzz``): generating one takes seconds, reading it milliseconds."""
    import os

    root = os.environ.get("DIAGFUZZ_CACHE") or Path.home() / ".cache" / "diagfuzz"
    return Path(root) / "covering"


def model_key(model: Model, seed: int) -> str:
    """What a cached array depends on: the model's factors, levels, constraints (by the
    combinations they allow) and strengths, and the seed."""
    import hashlib

    text = json.dumps([MODEL_VERSION, seed, model.name, model.strength, model.core_strength,
                       list(model.core), [[f.name, list(f.levels)] for f in model.factors],
                       [[list(c.factors), c.why] for c in model.constraints],
                       [sorted(a) for _, a in model._rules]])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def inapplicable(op: str, dtypes: Collection[str] | None, has_out: bool
                 ) -> dict[str, frozenset[str]]:
    """The levels of ``op``'s model an implementation cannot take (factor -> levels): the
    dtype families with none of the ``dtypes`` it declares (None: it declares none),
    ``call=out`` without an ``.out`` method."""
    drop: dict[str, frozenset[str]] = {}
    if dtypes is not None:
        families = {dtype_level(d) for d in dtypes}
        drop["dtype"] = frozenset(f for f in FAMILY_DTYPES if f not in families)
    if not has_out and spec_of(op).has_out:  # an in-place op's model has no call=out
        drop["call"] = frozenset({"out"})
    return {f: levels for f, levels in drop.items() if levels}


def _frozen(drop: Mapping[str, Collection[str]] | None) -> tuple[tuple[str, tuple[str, ...]],
                                                                   ...]:
    return tuple(sorted((f, tuple(sorted(v))) for f, v in (drop or {}).items() if v))


def narrowed_model(op: str, drop: Mapping[str, Collection[str]] | None = None) -> Model:
    """``op``'s model without the levels ``drop`` names: one instance per narrowing, so
    the combinations it knows valid are worked out once for the array and the measure."""
    return _narrowed(op, _frozen(drop))


@cache
def _narrowed(op: str, drop: tuple[tuple[str, tuple[str, ...]], ...]) -> Model:
    return model_of(spec_of(op)).narrowed(dict(drop))


def covering_rows(op: str, seed: int = COVERING_SEED,
                  drop: Mapping[str, Collection[str]] | None = None) -> list[dict[str, str]]:
    """The covering array of ``op``'s model (without the levels ``drop`` names), from the
    cache where it is there."""
    model = narrowed_model(op, drop)
    path = cache_dir() / f"{op}-{model_key(model, seed)}.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        model.prime(data["valid"])
        return list(data["rows"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    rows = covering_array(model, seed)
    for t in STRENGTHS:  # what ``measure`` needs, made once with the array
        for idx in model.sets(t):
            model.valid_combinations(idx)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{random.getrandbits(32):x}.tmp")
        tmp.write_text(json.dumps({"rows": rows, "valid": model.known_combinations()}),
                       encoding="utf-8")
        tmp.replace(path)
    except OSError:
        pass  # a read-only home: the array is made again next time
    return rows


def covering_set(op: str, seed: int = COVERING_SEED,
                 drop: Mapping[str, Collection[str]] | None = None,
                 dtypes: Collection[str] | None = None) -> CoveringSet:
    """``op``'s covering Cases, one per row of its covering array: of the model without
    the levels ``drop`` names, each Case of one of ``dtypes`` where given (what an
    implementation declares: ``inapplicable``)."""
    return _covering_set(op, seed, _frozen(drop),
                         None if dtypes is None else tuple(sorted(dtypes)))


@cache
def _covering_set(op: str, seed: int, drop: tuple[tuple[str, tuple[str, ...]], ...],
                  dtypes: tuple[str, ...] | None) -> CoveringSet:
    rows = covering_rows(op, seed, dict(drop))
    cases = tuple(build(op, row, seed, dtypes) for row in rows)
    return CoveringSet(op, tuple(tuple(sorted(r.items())) for r in rows), cases)


def covering_cases(ops: Iterable[str] | None = None, seed: int = COVERING_SEED) -> list[Case]:
    """The covering Cases of ``ops`` (default: every op), op by op in report order."""
    wanted = SPECS if ops is None else tuple(op for op in SPECS if op in set(ops))
    return [case for op in wanted for case in covering_set(op, seed).cases]


# --- measured coverage -------------------------------------------------------------------

def refused_levels(judged: Iterable[Mapping[str, str]],
                   refused: Iterable[Mapping[str, str]]) -> dict[str, set[str]]:
    """Per factor, the levels that occur only in Cases the implementation refused as
    unsupported (a dtype family it does not declare, ``.out`` where it has no ``.out``
    method), never in a judged Case: combinations holding one do not apply to it."""
    seen: dict[str, set[str]] = {}
    for row in judged:
        for factor, level in row.items():
            seen.setdefault(factor, set()).add(level)
    only: dict[str, set[str]] = {}
    for row in refused:
        for factor, level in row.items():
            if level not in seen.get(factor, set()):
                only.setdefault(factor, set()).add(level)
    return only


def measure(cases: Iterable[Case], strengths: Iterable[int] = STRENGTHS,
            show: int = SHOW_MISSING,
            excluded: Mapping[str, Mapping[str, set[str]]] | None = None
            ) -> dict[str, dict[str, Coverage]]:
    """Per op of ``cases``: the t-way coverage of its model (``"t"``: over every factor)
    and of its geometric core (``"core t"``) that the Cases reach (``excluded``: as
    ``measure_rows``)."""
    rows: dict[str, list[dict[str, str]]] = {}
    for case in cases:
        levels = classify(case)
        if levels:
            rows.setdefault(case.op, []).append(levels)
    return measure_rows(rows, strengths, show, excluded)


#: The (op, narrowing) whose model ``measure_rows`` primed from its array: once a process.
_PRIMED: set[tuple[str, tuple[tuple[str, tuple[str, ...]], ...]]] = set()


def measure_rows(rows: Mapping[str, list[dict[str, str]]],
                 strengths: Iterable[int] = STRENGTHS,
                 show: int = SHOW_MISSING,
                 excluded: Mapping[str, Mapping[str, set[str]]] | None = None
                 ) -> dict[str, dict[str, Coverage]]:
    """``measure`` of Cases already classified (``classify``), by op; ``excluded``: per
    op, the levels the implementation cannot take: measured against the model without
    them (``narrowed_model``), where the combinations they alone made possible go too."""
    out: dict[str, dict[str, Coverage]] = {}
    strengths = tuple(strengths)
    for op in SPECS:
        if op not in rows:
            continue
        gone = (excluded or {}).get(op)
        model = narrowed_model(op, gone)
        key = (op, _frozen(gone))
        if key not in _PRIMED:  # the cached array primes the model's combinations
            covering_rows(op, drop=gone)
            _PRIMED.add(key)
        found = {str(t): coverage(model, rows[op], t, show=show) for t in strengths}
        if model.core:
            t = min(model.core_strength, len(model.core))
            found[f"core {t}"] = coverage(model, rows[op], t, model.core, show=show)
        out[op] = found
    return out


def coverage_lines(measured: Mapping[str, Mapping[str, Coverage]]) -> list[str]:
    """One line per op: the shares, then the first combinations never reached."""
    lines = []
    for op, found in measured.items():
        shares = ", ".join(f"{t}-way {c.share:.1%} ({c.covered:,}/{c.total:,})"
                           for t, c in found.items())
        lines.append(f"{op}: {shares}")
        missing = [c for cov in found.values() for c in cov.missing][:SHOW_MISSING]
        if missing:
            named = "; ".join(" + ".join(f"{f}={lv}" for f, lv in combo) for combo in missing)
            lines.append(f"  never reached: {named}")
    return lines


__all__ = ["COVERING_SEED", "STRENGTHS", "CannotBuild", "CoveringSet", "build", "classify",
           "coverage_lines", "covering_cases", "covering_rows", "covering_set",
           "inapplicable", "measure", "refused_levels"]
