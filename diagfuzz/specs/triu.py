"""``triu(input, diagonal=0)``: the upper triangle of every matrix, zero bits below it.

Elements whose column minus row is at least ``diagonal`` (on and above that diagonal of
each matrix, the last two dims of ``input``) are kept, every other element is +0.0 (a zero
word). What the spec functions do, and how a Case describes the call (``Case.sizes`` the
input's shape, dims -2 and -1, ``Case.offset`` the op's ``diagonal``), is shared with
``tril``: ``diagfuzz.specs.triangle``.
"""

from __future__ import annotations

from diagfuzz.specs.base import Operand, OpSpec
from diagfuzz.specs.triangle import INVALID, Triangle, spec_fields

SPEC = OpSpec(
    order=6,
    name="triu",
    operands=(Operand("input", "full", specials="anywhere"),),
    arguments=("diagonal",),
    fields={"diagonal": "offset"},
    **spec_fields(Triangle("triu", upper=True), INVALID),
)
