"""Invalid Cases: calls aten rejects, for error-parity checks.

Most classes start from a valid Case and break exactly one thing, so the error the Case
provokes is the one its ``invalid`` field names; the rank classes build their own sizes.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from math import prod
from typing import ClassVar, TypeVar

import torch
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from diagfuzz.core.case import Case, Layout, Values, available_dtypes
from diagfuzz.core.geometry import diagonal_of
from diagfuzz.specs import all_specs, spec_of
from diagfuzz.strategies._args import DEFAULT_MAX_ELEMENTS, DEFAULT_RANKS, check_kinds
from diagfuzz.strategies._cases import (
    INT64_MAX,
    Narrowing,
    case_strategy,
    draw_sizes,
    draw_some_layout,
    narrowing,
    placement,
)
from diagfuzz.strategies._draws import BOOLS, choice, fast, ints
from diagfuzz.strategies._values import draw_values

T = TypeVar("T")

#: The invalid classes in shrink order. The generic ones are broken here; an op's spec
#: breaks the others (``OpSpec.break_case``), and says which apply to it (``OpSpec.invalid``).
#: A class of a spec's not listed here comes after these, in the specs' order.
CLASS_ORDER = ("rank0", "rank1", "high_rank", "dim_above_range", "dim_below_range",
               "same_dims", "grad_output_shape", "src_shape", "negative_size", "huge_offset",
               "out_dtype", "out_device", "non_integer", "int_overflow", "non_tensor")


def _classes() -> dict[str, tuple[str, ...]]:
    """Each invalid class any op has, in shrink order, and the ops it applies to."""
    specs = all_specs()
    order = dict.fromkeys((*CLASS_ORDER, *(c for spec in specs for c in spec.invalid)))
    return {c: tuple(spec.name for spec in specs if c in spec.invalid) for c in order
            if any(c in spec.invalid for spec in specs)}


#: Invalid classes in shrink order, and the ops they apply to (from the op specs).
INVALID_CLASSES = _classes()
#: Every op with invalid classes.
OPS = tuple(dict.fromkeys(op for ops in INVALID_CLASSES.values() for op in ops))
#: Values that are not tensors, and not ints, as aten's schema sees them (a tuple stands
#: for a JSON list: the tables must be hashable).
NOT_TENSORS = (1.5, None, "x", (1, 2))
NOT_INTS = (1.5, "0", None, 1.0, (1,))
OVERFLOWING = (INT64_MAX + 1, -INT64_MAX - 2, 2**64)


def invalid_ops(op: str | Sequence[str] | None) -> tuple[str, ...]:
    """The ops an invalid strategy draws: ``op``, several, or every op (None), in report
    order; Hypothesis' InvalidArgument for an op without invalid classes."""
    if op is None:
        return OPS
    asked = (op,) if isinstance(op, str) else tuple(op)
    unknown = [o for o in asked if o not in OPS]
    if unknown or not asked:
        raise InvalidArgument(f"op={op!r} must be None, or one or more of {OPS}")
    return tuple(o for o in OPS if o in asked)


def invalid_cases(op: str | Sequence[str] | None = None, *,
                  classes: Collection[str] | None = None,
                  ranks: int | Sequence[int] = DEFAULT_RANKS,
                  dtypes: Sequence[str | torch.dtype] | None = None,
                  max_elements: int = DEFAULT_MAX_ELEMENTS,
                  layout_kinds: Collection[str] | None = None,
                  devices: Sequence[str] = ("meta",)) -> st.SearchStrategy[Case]:
    """Cases of ``op`` (an op, several, or None: every op) that aten rejects;
    ``Case.invalid`` names why.

    ``classes`` narrows INVALID_CLASSES: a dim above or below its range, dim1 == dim2 after
    normalisation (any spelling), rank 1 and rank 0 inputs (and diag's of rank 3 or more),
    a grad_output that does not broadcast to the diagonal (aten broadcasts one that does,
    so that is valid), a src not of the diagonal's shape, negative input_sizes, an offset
    whose result cannot exist, an ``out`` of another dtype or on another device
    (``devices``: devices other than the one the Cases will run on; default "meta";
    through ``.out``), non-integer or int64-overflowing int arguments and non-tensor
    tensor arguments (``Case.raw_args``). The other arguments narrow the valid Case each
    class starts from, as in ``diagonal_cases`` (each op within the ranks it has).

    Shrinks towards the earlier classes (a rank-0 input has the fewest choices of all), and
    within a class as ``diagonal_cases`` does.
    """
    return _invalid(*_prepared(op, classes, ranks, dtypes, max_elements, layout_kinds,
                               devices))


def broken_pairs(op: str | Sequence[str] | None = None, *,
                 max_elements: int = DEFAULT_MAX_ELEMENTS
                 ) -> st.SearchStrategy[tuple[Case, Case | None]]:
    """An invalid Case (``invalid_cases``) and the valid Case it broke, None for a class
    that builds its own sizes: a call sequence can make the valid call right after the
    refused one, its arguments but one the same (state an error path leaves behind)."""
    return _pairs(*_prepared(op, None, DEFAULT_RANKS, None, max_elements, None, ("meta",)))


def _prepared(op: str | Sequence[str] | None, classes: Collection[str] | None,
              ranks: int | Sequence[int], dtypes: Sequence[str | torch.dtype] | None,
              max_elements: int, layout_kinds: Collection[str] | None,
              devices: Sequence[str]) -> tuple[
                  tuple[str, ...], tuple[str, ...], Narrowing,
                  dict[str, st.SearchStrategy[Case]], tuple[str, ...]]:
    """``invalid_cases``' arguments checked: its ops, classes, narrowing, the valid Cases
    each op's classes break, and the devices of the out_device class."""
    ops = invalid_ops(op)
    applicable = tuple(c for c, for_ops in INVALID_CLASSES.items()
                       if any(o in for_ops for o in ops))
    chosen = check_kinds("classes", classes, applicable)
    ops = tuple(o for o in ops if any(o in INVALID_CLASSES[c] for c in chosen))
    if isinstance(devices, str) or not devices:
        raise InvalidArgument(f"devices={devices!r} must be a non-empty sequence of names")
    for device in devices:
        try:
            torch.device(device)
        except (RuntimeError, TypeError) as exc:
            raise InvalidArgument(f"devices: {device!r} is not a device ({exc})") from None
    n = narrowing(ranks=ranks, dtypes=dtypes, max_elements=max_elements,
                  layout_kinds=layout_kinds)
    # Broken Cases start from a smaller valid one: a wrong grad_output may be larger.
    base = replace(n, max_elements=max(1, n.max_elements // 4))
    valid = {o: case_strategy(o, base) for o in ops}
    return ops, chosen, n, valid, tuple(str(d) for d in devices)


#: Classes that build their own sizes instead of breaking a valid Case.
LOW_RANK = ("rank0", "rank1")


@st.composite
def _invalid(draw: st.DrawFn, ops: tuple[str, ...], classes: tuple[str, ...], n: Narrowing,
             valid: dict[str, st.SearchStrategy[Case]], devices: tuple[str, ...]) -> Case:
    return draw_invalid(fast(draw), ops, classes, n, valid, devices)[0]


@st.composite
def _pairs(draw: st.DrawFn, ops: tuple[str, ...], classes: tuple[str, ...], n: Narrowing,
           valid: dict[str, st.SearchStrategy[Case]],
           devices: tuple[str, ...]) -> tuple[Case, Case | None]:
    return draw_invalid(fast(draw), ops, classes, n, valid, devices)


def draw_invalid(draw: st.DrawFn, ops: tuple[str, ...], classes: tuple[str, ...],
                 n: Narrowing, valid: dict[str, st.SearchStrategy[Case]],
                 devices: tuple[str, ...]) -> tuple[Case, Case | None]:
    """One invalid Case, and the valid Case it broke (None for the LOW_RANK classes)."""
    op, kind = draw(choice(tuple((c_op, c) for c in classes for c_op in ops
                                 if c_op in INVALID_CLASSES[c])))
    if kind in LOW_RANK:
        return _low_rank(draw, op, kind, n), None
    case = draw(valid[op])
    return break_case(draw, kind, case, n, devices), case


@dataclass(frozen=True)
class BreakTools:
    """What an op's ``OpSpec.break_case`` draws with: the pieces of these strategies, under
    the run's narrowing ``n``. The strategies hand them to the spec with ``draw``, so a
    spec imports no strategy."""

    n: Narrowing
    #: A boolean, drawn as every strategy here draws one.
    BOOLS: ClassVar[st.SearchStrategy[bool]] = BOOLS

    @staticmethod
    def choice(options: tuple[T, ...]) -> st.SearchStrategy[T]:
        """One of ``options``, shrinking towards the first."""
        return choice(options)

    @staticmethod
    def ints(low: int, high: int) -> st.SearchStrategy[int]:
        """An int from ``low`` to ``high``, shrinking towards ``low``."""
        return ints(low, high)

    def sizes(self, draw: st.DrawFn, ranks: tuple[int, int]) -> tuple[int, ...]:
        """Sizes of a rank in ``ranks`` within the run's element budget."""
        return draw_sizes(draw, ranks, self.n.max_elements)

    def tensor(self, draw: st.DrawFn, shape: tuple[int, ...],
               dtype: str) -> tuple[Layout, Values]:
        """A layout the run allows for a tensor of ``shape``, then its values (specials
        anywhere in it)."""
        layout = draw_some_layout(draw, shape, self.n)
        return layout, draw_values(draw, dtype, placement(layout), self.n.value_modes)

    def wrong_diagonal_operand(self, draw: st.DrawFn, case: Case,
                               name: str | None = None) -> Case:
        """``case`` with a diagonal-shaped tensor that does not broadcast to the diagonal
        (``wrong_diagonal_operand``)."""
        return wrong_diagonal_operand(draw, case, self.n, name)

    @staticmethod
    def negative_size(draw: st.DrawFn, case: Case) -> Case:
        """``case`` with one of its sizes negative (``negative_size``)."""
        return negative_size(draw, case)


def break_case(draw: st.DrawFn, kind: str, case: Case, n: Narrowing,
               devices: tuple[str, ...]) -> Case:
    """``case`` (valid) broken as invalid class ``kind`` (not one of LOW_RANK) says."""
    op = case.op
    case = case.replace(invalid=kind)
    rank = len(case.sizes)
    if kind == "dim_above_range":
        bad = draw(choice((rank, rank + 1, rank + 2, INT64_MAX)))
        return case.replace(**{draw(choice(("dim1", "dim2"))): bad})
    if kind == "dim_below_range":
        bad = draw(choice((-rank - 1, -rank - 2, -rank - 3, -INT64_MAX - 1)))
        return case.replace(**{draw(choice(("dim1", "dim2"))): bad})
    if kind == "same_dims":
        d = draw(ints(0, rank - 1))
        spell = [d - rank if draw(BOOLS) else d for _ in range(2)]
        return case.replace(dim1=spell[0], dim2=spell[1])
    spec = spec_of(op)
    if spec.break_case is not None:
        broken = spec.break_case(draw, kind, case, BreakTools(n))
        if broken is not None:
            return broken
    if kind == "out_dtype":
        others = [d for d in n.dtypes if d != case.dtype] or [
            d for d in available_dtypes() if d != case.dtype]
        return case.replace(out_dtype=draw(choice(tuple(others))))
    if kind == "out_device":
        return case.replace(out_device=draw(choice(devices)))
    sizes = [a for a in spec.arguments if spec.fields.get(a, a) == "input_sizes"]
    names = [a for a in spec.arguments if a not in sizes]
    if kind == "non_integer":
        names += sizes
        name = draw(choice(tuple(names)))
        if name not in sizes:
            value = _as_json(draw(choice(NOT_INTS)))
        elif draw(BOOLS):
            value = [*case.sizes[:-1], 1.5]
        else:
            value = len(case.sizes)  # an int where aten wants a list of ints
        return case.replace(raw_args=((name, value),))
    if kind == "int_overflow":
        name = draw(choice(tuple(names)))
        return case.replace(raw_args=((name, draw(choice(OVERFLOWING))),))
    tensor = spec.first.name
    return case.replace(raw_args=((tensor, _as_json(draw(choice(NOT_TENSORS)))),))


def _low_rank(draw: st.DrawFn, op: str, kind: str, n: Narrowing) -> Case:
    """Sizes of rank 0 or 1, any small dims and offset; each tensor the op reads shaped
    like the sizes (a "full" one) or small and of any rank up to 2 (a "diagonal" one; of
    rank 0 for an op that makes the sizes from it, ``OpSpec.square``: a rank-1 result)."""
    spec = spec_of(op)
    rank = 0 if kind == "rank0" else 1
    sizes = draw_sizes(draw, (rank, rank), n.max_elements)
    dim1, dim2, offset = draw(ints(-2, 2)), draw(ints(-2, 2)), draw(ints(-2, 2))
    if spec.dims is not None:
        dim1, dim2 = spec.dims
    dtype = draw(choice(n.dtypes))
    tensors = []
    for operand in spec.operands:
        if operand.role == "full":
            shape = sizes
        elif spec.square:
            shape = sizes[:-1]
        else:
            shape = draw_sizes(draw, (0, 2), n.max_elements)
        layout = draw_some_layout(draw, shape, n)
        tensors.append((operand.name, layout,
                        draw_values(draw, dtype, placement(layout), n.value_modes)))
    (_, layout, values), *others = tensors
    return Case(op, sizes, offset, dim1, dim2, dtype, layout, values, invalid=kind,
                others=tuple(others))


def negative_size(draw: st.DrawFn, case: Case) -> Case:
    """``case`` with one of its sizes negative (an op taking the sizes as an argument)."""
    i = draw(ints(0, len(case.sizes) - 1))
    bad = -draw(ints(1, 3))
    return case.replace(sizes=(*case.sizes[:i], bad, *case.sizes[i + 1:]))


def wrong_diagonal_operand(draw: st.DrawFn, case: Case, n: Narrowing,
                           name: str | None = None) -> Case:
    """The Case with its diagonal-shaped tensor (the first, or ``name``) of a shape that
    does not broadcast to the diagonal's."""
    diag = diagonal_of(case.sizes, case.offset, case.dim1, case.dim2).shape
    if draw(BOOLS):
        shape = (*(draw(ints(1, 3)) for _ in range(draw(ints(1, 2)))), *diag)
    else:
        i = draw(ints(0, len(diag) - 1))
        bad = draw(choice(tuple(v for v in range(diag[i] + 4) if v not in (diag[i], 1))))
        shape = (*diag[:i], bad, *diag[i + 1:])
    assert not broadcastable(shape, diag), (shape, diag)
    budget = max(n.max_elements, prod(max(s, 1) for s in shape))
    layout = draw_some_layout(draw, shape, n, budget)
    values = draw_values(draw, case.dtype, placement(layout), n.value_modes)
    if name is None:
        return case.replace(layout=layout, values=values)
    return case.replace(others=tuple(
        (other, layout, values) if other == name else (other, lay, v)
        for other, lay, v in case.others))


def broadcastable(source: Sequence[int], target: Sequence[int]) -> bool:
    """Whether ``copy_`` broadcasts ``source`` to ``target`` (never adds leading dims)."""
    if len(source) > len(target):
        return False
    return all(s in (t, 1) for s, t in zip(reversed(source), reversed(target), strict=False))


def _as_json(value: object) -> object:
    """The value as JSON gives it back (a list for a tuple), so Cases round-trip equal."""
    return list(value) if isinstance(value, tuple) else value
