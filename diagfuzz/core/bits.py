"""Raw bits of tensors and bit-level diffs: the only notion of equality the oracles and the
specs' relations use.

Every element is viewed as a same-width integer word (complex128 as a pair of int64, by
``diagfuzz.core.words.as_words``, the one such view in the project), so NaN payloads, signed
zeros and the byte value of a bool all count. ``diff`` turns two word
tensors into JSON-serialisable evidence: how many elements differ and the first few, with
their indices, values and hex bits.
"""

from __future__ import annotations

import weakref
from typing import Any

import torch

from diagfuzz.core.words import as_words, words_per_element

#: How many differing elements a Verdict lists.
FIRST_FEW = 5


#: Integer dtypes that are their own words (viewing them again would cost an op).
_WORD_DTYPES = frozenset({torch.int8, torch.int16, torch.int32, torch.int64})
#: How many recent word views ``_words`` keeps (one Case compares its reference 3-5 times).
MEMO_SIZE = 4
_memo: dict[int, tuple[weakref.ref[torch.Tensor], tuple[Any, ...], torch.Tensor]] = {}


def _words(t: torch.Tensor) -> torch.Tensor:
    """``t``'s elements as words in ``t``'s shape (complex128: a trailing dim of 2).

    A contiguous tensor's words are a view of its memory, so the view of a recently seen
    tensor is reused (same object, same storage, offset, shape, strides, dtype: it shows the
    tensor's current bytes); a copy (non-contiguous, lazy conj/neg) is never reused.
    """
    if t.is_conj() or t.is_neg():
        t = t.resolve_conj().resolve_neg()
    if not t.is_contiguous():
        t = t.contiguous()
    if t.dtype in _WORD_DTYPES:
        return t
    key = (t.untyped_storage().data_ptr(), t.storage_offset(), t.shape, t.stride(), t.dtype,
           t.device)
    seen = _memo.get(id(t))
    if seen is not None and seen[0]() is t and seen[1] == key:
        return seen[2]
    words = as_words(t)
    if len(_memo) >= MEMO_SIZE:
        del _memo[next(iter(_memo))]
    _memo[id(t)] = (weakref.ref(t), key, words)
    return words


def bits(t: torch.Tensor) -> torch.Tensor:
    """``t``'s elements as words, shape ``[numel, words]``, contiguous, on ``t``'s device.

    Flattened first: a view keeps a size-1 dim's stride (0 for an expanded one), and a
    ``[n, 1]`` result with stride 0 there refuses ``view(torch.uint8)``."""
    return _words(t).reshape(-1).reshape(-1, words_per_element(t.dtype))


def storage_words(t: torch.Tensor) -> torch.Tensor:
    """All of ``t``'s storage as flat words of ``t``'s element width (a view, no copy)."""
    raw = torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage())
    usable = raw.numel() - raw.numel() % t.dtype.itemsize
    return as_words(raw[:usable].view(t.dtype)).reshape(-1)


def from_words(words: torch.Tensor, dtype: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
    """Inverse of ``bits``: a contiguous tensor of ``dtype`` and ``shape`` from its words."""
    words = words.contiguous()
    if dtype.itemsize == 16:
        return words.reshape(-1, 2).view(torch.complex128).reshape(shape)
    return words.reshape(-1).view(dtype).reshape(shape)


def hex_word(value: int, width_bytes: int) -> str:
    """A signed word as unsigned hex of its full width, e.g. -1 (int16) -> 0xffff."""
    return f"0x{value & ((1 << (8 * width_bytes)) - 1):0{2 * width_bytes}x}"


def element_hex(words: list[int], dtype: torch.dtype) -> str:
    """One element's bits as hex; complex128 as real|imaginary words."""
    width = min(dtype.itemsize, 8)
    return "|".join(hex_word(w, width) for w in words)


def element_repr(t_words: torch.Tensor, dtype: torch.dtype) -> str:
    """A readable value for one element's words (a string: NaN and inf stay JSON-safe)."""
    return repr(from_words(t_words.reshape(1, -1), dtype, (1,))[0].item())


def unravel(flat: int, shape: tuple[int, ...]) -> list[int]:
    """Row-major multi-index of a flat position."""
    index = []
    for n in reversed(shape):
        index.append(flat % n if n else 0)
        flat = flat // n if n else 0
    return list(reversed(index))


def same_bits(expected: torch.Tensor, actual: torch.Tensor) -> bool:
    """Whether two tensors of one dtype and shape agree in every bit (one comparison op).

    The common, passing case; ``differing`` (five ops and a device sync) finds the positions
    only when this says they differ.
    """
    return torch.equal(_words(expected), _words(actual))  # same shape: no reshape needed


def differing(expected: torch.Tensor, actual: torch.Tensor) -> torch.Tensor:
    """Flat positions (CPU int64) where two tensors of one dtype and shape differ in bits."""
    e, a = bits(expected), bits(actual)
    return (e != a).any(dim=1).nonzero().reshape(-1).cpu()


def diff(expected: torch.Tensor, actual: torch.Tensor, positions: torch.Tensor,
         sentinel: int | None = None) -> dict[str, Any]:
    """Evidence for a Verdict: count and first few differing elements with values and bits.

    ``sentinel`` (a byte) marks elements whose actual bits are that byte repeated: memory
    the implementation never wrote.
    """
    shape = tuple(expected.shape)
    e_words, a_words = bits(expected).cpu(), bits(actual).cpu()
    first = []
    for p in positions[:FIRST_FEW].tolist():
        first.append({
            "index": unravel(p, shape),
            "expected": element_repr(e_words[p], expected.dtype),
            "actual": element_repr(a_words[p], actual.dtype),
            "expected_bits": element_hex(e_words[p].tolist(), expected.dtype),
            "actual_bits": element_hex(a_words[p].tolist(), actual.dtype),
        })
    details: dict[str, Any] = {
        "differing": len(positions),
        "numel": expected.numel(),
        "first": first,
        "symptom": symptom(expected, actual, positions),
    }
    if sentinel is not None:
        details["sentinel"] = hex_word(sentinel, 1)
        details["sentinel_elements"] = int(is_sentinel(actual, sentinel)[positions].sum())
    return details


#: Symptoms of a bit difference, in the order ties are broken (``symptom``).
SYMPTOMS = ("signed-zero", "nan-payload", "zeroed", "values")


def symptom(expected: torch.Tensor, actual: torch.Tensor, positions: torch.Tensor) -> str:
    """What most differing elements have in common, a part of a failure's signature.

    "signed-zero": equal as numbers, the sign of a zero differs (-0.0 lost or made);
    "nan-payload": both NaN, other bits; "zeroed": the actual bits are all zero (an element
    left as a zeroed buffer held it); "values": anything else. Why: two bugs of one op
    usually differ in how their wrong elements look, and a user reads the symptom first.
    """
    if not len(positions):
        return "values"
    a = bits(actual).cpu()[positions]
    counts = dict.fromkeys(SYMPTOMS, 0)
    zeroed = (a == 0).all(dim=1)
    if expected.dtype.is_floating_point or expected.dtype.is_complex:
        ev = expected.reshape(-1).cpu()[positions]
        av = actual.reshape(-1).cpu()[positions]
        if expected.dtype.itemsize == 1 and expected.dtype.is_floating_point:
            ev, av = ev.float(), av.float()
        nan = torch.isnan(ev) & torch.isnan(av)
        signed = (ev == av) & ~nan
        counts["signed-zero"] = int(signed.sum())
        counts["nan-payload"] = int(nan.sum())
        zeroed = zeroed & ~signed & ~nan
    if expected.dtype != torch.bool:  # a bool is 0 or 1: a 0 for a 1 is just a wrong value
        counts["zeroed"] = int(zeroed.sum())
    counts["values"] = len(positions) - sum(counts.values())
    return max(SYMPTOMS, key=lambda name: (counts[name], -SYMPTOMS.index(name)))


def sentinel_word(byte: int, dtype: torch.dtype) -> int:
    """``byte`` repeated across one word of ``dtype``, as a signed integer of that width."""
    width = min(dtype.itemsize, 8)
    value = int.from_bytes(bytes([byte]) * width, "little")
    return value - (1 << (8 * width)) if value >= 1 << (8 * width - 1) else value


def is_sentinel(t: torch.Tensor, byte: int) -> torch.Tensor:
    """Per element (flat, CPU bool): every byte of the element equals ``byte``."""
    return (bits(t) == sentinel_word(byte, t.dtype)).all(dim=1).cpu()


def storages_overlap(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two tensors' storages share any byte (the result aliases the input)."""
    sa, sb = a.untyped_storage(), b.untyped_storage()
    if sa.nbytes() == 0 or sb.nbytes() == 0:
        return False
    a0, b0 = sa.data_ptr(), sb.data_ptr()
    return a.device == b.device and a0 < b0 + sb.nbytes() and b0 < a0 + sa.nbytes()
