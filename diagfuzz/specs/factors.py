"""The factor model of each op: the input properties a kernel's fast path may key on.

Declared once for the family and narrowed per op by what its spec says (``OpSpec.dims``
fixed: no dims factors; ``OpSpec.square``: the two diagonal dims are one size, so no tall,
wide or out-of-range offsets; ``OpSpec.max_rank``; one layout factor per tensor the op
reads). ``diagfuzz.core.covering`` makes covering arrays of a model, and
``diagfuzz.strategies.covering`` turns their rows into Cases and Cases back into rows.

Factors (each level is defined by ``diagfuzz.strategies.covering.classify``, the one
definition the builder's Cases are checked against):

- ``rank``: 2, 3, 4 (rank of ``Case.sizes``);
- ``dims_pair``: first_two, last_two (rank >= 3), inner (adjacent, neither end: rank 4),
  apart (not adjacent); ``dims_order``: ascending, descending; ``dims_spelling``:
  positive, negative, mixed;
- ``offset``: zero, one, inside (2 .. size - 2), last (size - 1), size, beyond, extreme
  (|offset| >= 2**31), "size" being the diagonal dim the offset runs along
  (``strategies.offset_class``); ``offset_sign``: positive, negative;
- ``sizes``: how the sizes relate: one (a diagonal dim of 1), offset_equal (the other
  diagonal dim equals |offset|), batch_equal (a batch dim equals a diagonal dim), else
  square, tall (dim1 longer) or wide, checked in that order;
- ``diag_len``: empty, one, small (2 .. 62), block_edge (within one of a block of
  ``strategies.BOUNDARY_BLOCKS``), the diagonal's length;
- ``layout_<tensor>`` per tensor the op reads: contiguous, transposed (any permuted
  order), sliced (a step), storage_offset, expanded (a stride-0 dim), channels_last;
- ``dtype``: float32, reduced (float16, bfloat16), float64, integer, bool, complex;
- ``values`` on what the op reads: plain, nan (payloads, signalling), signed_zero,
  subnormal, inf, int_extreme (min, max, -1);
- ``call``: functional or out=.

The geometric core (rank, dims_pair, offset, sizes and the first tensor's layout) is
covered at strength 4, every factor at strength 3.
"""

from __future__ import annotations

from diagfuzz.core.covering import Constraint, Factor, Model
from diagfuzz.specs.base import OpSpec

RANKS = ("2", "3", "4")
DIMS_PAIRS = ("first_two", "last_two", "inner", "apart")
DIMS_ORDERS = ("ascending", "descending")
DIMS_SPELLINGS = ("positive", "negative", "mixed")
OFFSETS = ("zero", "one", "inside", "last", "size", "beyond", "extreme")
#: The offsets that leave the diagonal empty.
EMPTY_OFFSETS = ("size", "beyond", "extreme")
OFFSET_SIGNS = ("positive", "negative")
SIZE_RELATIONS = ("square", "tall", "wide", "one", "offset_equal", "batch_equal")
DIAG_LENGTHS = ("empty", "one", "small", "block_edge")
LAYOUTS = ("contiguous", "transposed", "sliced", "storage_offset", "expanded",
           "channels_last")
DTYPES = ("float32", "reduced", "float64", "integer", "bool", "complex")
VALUES = ("plain", "nan", "signed_zero", "subnormal", "inf", "int_extreme")
CALLS = ("functional", "out")
#: The value classes each dtype family has.
FLOAT_VALUES = ("plain", "nan", "signed_zero", "subnormal", "inf")
VALUES_OF = {"float32": FLOAT_VALUES, "reduced": FLOAT_VALUES, "float64": FLOAT_VALUES,
             "complex": FLOAT_VALUES, "integer": ("plain", "int_extreme"), "bool": ("plain",)}
#: Version of the model's declaration: part of the key of cached covering arrays.
MODEL_VERSION = 1


def layout_factor(name: str) -> str:
    """The layout factor of the tensor argument ``name``."""
    return f"layout_{name}"


def _operand_rank_floor(role: str, layout: str) -> int:
    """The least rank of ``Case.sizes`` at which a tensor of ``role`` can have ``layout``
    (a diagonal-shaped tensor has one dim fewer)."""
    need = {"transposed": 2, "channels_last": 3}.get(layout, 1)
    return need + (role == "diagonal")


_MODELS: dict[str, Model] = {}


def model_of(spec: OpSpec) -> Model:
    """The factor model of ``spec``'s op (made once per op)."""
    model = _MODELS.get(spec.name)
    if model is None:
        model = _MODELS[spec.name] = _model(spec)
    return model


def _model(spec: OpSpec) -> Model:
    top = spec.max_rank or int(RANKS[-1])
    ranks = tuple(r for r in RANKS if spec.ranks[0] <= int(r) <= min(top, spec.ranks[1]))
    factors: list[Factor] = []
    if len(ranks) > 1:
        factors.append(Factor("rank", ranks))
    fixed_dims = spec.dims is not None
    if not fixed_dims:
        factors += [Factor("dims_pair", DIMS_PAIRS), Factor("dims_order", DIMS_ORDERS),
                    Factor("dims_spelling", DIMS_SPELLINGS)]
    offsets = tuple(o for o in OFFSETS if not (spec.square and o in ("beyond", "extreme")))
    relations = tuple(r for r in SIZE_RELATIONS
                      if not (spec.square and r in ("tall", "wide"))
                      and not (r == "batch_equal" and int(ranks[-1]) < 3))
    factors += [Factor("offset", offsets), Factor("offset_sign", OFFSET_SIGNS),
                Factor("sizes", relations), Factor("diag_len", DIAG_LENGTHS)]
    top_rank = int(ranks[-1])
    for operand in spec.operands:
        levels = tuple(lay for lay in LAYOUTS
                       if _operand_rank_floor(operand.role, lay) <= top_rank)
        factors.append(Factor(layout_factor(operand.name), levels))
    factors += [Factor("dtype", DTYPES), Factor("values", VALUES),
                Factor("call", CALLS if spec.has_out else CALLS[:1])]
    names = {f.name for f in factors}
    core = tuple(n for n in ("rank", "dims_pair", "offset", "sizes",
                             layout_factor(spec.first.name)) if n in names)
    return Model(spec.name, tuple(factors), tuple(_constraints(spec, names)), core)


def _constraints(spec: OpSpec, names: set[str]) -> list[Constraint]:
    rules: list[Constraint] = []

    def rule(factors: tuple[str, ...], allows: object, why: str) -> None:
        if all(f in names for f in factors):
            rules.append(Constraint(factors, allows, why))  # type: ignore[arg-type]

    rule(("rank", "dims_pair"),
         lambda r, p: {"2": p == "first_two", "3": p != "inner"}.get(r, True),
         "rank 2 has one pair of dims; only rank 4 has an inner adjacent pair")
    rule(("rank", "sizes"), lambda r, z: z != "batch_equal" or r != "2",
         "a batch dim needs rank 3 or more")
    for operand in spec.operands:
        factor = layout_factor(operand.name)
        role = operand.role
        rule(("rank", factor),
             lambda r, lay, role=role: int(r) >= _operand_rank_floor(role, lay),
             f"{operand.name}: a permuted layout needs 2 dims, channels_last 3")
    rule(("offset", "offset_sign"), lambda o, s: o != "zero" or s == "positive",
         "offset 0 has no sign")
    rule(("offset", "diag_len"),
         lambda o, n: (n == "empty") == (o in EMPTY_OFFSETS) and (o != "last" or n == "one"),
         "an offset at or past the size empties the diagonal; size - 1 leaves one element")
    rule(("offset", "sizes", "diag_len"),
         lambda o, z, n: not (n == "one" and o in ("zero", "one", "inside")) or z == "one",
         "a diagonal of one element within the matrix needs a diagonal dim of 1")
    rule(("sizes", "diag_len"), lambda z, n: z != "one" or n in ("empty", "one"),
         "a diagonal dim of 1 leaves at most one element")
    rule(("sizes", "diag_len"), lambda z, n: not (z == "batch_equal" and n == "block_edge"),
         "a batch dim as long as a block-edge diagonal dim is too large a Case")
    rule(("offset", "sizes"),
         lambda o, z: z != "offset_equal" or o in ("inside", "last", "size", "beyond"),
         "the other diagonal dim equals |offset| only for |offset| >= 2 within int64 sizes")
    rule(("offset", "sizes"), lambda o, z: not (o == "size" and z == "square"),
         "a square matrix with |offset| = its size has the other dim equal to |offset|")
    rule(("dtype", "values"), lambda d, v: v in VALUES_OF[d],
         "each dtype family has its own special values")
    rule(("diag_len", "values"), lambda n, v: v == "plain" or n != "empty",
         "special values on the diagonal need a non-empty diagonal")
    if spec.square:
        rule(("offset", "sizes"), lambda o, z: (o == "size") == (z == "offset_equal"),
             "the result is a square of the diagonal's length plus |offset|")
        rule(("offset", "sizes"), lambda o, z: z != "one" or o == "zero",
             "a 1 x 1 result holds a diagonal only at offset 0")
    return rules


__all__ = ["CALLS", "DIAG_LENGTHS", "DIMS_ORDERS", "DIMS_PAIRS", "DIMS_SPELLINGS", "DTYPES",
           "EMPTY_OFFSETS", "LAYOUTS", "MODEL_VERSION", "OFFSETS", "OFFSET_SIGNS", "RANKS",
           "SIZE_RELATIONS", "VALUES", "VALUES_OF", "layout_factor", "model_of"]
