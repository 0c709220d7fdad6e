"""Move elements as same-width integers: exact for every dtype, including NaN payloads.

A 16-byte element (complex128) becomes two int64 words; every other dtype is one word of its
own width. Views only: no data is copied.
"""

from __future__ import annotations

import torch

_WORD_OF_SIZE = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def words_per_element(dtype: torch.dtype) -> int:
    """How many integer words one element of ``dtype`` occupies (1 or 2)."""
    size = dtype.itemsize
    if size in _WORD_OF_SIZE:
        return 1
    if size == 16:
        return 2
    raise TypeError(f"diagfuzz kernels do not support dtype {dtype} ({size}-byte elements)")


def as_words(tensor: torch.Tensor) -> torch.Tensor:
    """View ``tensor`` as integer words; strides stay in elements of the view's dtype.

    A 16-byte element gains a trailing dim of 2 words; callers account for it with WORDS.
    """
    if tensor.is_conj() or tensor.is_neg():
        raise ValueError("as_words needs a tensor with resolved conj/neg bits")
    if tensor.dtype.itemsize == 16:
        return torch.view_as_real(tensor).view(torch.int64)
    word = _WORD_OF_SIZE.get(tensor.dtype.itemsize)
    if word is None:
        raise TypeError(f"diagfuzz kernels do not support dtype {tensor.dtype}")
    return tensor.view(word)
