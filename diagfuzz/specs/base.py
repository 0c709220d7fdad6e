"""OpSpec: everything diagfuzz knows about one op of the diagonal family, in one record.

In the spirit of PyTorch's OpInfo: the harness, the strategies, the oracles, the gate and
the benchmarks are generic and read an op's spec; nothing outside ``diagfuzz/specs/`` asks
which op a Case is. A new op is one spec module here plus, where diagfuzz has a kernel for
it, one kernel module in ``ops/`` (named by import path, so reading a spec never loads
Triton); docs/adding-an-op.md walks through one.

Every op of the family is described by one geometry: ``Case.sizes``, ``offset``, ``dim1``
and ``dim2`` name a diagonal of a tensor of ``sizes`` (the op's input for ``diagonal``, its
result for ``diagonal_backward`` and ``diag_embed``). Each tensor the op reads is shaped
either like that tensor ("full") or like its diagonal ("diagonal"); what differs from op to
op lives in the functions a spec holds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

#: What a tensor argument is shaped like: the full tensor of ``Case.sizes``, or its
#: diagonal (the other dims in order, then the diagonal's length).
ROLES = ("full", "diagonal")


@dataclass(frozen=True)
class Operand:
    """A tensor the op reads: its argument name and what it is shaped like (``ROLES``)."""

    name: str
    role: str
    #: Where a Case's special bit patterns go: "read" (the elements the op reads: the
    #: diagonal of a full tensor, all of a diagonal-shaped one) or "anywhere".
    specials: str = "read"

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"Operand {self.name!r}: role must be one of {ROLES}")


@dataclass(frozen=True)
class Relation:
    """A metamorphic relation: a property of a correct result, checked with no reference.

    ``check(case, tensors, result)`` gets the host copies of the operands (by name) and of
    the result, and returns None when the relation holds, else (message, evidence).
    """

    name: str
    check: Callable[..., tuple[str, dict[str, Any]] | None]


@dataclass(frozen=True)
class OpSpec:
    """One op: how to call it, judge it, draw it, break it, register and benchmark it.

    The functions take plain values (Cases, tensors, dicts of arguments): specs import
    torch and diagfuzz's building blocks, never a kernel.
    """

    #: The op's name: the suite's stream ``test_<name>``, the reports' row, and the
    #: implementation's method unless ``method`` names another.
    name: str
    #: Where the op comes in reports and the suite (lower first).
    order: int
    #: The tensors the op reads, in argument order; the first is ``Case.layout``/``values``.
    operands: tuple[Operand, ...]
    #: The call's arguments after the operands, by their aten schema names.
    arguments: tuple[str, ...]
    #: aten's functional and ``.out`` overloads (``torch.ops.aten`` names; "" for an
    #: in-place op, which has no ``.out`` overload).
    aten: tuple[str, str]
    #: Arguments whose Case field has another name: schema name -> "offset", "dim1",
    #: "dim2" or "input_sizes" (``Case.sizes``); the others are their own field.
    fields: dict[str, str] = field(default_factory=dict)
    #: Inclusive ranks of ``Case.sizes`` the strategies draw by default.
    ranks: tuple[int, int] = (2, 8)
    #: The highest rank ``Case.sizes`` can have (``diag``: 2); None: any. Ranks asked of
    #: the strategies above it are lowered to it.
    max_rank: int | None = None
    #: What the tensor of ``Case.sizes`` is to the op: "read" (an operand, which a layout
    #: may expand to hold a long diagonal cheaply) or "result" (the op makes it: held in
    #: memory whole).
    full: str = "read"
    #: dim1 and dim2 when they are not the op's arguments (``diag``: (0, 1)), else None.
    dims: tuple[int, int] | None = None
    #: Whether the op makes the tensor of ``Case.sizes`` from its diagonal-shaped operand
    #: alone (``diag_embed``, ``diag`` of a vector): the two diagonal dims are then equal,
    #: each as long as the diagonal plus ``|offset|``, and the strategies draw only such
    #: sizes (so no offset beyond them: an empty diagonal has ``|offset|`` = the size).
    square: bool = False
    #: The invalid classes that apply to this op (``diagfuzz.strategies``' names).
    invalid: tuple[str, ...] = ()
    #: diagfuzz's kernel: the launch counter's name and ``module:function`` of the
    #: functional and ``.out`` entry points registered for the two aten overloads ("": the
    #: op registers nothing of its own).
    kernel: str = ""
    entry_points: tuple[str, str] = ("", "")
    #: The launch counters that prove a call ran diagfuzz's kernels, when they are not
    #: ``kernel``'s: an op aten decomposes into registered ops counts theirs (``diag``).
    counters: tuple[str, ...] = ()
    #: The aten ops this op's CompositeImplicitAutograd kernel calls (``diag`` of a vector:
    #: ``diag_embed``): a library that registers one of them serves this op too.
    decomposes_into: tuple[str, ...] = ()
    #: The implementation's method, when it is not ``name`` (both directions of
    #: ``aten::diag`` are the one method ``diag``).
    method: str = ""
    #: The operand an in-place op writes and returns (``triu_``: "input"; "" for an op
    #: that makes a new tensor): the oracle judges that tensor, its storage and its
    #: version counter instead of a new result (``oracles/inplace.py``).
    inplace: str = ""

    # --- behaviour --------------------------------------------------------------------
    #: ``call(impl, case, args)``: the implementation's method on the materialised
    #: arguments (``args``: by schema name, ``out`` present for a ``.out`` Case).
    call: Callable[..., Any] = field(default=None)  # type: ignore[assignment]
    #: ``reference(case, args) -> (tensor, source)``: the expected result on the host,
    #: from torch with aten's own kernels (autograd where the op is a gradient).
    reference: Callable[..., tuple[Any, str]] = field(default=None)  # type: ignore[assignment]
    #: ``others(case, args, source) -> [(name, tensor)]``: references that must agree with
    #: ``reference`` (index arithmetic alone; aten directly).
    others: Callable[..., list[tuple[str, Any]]] = field(default=None)  # type: ignore[assignment]
    #: ``aten_kernel(case, args)``: aten's own kernel on the device tensors, whatever the
    #: registration's state (the device reference).
    aten_kernel: Callable[..., Any] = field(default=None)  # type: ignore[assignment]
    relations: tuple[Relation, ...] = ()
    #: ``compile_function(case, args) -> (fn, x, grad)``: the op as a differentiable
    #: function of one input ``x``, back-propagated with ``grad``, for torch.compile
    #: parity; None when not differentiable.
    compile_function: Callable[..., Any] | None = None

    # --- drawing (the strategies draw every op alike from ``operands``; these override) ---
    #: ``draw_case(draw, narrowing, geometry) -> Case``: the dtype and tensors of a valid
    #: Case of the drawn geometry (default: ``strategies._cases.draw_tensors``).
    draw_case: Callable[..., Any] | None = None
    #: ``draw_sibling(draw, base, narrowing) -> Case``: a Case sharing ``base``'s dear
    #: choices (sizes, dims, layouts), drawing its own few (default:
    #: ``strategies._families.draw_sibling``).
    draw_sibling: Callable[..., Any] | None = None
    #: ``break_case(draw, kind, case, tools) -> Case | None`` for the invalid classes only
    #: this op has (None: not one of them). ``tools`` holds what it draws with: sizes,
    #: tensors, wrong operands and Hypothesis' choices as the strategies draw them
    #: (``strategies._invalid.BreakTools``).
    break_case: Callable[..., Any] | None = None

    # --- fixed samples ------------------------------------------------------------------
    #: Cases of the gate's error-parity stage (one per invalid class), of its
    #: torch.compile sample, and of the executor's warm-up.
    error_cases: Callable[[], Sequence[Any]] = field(default=lambda: ())
    compile_cases: Callable[[], Sequence[Any]] = field(default=lambda: ())
    warm_up_cases: Callable[[], Sequence[Any]] = field(default=lambda: ())

    @property
    def first(self) -> Operand:
        """The operand a Case's ``layout`` and ``values`` describe."""
        return self.operands[0]

    @property
    def method_name(self) -> str:
        """The implementation's method for the op's Cases."""
        return self.method or self.name

    @property
    def out_method(self) -> str:
        """The implementation's method for ``.out`` Cases."""
        return f"{self.method_name}_out"

    @property
    def has_out(self) -> bool:
        """Whether the op has a ``.out`` overload (an in-place op has none)."""
        return bool(self.aten[1])

    @property
    def launch_counters(self) -> tuple[str, ...]:
        """The launch counters of the dispatch proof (none: nothing to prove)."""
        return self.counters or ((self.kernel,) if self.kernel else ())

    @property
    def stream(self) -> str:
        """The suite's test function (and shard-seed stream name) of valid Cases."""
        return f"test_{self.name}"
