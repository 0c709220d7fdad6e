"""Value recipes: seeded random storage plus special bit patterns, per dtype.

A special is a raw bit pattern (an unsigned int of the element's width), never a Python
float: NaN payloads, signalling NaNs and negative zero survive only as bits. Complex
patterns are ``real_bits | imag_bits << half_width``, as ``Values.specials`` stores them.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from functools import cache

import torch
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from diagfuzz.core.case import Values, available_dtypes, dtype_of
from diagfuzz.strategies._args import check_flag, check_kinds
from diagfuzz.strategies._draws import ints

#: Value modes in shrink order: plain random values first, random bit patterns second.
VALUE_MODES = ("normal", "bits")
#: The most specials one Case carries; shrinking drops them (see draw_values).
MAX_SPECIALS = 8
#: Whether a Case carries specials and how many, in one draw: 0 none, n > 0 gives
#: 1 + (n - 1) % MAX_SPECIALS (each count twice). Hypothesis draws the simplest choice far
#: more often than its share (at the ci budget, of float Cases with a non-empty diagonal,
#: 7 in 10 got 0 from 3 choices, about half from 16; measured over both valid streams'
#: families, 6 Cases in 10 carry specials), so the range is wide. Drawn for every Case, even
#: one with nowhere to put them, so an empty tensor is not one choice shorter than a
#: non-empty one: Hypothesis orders shorter choice sequences first, and a missing choice
#: would pull shrinking towards empty diagonals (offset 1 over 0).
SPECIALS_COUNT = st.integers(0, 2 * MAX_SPECIALS)


@dataclass(frozen=True)
class FloatFormat:
    """A binary floating-point format: field widths and how it spells inf and NaN.

    ``style`` is "ieee" (inf, quiet/signalling NaNs), "fn" (no inf; NaN is all ones) or
    "fnuz" (no inf, no negative zero; NaN is the negative-zero pattern).
    """

    exp_bits: int
    man_bits: int
    style: str = "ieee"

    @property
    def sign(self) -> int:
        return 1 << (self.exp_bits + self.man_bits)

    @property
    def exp_mask(self) -> int:
        return ((1 << self.exp_bits) - 1) << self.man_bits

    @property
    def man_mask(self) -> int:
        return (1 << self.man_bits) - 1


FLOAT_FORMATS = {
    "float16": FloatFormat(5, 10),
    "bfloat16": FloatFormat(8, 7),
    "float32": FloatFormat(8, 23),
    "float64": FloatFormat(11, 52),
    "float8_e5m2": FloatFormat(5, 2),
    "float8_e4m3fn": FloatFormat(4, 3, "fn"),
    "float8_e4m3fnuz": FloatFormat(4, 3, "fnuz"),
    "float8_e5m2fnuz": FloatFormat(5, 2, "fnuz"),
}
#: complex dtype -> the float format of each half.
COMPLEX_HALVES = {"complex64": "float32", "complex128": "float64"}


def _float_table(fmt: FloatFormat) -> tuple[int, ...]:
    """Every special pattern of ``fmt``, +0.0 first (the simplest)."""
    s, e, m = fmt.sign, fmt.exp_mask, fmt.man_mask
    one_bit = 1 << fmt.man_bits
    positive = [1, m, one_bit]  # smallest subnormal, largest subnormal, smallest normal
    if fmt.style == "ieee":
        quiet = 1 << (fmt.man_bits - 1)
        positive += [e - one_bit | m, e]  # largest finite, inf
        positive += [e | quiet, e | quiet | 1, e | m]  # quiet NaNs: default, payloads
        positive += [e | 1, e | (quiet - 1)]  # signalling NaNs (payload never 0)
        if quiet - 1 == 1:
            positive.pop()
    elif fmt.style == "fn":
        positive += [e | (m - 1), e | m]  # largest finite, the NaN
    else:  # fnuz: the sign-only pattern is the one NaN; there is no -0.0
        positive += [e | m]
    table = [0, s]  # +0.0 and -0.0 (fnuz: the NaN)
    for bits in positive:
        table += [bits, bits | s]
    return tuple(dict.fromkeys(table))


def _int_table(name: str) -> tuple[int, ...]:
    """0, 1, all ones, min, max, min + 1, max - 1 as unsigned patterns of the width."""
    dtype = dtype_of(name)
    if dtype is torch.bool:
        return (0, 1)
    width = 8 * dtype.itemsize
    info = torch.iinfo(dtype)
    values = (0, 1, -1, info.min, info.max, info.min + 1, info.max - 1)
    return tuple(dict.fromkeys(v % (1 << width) for v in values))


@cache
def special_table(dtype: str) -> tuple[int, ...]:
    """The fixed special patterns of a non-complex ``dtype``, simplest (zero) first."""
    if dtype in FLOAT_FORMATS:
        return _float_table(FLOAT_FORMATS[dtype])
    if dtype in COMPLEX_HALVES:
        raise ValueError(f"special_table: {dtype!r} is complex; use each half's table")
    return _int_table(dtype)


@cache
def sharp_table(dtype: str) -> tuple[int, ...]:
    """The patterns of a non-complex ``dtype`` that most often expose a data-moving bug.

    A subset of ``special_table``, drawn (SHARP_IN - 1) times as often as all the others
    together (code 0, +0.0, is not among them, so shrinking still ends there): -0.0 (a
    compare-with-zero fast path loses its sign), a negative quiet NaN with a payload and a
    signalling NaN (canonicalised or quieted by arithmetic) and the smallest subnormal
    (flushed to zero); integers' min, max and all ones (narrower words truncate them);
    bool's True (0x01, not 0xFF).
    """
    if dtype in FLOAT_FORMATS:
        fmt = FLOAT_FORMATS[dtype]
        s, e, m = fmt.sign, fmt.exp_mask, fmt.man_mask
        if fmt.style == "ieee":
            quiet = 1 << (fmt.man_bits - 1)
            return (s, s | e | quiet | 1, e | 1, 1)
        if fmt.style == "fn":
            return (s, e | m, 1)
        return (s, 1, s | 1)  # fnuz: its NaN and subnormals
    table = special_table(dtype)  # checks for complex
    dtype_ = dtype_of(dtype)
    if dtype_ is torch.bool:
        return (1,)
    width = 8 * dtype_.itemsize
    info = torch.iinfo(dtype_)
    picks = (info.min, info.max, -1)
    return tuple(b for b in dict.fromkeys(v % (1 << width) for v in picks) if b and b in table)


def classify_bits(dtype: str, bits: int) -> str:
    """Name the class of one element's bit pattern, for coverage counts.

    Floats: "+0", "-0", "+inf", "-inf", "+qnan", "-qnan_payload", "+snan", "-subnormal",
    "+min_normal", "-max", "+normal", ... (fnuz's NaN is "nan"). Integers: "zero", "one",
    "min", "max", "other". bool: "false"/"true". Complex: "real:<class>|imag:<class>".
    """
    if dtype in COMPLEX_HALVES:
        half = COMPLEX_HALVES[dtype]
        width = 8 * dtype_of(half).itemsize
        real, imag = bits & ((1 << width) - 1), bits >> width
        return f"real:{classify_bits(half, real)}|imag:{classify_bits(half, imag)}"
    if dtype not in FLOAT_FORMATS:
        return _classify_int(dtype, bits)
    fmt = FLOAT_FORMATS[dtype]
    sign = "-" if bits & fmt.sign else "+"
    exp, man = bits & fmt.exp_mask, bits & fmt.man_mask
    top = fmt.exp_mask
    if fmt.style == "fnuz" and bits == fmt.sign:
        return "nan"
    if fmt.style == "fn" and exp == top and man == fmt.man_mask:
        return sign + "nan"
    if fmt.style == "ieee" and exp == top:
        quiet = 1 << (fmt.man_bits - 1)
        if man == 0:
            return sign + "inf"
        if man & quiet:
            return sign + ("qnan" if man == quiet else "qnan_payload")
        return sign + "snan"
    largest = (top - (1 << fmt.man_bits) | fmt.man_mask) if fmt.style == "ieee" else (
        top | fmt.man_mask if fmt.style == "fnuz" else top | (fmt.man_mask - 1))
    if bits & ~fmt.sign == largest:
        return sign + "max"
    if exp == 0:
        return sign + ("0" if man == 0 else "subnormal")
    if exp == 1 << fmt.man_bits and man == 0:
        return sign + "min_normal"
    return sign + "normal"


def _classify_int(dtype: str, bits: int) -> str:
    torch_dtype = dtype_of(dtype)
    if torch_dtype is torch.bool:
        return {0: "false", 1: "true"}.get(bits, "invalid_bool")
    width = 8 * torch_dtype.itemsize
    info = torch.iinfo(torch_dtype)
    value = bits - (1 << width) if info.min < 0 and bits >= 1 << (width - 1) else bits
    return {0: "zero", 1: "one", -1: "minus_one", info.min: "min", info.max: "max"}.get(
        value, "other")


#: A special's code is a number below 2**CODE_BITS, decoded by ``decode_special``; code 0
#: is +0.0 / 0 / False / 0+0j.
CODE_BITS = 24
#: One special code in SHARP_IN picks from the whole table, the rest from ``sharp_table``.
SHARP_IN = 4
#: Plain halves a complex special pairs with: +0.0 and 1.0, per half width.
_PLAIN_HALVES = {"float32": (0, 0x3F800000), "float64": (0, 0x3FF0000000000000)}
_SPREAD = 0x9E3779B97F4A7C15  # odd: spreads small numbers over all payload bits
CODES = st.integers(0, (1 << CODE_BITS) - 1)
#: Bytes of a special's position number (little-endian; a ``where`` function maps it to a
#: storage index) and of its code, in the one bytes choice all of a Case's specials share.
POSITION_BYTES = 4
CODE_BYTES = CODE_BITS // 8
SPECIAL_BYTES = POSITION_BYTES + CODE_BYTES
#: MAX_SPECIALS specials' bytes, drawn at once (uniform, unlike Hypothesis' wide integer
#: draws, which favour small numbers); a Case uses the first SPECIALS_COUNT of them.
SPECIALS_BLOB = st.binary(min_size=MAX_SPECIALS * SPECIAL_BYTES,
                          max_size=MAX_SPECIALS * SPECIAL_BYTES)


def decode_special(dtype: str, code: int) -> int:
    """The bit pattern of special number ``code`` of ``dtype`` (see ``special_values``).

    Non-complex: a code not divisible by SHARP_IN picks one of ``sharp_table(dtype)`` by
    ``code // SHARP_IN``; otherwise ``code // SHARP_IN % (n + 1)`` picks one of the n
    ``special_table`` entries, or (IEEE formats) a NaN whose sign and payload come from the
    rest of the code. Complex: ``code % 3`` picks a special
    real part, a special imaginary part, or both; the rest codes the halves.
    """
    if dtype in COMPLEX_HALVES:
        half = COMPLEX_HALVES[dtype]
        width = 8 * dtype_of(half).itemsize
        branch, rest = code % 3, code // 3
        a, b = rest % 4096, rest // 4096
        plain = _PLAIN_HALVES[half]
        real = plain[a & 1] if branch == 1 else decode_special(half, a)
        imag = plain[b & 1] if branch == 0 else decode_special(half, b)
        return real | imag << width
    table = special_table(dtype)
    if code % SHARP_IN:
        sharp = sharp_table(dtype)
        return sharp[code // SHARP_IN % len(sharp)]
    code //= SHARP_IN
    fmt = FLOAT_FORMATS.get(dtype)
    choices = len(table) + (fmt is not None and fmt.style == "ieee")
    pick, rest = code % choices, code // choices
    if pick < len(table):
        return table[pick]
    assert fmt is not None
    payload = 1 + (rest >> 1) * _SPREAD % fmt.man_mask
    return (fmt.sign if rest & 1 else 0) | fmt.exp_mask | payload


@cache
def _special_values(dtype: str) -> st.SearchStrategy[int]:
    return CODES.map(lambda code: decode_special(dtype, code))


def special_values(dtype: str | torch.dtype) -> st.SearchStrategy[int]:
    """Special bit patterns of one element of ``dtype``, as unsigned ints of its width.

    Floats: ±0.0, ±inf, quiet NaNs (default and other payloads) and signalling NaNs of both
    signs, the smallest and largest subnormals, the smallest normal and the largest finite
    values of both signs, and NaNs with arbitrary payloads; float8 formats without inf or
    -0.0 get their own NaN and extremes. Integers: 0, 1, -1, min, max, min + 1, max - 1.
    bool: 0 and 1 only (a bool byte is never anything else). Complex: a special real part
    with a plain (0.0 or 1.0) imaginary part, the other way round, or both special,
    as ``real | imag << half_width``. Each is one draw of a code (``decode_special``).

    Shrinks towards 0 (+0.0, False, 0+0j).
    """
    name = str(dtype).removeprefix("torch.") if isinstance(dtype, torch.dtype) else dtype
    check_kinds("dtype", (name,), available_dtypes())
    return _special_values(name)


def values(dtype: str | torch.dtype, where: Callable[[int], int] | None = None, *,
           modes: Collection[str] | None = None,
           specials: bool = True) -> st.SearchStrategy[Values]:
    """Value recipes (``Values``) for a storage of ``dtype``.

    ``where`` maps a drawn number (any int >= 0) to the storage index a special goes to;
    without it, or with ``specials=False``, there are no specials. About six Cases in ten
    carry 1 to MAX_SPECIALS specials. ``modes`` narrows the
    fill ("normal": random values of the usual range; "bits": random bit patterns).

    Shrinks towards seed 0, mode "normal" and no specials.
    """
    special_values(dtype)  # checks dtype
    name = str(dtype).removeprefix("torch.")
    chosen = check_kinds("modes", modes, VALUE_MODES)
    if where is not None and not callable(where):
        raise InvalidArgument(f"where={where!r} must map an int to a storage index")
    return st.composite(draw_values)(name, where if check_flag("specials", specials)
                                     else None, chosen)


def draw_values(draw: st.DrawFn, dtype: str, where: Callable[[int], int] | None,
                modes: tuple[str, ...]) -> Values:
    """Draw one Values (see ``values``), arguments already checked.

    Three draws at most: seed and mode together; whether there are specials and how many
    (SPECIALS_COUNT, always drawn); then the positions and codes of MAX_SPECIALS specials
    in one bytes choice (SPECIALS_BLOB), of which the first ``count`` are kept. One
    Hypothesis draw costs tens of microseconds, and a draw per position and per code made
    specials about a third of a Case's drawing. The blob's size never depends on the
    count: a blob sized by it would no longer fit when Hypothesis mutates the count, and
    Hypothesis fills a choice that does not fit with its simplest value (all zero bytes,
    +0.0 at position 0: measured, a sized blob made 1 special in 10 a +0.0, the fixed one
    1 in 25, one draw per special 1 in 70). A slot of all zero bytes is no special: the
    shrinker zeroes bytes but never moves them, so zeroing is how it drops a special ahead
    of the one a failure needs (kept, such slots left +0.0 specials at position 0 in front
    of it, 6 shrinks in 8; a uniform slot is all zeros once in 2**56 draws).
    """
    seed, index = divmod(draw(ints(0, (len(modes) << 32) - 1)), len(modes))
    mode = modes[index]
    count = draw(SPECIALS_COUNT)
    if not count or where is None:
        return Values(seed, mode)
    blob = draw(SPECIALS_BLOB)
    return Values(seed, mode, tuple(
        (where(int.from_bytes(blob[i:i + POSITION_BYTES], "little")),
         decode_special(dtype, int.from_bytes(blob[i + POSITION_BYTES:i + SPECIAL_BYTES],
                                              "little")))
        for i in range(0, (1 + (count - 1) % MAX_SPECIALS) * SPECIAL_BYTES, SPECIAL_BYTES)
        if any(blob[i:i + SPECIAL_BYTES])))
