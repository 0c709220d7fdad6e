"""The huge tier's knobs and its values: Cases whose tensors or address ranges pass 2**31
elements (``diagfuzz.strategies.huge_cases`` draws them, ``diagfuzz.oracles.check_huge``
judges them).

An int32 offset that wraps (``pid * BLOCK``, ``i * stride``) is invisible below 2**31
elements, so these Cases are far larger than the fuzzer's. Their values are
``Values.mode == "index_hash"``: each storage word is a hash of (seed, word index), made
by torch's int64 ops alone, so any chunk of a storage is made where it is needed (on the
device, chunk by chunk, without a host copy) and is the same bits on every device. A read
that wraps then returns a different value with overwhelming probability.

``DIAGFUZZ_HUGE_THRESHOLD`` lowers the threshold (2**31 elements) so that the same path
runs on small tensors: tests on a CPU, under Triton's interpreter. ``DIAGFUZZ_HUGE_MAX_GIB``
caps the device memory one Case may take (an estimate, checked before anything is made).
"""

from __future__ import annotations

import os

import torch

#: Elements a huge Case's tensors or index ranges pass (int32's range).
DEFAULT_THRESHOLD = 2**31
#: Lowers the threshold (tests on a CPU: the same path on small tensors).
THRESHOLD_ENV = "DIAGFUZZ_HUGE_THRESHOLD"
#: Device memory one huge Case may take, in GiB (beside other jobs on one H200).
DEFAULT_MAX_GIB = 40.0
#: Seconds a huge Case may take (gigabytes made, run twice and compared).
TIMEOUT = 300.0
MAX_GIB_ENV = "DIAGFUZZ_HUGE_MAX_GIB"
#: Storage words made (and compared) per step: a few int64 temporaries of this many
#: elements are the judgement's own memory (512 MiB each).
CHUNK = 1 << 26

#: splitmix64's constants as signed int64 (torch has no uint64 arithmetic).
_GAMMA = 0x9E3779B97F4A7C15 - (1 << 64)
_MIX1 = 0xBF58476D1CE4E5B9 - (1 << 64)
_MIX2 = 0x94D049BB133111EB - (1 << 64)
_WORD = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def threshold() -> int:
    """Elements a huge Case passes: 2**31, or ``DIAGFUZZ_HUGE_THRESHOLD``."""
    text = os.environ.get(THRESHOLD_ENV, "").strip()
    if not text:
        return DEFAULT_THRESHOLD
    value = int(text, 0)
    if value < 16:
        raise ValueError(f"{THRESHOLD_ENV}={text}: at least 16 elements")
    return value


def lowered() -> bool:
    """Whether the threshold is lowered (a test run, not the real tier)."""
    return threshold() < DEFAULT_THRESHOLD


def max_bytes() -> int:
    """Device bytes one huge Case may take (``DIAGFUZZ_HUGE_MAX_GIB``, default 40 GiB)."""
    text = os.environ.get(MAX_GIB_ENV, "").strip()
    return int(float(text or DEFAULT_MAX_GIB) * 2**30)


def skip_reason(device: str) -> str:
    """Why the huge tier cannot run on ``device`` ('' when it can): it needs a CUDA GPU,
    unless the threshold is lowered."""
    if torch.device(device).type == "cuda" or lowered():
        return ""
    return (f"needs a CUDA GPU: its Cases pass {DEFAULT_THRESHOLD:,} elements (device "
            f"{device}; {THRESHOLD_ENV} lowers the threshold for tests)")


def _lsr(x: torch.Tensor, k: int) -> torch.Tensor:
    """Logical right shift of int64 words (torch's ``>>`` is arithmetic)."""
    return (x >> k) & ((1 << (64 - k)) - 1)


def hash_words(seed: int, start: int, count: int, device: str | torch.device) -> torch.Tensor:
    """splitmix64 of word indices ``start .. start + count - 1`` under ``seed``, as int64
    (wrapping int64 products: the same bits on the CPU and on CUDA)."""
    x = torch.arange(start, start + count, dtype=torch.int64, device=device)
    x.add_((seed + 1) * _GAMMA % (1 << 63))
    x.bitwise_xor_(_lsr(x, 30)).mul_(_MIX1)
    x.bitwise_xor_(_lsr(x, 27)).mul_(_MIX2)
    return x.bitwise_xor_(_lsr(x, 31))


def word_view(storage: torch.Tensor) -> torch.Tensor:
    """A 1-D storage as its integer words, flat (a complex128 element is two int64 words)."""
    if storage.dtype.itemsize == 16:
        return torch.view_as_real(storage).view(torch.int64).reshape(-1)
    return storage.view(_WORD[storage.dtype.itemsize])


def hash_chunk(dtype: torch.dtype, seed: int, start: int, count: int,
               device: str | torch.device) -> torch.Tensor:
    """Words ``start .. start + count - 1`` of an index_hash storage of ``dtype``, as the
    storage's word type (bool: 0 or 1 in an int8 word)."""
    x = hash_words(seed, start, count, device)
    if dtype is torch.bool:
        return (x & 1).to(torch.int8)
    width = min(dtype.itemsize, 8)
    if width < 8:  # the low bits as a signed word: in range, so the cast is exact
        bits = 8 * width
        x = x & ((1 << bits) - 1)
        x = x - ((x >> (bits - 1)) << bits)
    return x.to(_WORD[width])


def fill(storage: torch.Tensor, seed: int, chunk: int = CHUNK) -> torch.Tensor:
    """Fill a 1-D storage with index_hash values in place, ``chunk`` words at a time."""
    words = word_view(storage)
    for start in range(0, words.numel(), chunk):
        count = min(chunk, words.numel() - start)
        words[start:start + count].copy_(hash_chunk(storage.dtype, seed, start, count,
                                                     words.device))
    return storage


def first_change(storage: torch.Tensor, seed: int, chunk: int = CHUNK) -> tuple[int, int]:
    """(first word index that differs from its index_hash value, words that differ), or
    (-1, 0): the inputs-unchanged check, without a copy of the storage."""
    words = word_view(storage)
    first, changed = -1, 0
    for start in range(0, words.numel(), chunk):
        count = min(chunk, words.numel() - start)
        ne = words[start:start + count] != hash_chunk(storage.dtype, seed, start, count,
                                                      words.device)
        n = int(ne.sum())
        if n and first < 0:
            first = start + int(ne.nonzero()[0, 0])
        changed += n
    return first, changed


def storage_of(dtype: torch.dtype, seed: int, numel: int,
               device: str | torch.device = "cpu", chunk: int = CHUNK) -> torch.Tensor:
    """A new 1-D index_hash storage of ``numel`` elements on ``device``."""
    return fill(torch.empty(numel, dtype=dtype, device=device), seed, chunk)


__all__ = ["CHUNK", "DEFAULT_MAX_GIB", "DEFAULT_THRESHOLD", "MAX_GIB_ENV", "THRESHOLD_ENV",
           "fill", "first_change", "hash_chunk", "hash_words", "lowered", "max_bytes",
           "skip_reason", "storage_of", "threshold", "word_view"]
