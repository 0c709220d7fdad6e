"""The shape of a confirmed hang, learnt from the Cases that hung and those that did not, so
that later Cases of that shape are not run at all.

A kernel with a bad loop bound hangs on every Case of some common shape (a rank and a dim,
a dtype), and each such Case costs its allowance and a fresh executor; on a CPU the covering
stage alone meets hundreds of them. Once an op's hang is confirmed and ``MIN_HANGS`` of its
Cases have hung, the features every one of them shares (the rank and each dim's size of
the Case and of the tensor it passes, the dtype) are the hang's shape, kept only while no
Case of the op that answered (passed, or failed any other way) has them all. A later Case
with that shape is *blocked*: not run, and counted as the hang's Case (a known hang's
stall, which never represents a finding). A hang that does not match narrows the shape to
what all hangs share, checked again against every Case that answered; a shape that no
longer separates the two blocks nothing.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch-heavy: a worker launches its executors before it imports torch
    from diagfuzz.core.case import Case

#: Hangs of an op seen before its shape blocks anything: one or two Cases share features
#: by chance (a dim of 2), which more hangs strip away.
MIN_HANGS = 3

Feature = tuple[object, ...]


def features(case: Case) -> frozenset[Feature]:
    """What a hang's shape is made of: the rank and each dim's size of the Case's sizes
    and of the tensor it passes (a backward's grad), the dtype."""
    tensor = tuple(case.layout.shape)
    return frozenset({("rank", len(case.sizes)), ("dtype", case.dtype),
                      *(("dim", i, size) for i, size in enumerate(case.sizes)),
                      ("tensor rank", len(tensor)),
                      *(("tensor dim", i, size) for i, size in enumerate(tensor))})


def describe(shape: frozenset[Feature]) -> str:
    """``shape`` in words: "rank 4, dim 0 = 3"."""
    words: list[str] = []
    for feature in sorted(shape, key=repr):
        tag = str(feature[0])
        if tag.startswith("tensor ") and (tag.removeprefix("tensor "), *feature[1:]) in shape:
            continue  # the tensor is the Case's sizes: said once
        if feature[0] == "rank":
            words.insert(0, f"rank {feature[1]}")
        elif feature[0] == "dim":
            words.append(f"dim {feature[1]} = {feature[2]}")
        elif feature[0] == "tensor rank":
            words.append(f"its tensor of rank {feature[1]}")
        elif feature[0] == "tensor dim":
            words.append(f"its tensor's dim {feature[1]} = {feature[2]}")
        else:
            words.append(f"{feature[1]}")
    return ", ".join(words) or "any Case"


class HangShapes:
    """Per op, the features all its hanging Cases share and the Cases that answered; shared
    by the runners of one run in a process (``timeouts.KnownFaults.shapes``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._shared: dict[str, frozenset[Feature]] = {}
        self._hangs: Counter[str] = Counter()
        self._answered: dict[str, set[frozenset[Feature]]] = {}
        #: Per op, whether no Case that answered has every feature of ``_shared``.
        self._separates: dict[str, bool] = {}
        #: Cases blocked per op, and the shape that blocked its last (the gate's summary).
        self.blocked: Counter[str] = Counter()
        self.blocked_by: dict[str, str] = {}

    def observe(self, case: Case, hung: bool) -> None:
        """A verdict of ``case``: it hung, or it answered."""
        mine, op = features(case), case.op
        with self._lock:
            if hung:
                before = self._shared.get(op)
                shared = self._shared[op] = mine if before is None else before & mine
                self._hangs[op] += 1
                if shared != before:  # narrower: every answered Case is checked again
                    self._separates[op] = not any(
                        shared <= answered for answered in self._answered.get(op, ()))
            else:
                self._answered.setdefault(op, set()).add(mine)
                marked = self._shared.get(op)
                if marked is not None and marked <= mine:
                    self._separates[op] = False

    def shape(self, op: str) -> frozenset[Feature] | None:
        """The features that mark ``op``'s hang, or None while they do not separate it."""
        with self._lock:
            shared = self._shared.get(op)
            if (not shared or self._hangs[op] < MIN_HANGS
                    or not self._separates.get(op, False)):
                return None
            return shared

    def blocks(self, case: Case) -> frozenset[Feature] | None:
        """The shape ``case`` has, if it is ``case.op``'s hang's (then it is counted)."""
        shape = self.shape(case.op)
        if shape is None or not shape <= features(case):
            return None
        with self._lock:
            self.blocked[case.op] += 1
            self.blocked_by[case.op] = describe(shape)
        return shape
