"""The shapes of a confirmed hang, learnt from the Cases that hung and those that did not, so
that later Cases of such a shape are not run at all.

A kernel with a bad loop bound hangs on every Case of some common shape (a rank and a dim,
a dtype), and each such Case costs its allowance and a fresh executor; on a CPU the covering
stage alone meets hundreds of them. The features of a Case are the rank and each dim's size
of the Case and of the tensor it passes, and the dtype. Each hang joins the op's shape with
which it shares the most features that no Case of the op that answered (passed, or failed
any other way) has all of, narrowing that shape to what they share, or starts a shape of its
own. A shape that ``MIN_HANGS`` Cases joined, once the op's hang is confirmed, *blocks* a
later Case with all its features: not run, and counted as the hang's Case (a known hang's
stall, which never represents a finding). Shapes, not one, because one fault can hang on two
shapes (the input, or the ``out`` tensor), and because a large Case that merely ran past the
short allowance of an op with a confirmed hang would otherwise narrow the fault's one shape
to nothing; a Case that answered with every feature of a shape ends it.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch-heavy: a worker launches its executors before it imports torch
    from diagfuzz.core.case import Case

#: Hangs that joined a shape before it blocks anything: one or two Cases share features
#: by chance (a dim of 2), which more hangs strip away.
MIN_HANGS = 3

Feature = tuple[object, ...]


def features(case: Case) -> frozenset[Feature]:
    """What a hang's shape is made of: the rank and each dim's size of the Case's sizes
    and of the tensor it passes (a backward's grad), the dtype, and the ``out`` a ``.out``
    Case passes (one of the result's shape, an empty one, a flat one: a kernel that hangs
    on a shape hangs writing such an ``out`` too)."""
    tensor = tuple(case.layout.shape)
    mine: set[Feature] = {("rank", len(case.sizes)), ("dtype", case.dtype),
                          *(("dim", i, size) for i, size in enumerate(case.sizes)),
                          ("tensor rank", len(tensor)),
                          *(("tensor dim", i, size) for i, size in enumerate(tensor))}
    if case.out_dtype or case.out_device:
        from diagfuzz.core.case import drawn_out_form

        form = drawn_out_form(case)
        mine.add(("out", "of the result's shape" if form in ("fresh", "transposed") else form))
    return frozenset(mine)


_OUT_WORDS = {"empty": "an empty out", "misshapen": "a flat out one longer than the result"}


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
        elif feature[0] == "out":
            words.append(_OUT_WORDS.get(str(feature[1]), f"an out {feature[1]}"))
        else:
            words.append(f"{feature[1]}")
    return ", ".join(words) or "any Case"


@dataclass
class _Shape:
    """The features every hang that joined this shape shares, and how many joined it."""

    features: frozenset[Feature]
    hangs: int = 1


class HangShapes:
    """Per op, the shapes its hanging Cases formed and the Cases that answered; shared by
    the runners of one run in a process (``timeouts.KnownFaults.shapes``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._shapes: dict[str, list[_Shape]] = {}
        self._answered: dict[str, set[frozenset[Feature]]] = {}
        #: Cases blocked per op, and the shape that blocked its last (the gate's summary).
        self.blocked: Counter[str] = Counter()
        self.blocked_by: dict[str, str] = {}

    def _separates(self, op: str, shape: frozenset[Feature]) -> bool:
        """Whether ``shape`` says something no Case of ``op`` that answered has all of."""
        return bool(shape) and not any(shape <= seen for seen in self._answered.get(op, ()))

    def observe(self, case: Case, hung: bool) -> None:
        """A verdict of ``case``: it hung, or it answered."""
        mine, op = features(case), case.op
        with self._lock:
            shapes = self._shapes.setdefault(op, [])
            if not hung:
                self._answered.setdefault(op, set()).add(mine)
                shapes[:] = [shape for shape in shapes if not shape.features <= mine]
                return
            joined = [(len(shared), -i) for i, shape in enumerate(shapes)
                      if self._separates(op, shared := shape.features & mine)]
            if joined:
                shape = shapes[-max(joined)[1]]
                shape.features &= mine
                shape.hangs += 1
            elif self._separates(op, mine):
                shapes.append(_Shape(mine))

    def shapes(self, op: str) -> list[frozenset[Feature]]:
        """The shapes that mark ``op``'s hang: those ``MIN_HANGS`` hangs joined."""
        with self._lock:
            return [shape.features for shape in self._shapes.get(op, ())
                    if shape.hangs >= MIN_HANGS]

    def blocks(self, case: Case) -> frozenset[Feature] | None:
        """The shape ``case`` has, if it is one of ``case.op``'s hang's (then it is counted)."""
        mine = features(case)
        shape = next((shape for shape in self.shapes(case.op) if shape <= mine), None)
        if shape is None:
            return None
        with self._lock:
            self.blocked[case.op] += 1
            self.blocked_by[case.op] = describe(shape)
        return shape
