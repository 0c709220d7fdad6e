"""``triu(input, diagonal=0)``: the upper triangle of every matrix, zero bits below it.

Elements whose column minus row is at least ``diagonal`` (on and above that diagonal of
each matrix, the last two dims of ``input``) are kept, every other element is +0.0 (a zero
word). What the spec functions do, and how a Case describes the call (``Case.sizes`` the
input's shape, dims -2 and -1, ``Case.offset`` the op's ``diagonal``), is shared with
``tril``: ``diagfuzz.specs.triangle``.
"""

from __future__ import annotations

from diagfuzz.specs.base import Operand, OpSpec, Relation
from diagfuzz.specs.triangle import INVALID, Triangle

_OP = Triangle("triu", upper=True)

SPEC = OpSpec(
    order=6,
    name="triu",
    dims=(-2, -1),
    full="result",
    operands=(Operand("input", "full", specials="anywhere"),),
    arguments=("diagonal",),
    fields={"diagonal": "offset"},
    aten=("triu", "triu.out"),
    invalid=INVALID,
    kernel="triu",
    entry_points=("diagfuzz.ops.triangle:triu", "diagfuzz.ops.triangle:triu_out"),
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
