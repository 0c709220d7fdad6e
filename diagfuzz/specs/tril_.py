"""``tril_(input, diagonal=0)``: ``tril`` written into ``input``, which it returns.

What the spec functions do, and how the oracle judges an in-place op, is shared with
``triu_``: ``diagfuzz.specs.triangle_inplace``.
"""

from __future__ import annotations

from diagfuzz.specs.base import Operand, OpSpec, Relation
from diagfuzz.specs.triangle_inplace import INVALID_INPLACE, InPlaceTriangle

_OP = InPlaceTriangle("tril_", upper=False)

SPEC = OpSpec(
    order=9,
    name="tril_",
    dims=(-2, -1),
    full="result",
    operands=(Operand("input", "full", specials="anywhere"),),
    arguments=("diagonal",),
    fields={"diagonal": "offset"},
    aten=("tril_", ""),
    inplace="input",
    invalid=INVALID_INPLACE,
    kernel="tril_",
    entry_points=("diagfuzz.ops.triangle:tril_", ""),
    call=_OP.call,
    reference=_OP.reference,
    others=_OP.others,
    aten_kernel=_OP.aten_kernel,
    relations=(Relation("metamorphic:kept==input", _OP.kept_bits),
               Relation("metamorphic:outside-triangle-zero", _OP.dropped_zero)),
    compile_function=_OP.compile_function,
    error_cases=_OP.error_cases,
    compile_cases=_OP.compile_cases,
    warm_up_cases=_OP.warm_up_cases,
)
