"""Switching diagfuzz's aten registration off for a reference, without importing a kernel.

The references and the relations must run aten's own kernels. Only ``diagfuzz.ops``
registers anything; when it was never imported, or registered nothing, there is nothing to
switch, so the oracle and the specs never need to import it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager


@contextmanager
def registration_off(tensors: Iterable[object] | None = None) -> Iterator[None]:
    """diagfuzz's kernels off inside the block, for ops on ``tensors`` (see
    ``diagfuzz.ops.registration.use_triton``: nothing is switched when the registration
    serves none of them)."""
    registration = sys.modules.get("diagfuzz.ops.registration")
    if registration is None or not registration.enabled():
        yield
        return
    with registration.use_triton(False, tensors=tensors):
        yield
