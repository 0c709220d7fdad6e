"""``triu_(input, diagonal=0)``: ``triu`` written into ``input``, which it returns.

What the spec functions do, and how the oracle judges an in-place op, is shared with
``tril_``: ``diagfuzz.specs.triangle_inplace``.
"""

from __future__ import annotations

from diagfuzz.specs.base import Operand, OpSpec
from diagfuzz.specs.triangle import spec_fields
from diagfuzz.specs.triangle_inplace import INVALID_INPLACE, InPlaceTriangle

SPEC = OpSpec(
    order=8,
    name="triu_",
    operands=(Operand("input", "full", specials="anywhere"),),
    arguments=("diagonal",),
    fields={"diagonal": "offset"},
    **spec_fields(InPlaceTriangle("triu_", upper=True), INVALID_INPLACE, inplace="input"),
)
