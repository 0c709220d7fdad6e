"""The shapes of a confirmed hang or crash, learnt from the Cases that failed so and those
that did not, so that later Cases of such a shape are not run at all.

A kernel with a bad loop bound hangs (or a bad index crashes) on every Case of some common
shape (a rank and a dim, a dtype), and each such Case costs a fresh executor, a hang its
allowance too; on a CPU the covering stage alone meets hundreds of them. The features of a
Case are the rank and each dim's size of the Case and of the tensor it passes, the dtype,
and a ``.out`` Case's ``out``. Each hang (crash) joins the op's hang (crash) shape with
which it shares the most features that no Case of the op that answered (passed, or failed
any other way) has all of, narrowing that shape to what they share, or starts a shape of
its own. A shape that ``MIN_FAULTS`` Cases joined, once the op's fault of that kind is
confirmed, *blocks* a later Case with all its features: not run, and counted as the
fault's Case (``details.blocked``, which never represents a finding). Shapes, not one,
because one fault can fail on two shapes (the input, or the ``out`` tensor), and because a
large Case that merely ran past the short allowance of an op with a confirmed hang would
otherwise narrow the fault's one shape to nothing; a Case that answered with every feature
of a shape ends it.

The processes of one run share what they learn (``publish`` and ``adopt``, through the
run's known-faults file, ``timeouts.KnownFaults``): a shape that blocks, as it forms or
narrows, and its end. Why: each of the suite's workers would otherwise pay ``MIN_FAULTS``
hangs of every op's shape itself, each a kill and a fresh executor (on a GPU, where a hang
stalls in C, seconds apiece). A process adopts a shape only where none of its own Cases
that answered has all its features.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch-heavy: a worker launches its executors before it imports torch
    from diagfuzz.core.case import Case

#: Faults that joined a shape before it blocks anything: one or two Cases share features
#: by chance (a dim of 2), which more faults strip away.
MIN_FAULTS = 3
#: The faults whose shapes are learnt (each costs a fresh executor a Case), with the check
#: a Case not run for such a shape gets until a verdict of the op's fault names its own.
FAULT_CHECKS = {"hang": "executor:timeout", "crash": "executor:died"}
FAULTS = tuple(FAULT_CHECKS)

Feature = tuple[object, ...]
#: What one process tells the others of a shape (``FaultShapes.publish``): ``op``,
#: ``fault``, ``features`` (JSON lists), ``check`` (its verdicts' check) and ``ends``.
Shared = dict[str, Any]


def features(case: Case) -> frozenset[Feature]:
    """What a fault's shape is made of: the rank and each dim's size of the Case's sizes
    and of the tensor it passes (a backward's grad), the dtype, and the ``out`` a ``.out``
    Case passes (one of the result's shape, an empty one, a flat one: a kernel that fails
    on a shape fails writing such an ``out`` too)."""
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
    """The features every fault that joined this shape shares, and how many joined it."""

    features: frozenset[Feature]
    faults: int = 1


def _to_json(shape: frozenset[Feature]) -> list[list[object]]:
    return sorted((list(feature) for feature in shape), key=repr)


def _from_json(data: Any) -> frozenset[Feature]:
    return frozenset(tuple(feature) for feature in data)


class FaultShapes:
    """Per op and fault, the shapes its failing Cases formed, and per op the Cases that
    answered; shared by the runners of one run in a process (``timeouts.KnownFaults``),
    and with the run's other processes through ``publish`` and ``adopt``."""

    def __init__(self, publish: Callable[[Shared], None] | None = None) -> None:
        #: Called (outside the lock) with each shape that blocks as it forms or narrows,
        #: and each such shape's end.
        self.publish = publish
        self._lock = threading.Lock()
        self._shapes: dict[tuple[str, str], list[_Shape]] = {}
        self._answered: dict[str, set[frozenset[Feature]]] = {}
        #: Cases blocked per op, and the fault and shape that blocked its last (the gate's
        #: summary).
        self.blocked: Counter[str] = Counter()
        self.blocked_by: dict[str, tuple[str, str]] = {}
        #: Per op and fault, the check its last such verdict had (``executor:died``, or
        #: ``executor:health`` for a Case that left its executor unusable): a blocked Case
        #: gets it, so it counts in that finding.
        self.checks: dict[tuple[str, str], str] = {}

    def _separates(self, op: str, shape: frozenset[Feature]) -> bool:
        """Whether ``shape`` says something no Case of ``op`` that answered has all of."""
        return bool(shape) and not any(shape <= seen for seen in self._answered.get(op, ()))

    def observe(self, case: Case, fault: str | None, check: str = "") -> None:
        """A verdict of ``case``: a ``FAULTS`` kind it failed with (and its check), or None:
        it answered."""
        mine, op = features(case), case.op
        told: list[Shared] = []
        with self._lock:
            if fault is not None and check:
                self.checks[(op, fault)] = check
            if fault is None:
                self._answered.setdefault(op, set()).add(mine)
                for kind in FAULTS:
                    shapes = self._shapes.get((op, kind), [])
                    told += [self._shared(op, kind, shape.features, ends=True)
                             for shape in shapes
                             if shape.features <= mine and shape.faults >= MIN_FAULTS]
                    shapes[:] = [shape for shape in shapes if not shape.features <= mine]
            else:
                shapes = self._shapes.setdefault((op, fault), [])
                joined = [(len(shared), -i) for i, shape in enumerate(shapes)
                          if self._separates(op, shared := shape.features & mine)]
                if joined:
                    shape = shapes[-max(joined)[1]]
                    narrower = shape.features & mine
                    if shape.faults + 1 >= MIN_FAULTS and (
                            narrower != shape.features or shape.faults + 1 == MIN_FAULTS):
                        told.append(self._shared(op, fault, narrower))
                    shape.features = narrower
                    shape.faults += 1
                elif self._separates(op, mine):
                    shapes.append(_Shape(mine))
        if self.publish is not None:
            for entry in told:
                self.publish(entry)

    def _shared(self, op: str, fault: str, shape: frozenset[Feature],
                ends: bool = False) -> Shared:
        return {"op": op, "fault": fault, "features": _to_json(shape),
                "check": self.checks.get((op, fault), ""), "ends": ends}

    def adopt(self, entry: Shared) -> None:
        """A shape another process of the run published (``publish``): it blocks here too,
        unless a Case that answered here has all its features; or its end."""
        op, fault = str(entry["op"]), str(entry["fault"])
        if fault not in FAULTS:
            return
        shape = _from_json(entry["features"])
        with self._lock:
            shapes = self._shapes.setdefault((op, fault), [])
            if entry.get("ends"):
                shapes[:] = [s for s in shapes if s.features != shape]
                return
            if (any(s.features <= shape and s.faults >= MIN_FAULTS for s in shapes)
                    or not self._separates(op, shape)):
                return  # blocked here already (its own line too), or answered here
            # (a shape it narrows, told before, blocks nothing it does not)
            shapes[:] = [s for s in shapes if not (shape <= s.features
                                                   and s.faults >= MIN_FAULTS)]
            shapes.append(_Shape(shape, MIN_FAULTS))
            if entry.get("check"):
                self.checks.setdefault((op, fault), str(entry["check"]))

    def shapes(self, op: str, fault: str = "hang") -> list[frozenset[Feature]]:
        """The shapes that mark ``op``'s ``fault``: those ``MIN_FAULTS`` faults joined."""
        with self._lock:
            return [shape.features for shape in self._shapes.get((op, fault), ())
                    if shape.faults >= MIN_FAULTS]

    def blocks(self, case: Case, fault: str = "hang") -> frozenset[Feature] | None:
        """The shape ``case`` has, if it is one of ``case.op``'s ``fault``'s (then it is
        counted)."""
        mine = features(case)
        shape = next((shape for shape in self.shapes(case.op, fault) if shape <= mine), None)
        if shape is None:
            return None
        with self._lock:
            self.blocked[case.op] += 1
            self.blocked_by[case.op] = (fault, describe(shape))
        return shape
