"""What a fuzz run covered and what failed: the end-of-run table and the JSON report.

Workers count cases per shard item into a ``Tally`` and ship it with the item's test report
(``report.diagfuzz``; pytest-xdist serialises it to the controller), so counts aggregate over
all workers and survive a worker that dies later. The controller merges them, prints
``format_table`` and writes ``write_json``.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from diagfuzz.core.names import DTYPE_NAMES
from diagfuzz.core.opnames import op_names

if TYPE_CHECKING:  # torch-heavy: the controller tallies reports without torch
    from diagfuzz.core.case import Case

SPECS = op_names()

#: Report columns: each op (``diagfuzz.specs``), and error-parity Cases of any op.
GROUPS = (*SPECS, "invalid")
#: Coverage axes, in table order.
AXES = ("op", "invalid", "rank", "dtype", "layout", "offset", "diagonal", "boundary", "call")


def diagonal_length(case: Case) -> int | None:
    """Length of the diagonal the Case selects; None when its dims are not a valid pair."""
    dims = _dims(case)
    if dims is None or not isinstance(case.offset, int):
        return None
    n1, n2 = case.sizes[dims[0]], case.sizes[dims[1]]
    if case.offset >= 0:
        return max(0, min(n1, n2 - case.offset))
    return max(0, min(n1 + case.offset, n2))


def _dims(case: Case) -> tuple[int, int] | None:
    rank = len(case.sizes)
    d1 = case.dim1 + rank if case.dim1 < 0 else case.dim1
    d2 = case.dim2 + rank if case.dim2 < 0 else case.dim2
    if rank < 2 or not (0 <= d1 < rank and 0 <= d2 < rank) or d1 == d2:
        return None
    return d1, d2


def classify(case: Case) -> dict[str, list[str]]:
    """The coverage classes of one Case, per axis (a layout can be of several kinds).

    Offsets use the strategies' own classes (``offset_class``: 0, +1, +inside, +size,
    +beyond ...), so the report counts what the strategies aim at; so does "boundary"
    (``boundary_class``: a diagonal length or a size next to a block size).
    """
    from diagfuzz.strategies import boundary_class, offset_class

    length = diagonal_length(case)
    dims = _dims(case)
    offset = "n/a"
    if dims is not None and isinstance(case.offset, int):
        offset = offset_class(case.offset, case.sizes[dims[0]], case.sizes[dims[1]])
    classes = {
        "rank": [str(len(case.sizes))],
        "dtype": [case.dtype],
        "layout": list(case.layout.kinds) or ["contiguous"],
        "offset": [offset],
        "diagonal": ["n/a" if length is None else "empty" if length == 0 else "non-empty"],
        "boundary": [boundary_class(case)],
        "call": ["out=" if case.out_dtype or case.out_device else "functional"],
    }
    if case.invalid:
        classes["op"] = [case.op]
        classes["invalid"] = [case.invalid]
    return classes


def levels_row(case: Case) -> str:
    """The Case's levels of its op's factor model (``diagfuzz.strategies.covering``) as
    one text, "factor=level|...": '' for a Case outside the model (invalid ones)."""
    from diagfuzz.strategies.covering import classify as levels_of

    try:
        levels = levels_of(case)
    except (ValueError, KeyError, IndexError, RuntimeError):  # never stops a run's count
        return ""
    return "|".join(f"{f}={level}" for f, level in levels.items())


def group_of(case: Case) -> str:
    """The report column of a Case."""
    return "invalid" if case.invalid else case.op


@dataclass
class Tally:
    """Explored Cases per group: how many, how many failed, how many the impl declared
    unsupported (per dtype), and the coverage classes of the judged ones."""

    cases: Counter[str] = field(default_factory=Counter)
    failures: Counter[str] = field(default_factory=Counter)
    unsupported: Counter[str] = field(default_factory=Counter)
    unsupported_dtypes: Counter[str] = field(default_factory=Counter)
    #: ``.out`` Cases per op that the impl could not take (no ``<op>_out`` method): apart
    #: from the dtypes, which it may well declare.
    unsupported_out: Counter[str] = field(default_factory=Counter)
    classes: dict[str, dict[str, Counter[str]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(Counter)))
    #: Judged Cases per group by factor-model row (``levels_row``): the t-way coverage.
    levels: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))

    def add(self, case: Case, failed: bool, unsupported: bool = False,
            no_out: bool = False) -> None:
        """Count one explored Case (an unsupported one is counted apart, not classified;
        ``no_out``: refused as an ``.out`` call the impl has no method for)."""
        group = group_of(case)
        self.cases[group] += 1
        if unsupported:
            self.unsupported[group] += 1
            if no_out:
                self.unsupported_out[case.op] += 1
            else:
                self.unsupported_dtypes[case.dtype] += 1
            return
        if failed:
            self.failures[group] += 1
        for axis, values in classify(case).items():
            for value in values:
                self.classes[group][axis][value] += 1
        row = levels_row(case)
        if row:
            self.levels[group][row] += 1

    def merge(self, other: Tally) -> None:
        """Add ``other``'s counts to this tally."""
        self.cases.update(other.cases)
        self.failures.update(other.failures)
        self.unsupported.update(other.unsupported)
        self.unsupported_dtypes.update(other.unsupported_dtypes)
        self.unsupported_out.update(other.unsupported_out)
        for group, axes in other.classes.items():
            for axis, values in axes.items():
                self.classes[group][axis].update(values)
        for group, rows in other.levels.items():
            self.levels[group].update(rows)

    def on_gpu(self, gpu: str) -> None:
        """Count every Case of this tally under class ``gpu`` of the axis ``gpu`` (a shard's
        Cases ran on its worker's GPU): the coverage table's split per GPU."""
        for group, n in self.cases.items():
            if n:
                self.classes[group]["gpu"][gpu] += n

    @property
    def total(self) -> int:
        """Cases over all groups."""
        return sum(self.cases.values())

    @property
    def failing(self) -> int:
        """Failing Cases over all groups."""
        return sum(self.failures.values())

    def coverage(self) -> dict[str, dict[str, int]]:
        """Cases per (axis, class) over all groups together."""
        merged: dict[str, Counter[str]] = defaultdict(Counter)
        for axes in self.classes.values():
            for axis, values in axes.items():
                merged[axis].update(values)
        return {a: dict(sorted(merged[a].items(), key=partial(_class_key, a)))
                for a in sorted(merged, key=_axis_order)}

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data: ``{group: {cases, failures, unsupported, classes: {axis:
        {class: n}}}}`` and, under ``"unsupported_dtypes"``, unsupported Cases per dtype
        (``"unsupported_out"``: refused ``.out`` Cases per op)."""
        groups = sorted(set(self.cases) | set(self.failures), key=_group_order)
        data: dict[str, Any] = {
            g: {"cases": self.cases[g], "failures": self.failures[g],
                "unsupported": self.unsupported[g],
                "classes": {a: dict(sorted(v.items())) for a, v in
                            sorted(self.classes[g].items(), key=lambda av: _axis_order(av[0]))},
                **({"levels": dict(sorted(self.levels[g].items()))} if self.levels.get(g)
                   else {})}
            for g in groups}
        if self.unsupported_dtypes:
            data["unsupported_dtypes"] = dict(sorted(self.unsupported_dtypes.items()))
        if self.unsupported_out:
            data["unsupported_out"] = dict(sorted(self.unsupported_out.items()))
        return data

    @staticmethod
    def from_dict(data: dict[str, Any]) -> Tally:
        """The inverse of ``to_dict``."""
        tally = Tally()
        for group, entry in data.items():
            if group == "unsupported_dtypes":
                tally.unsupported_dtypes.update(entry)
                continue
            if group == "unsupported_out":
                tally.unsupported_out.update(entry)
                continue
            tally.cases[group] += entry["cases"]
            tally.failures[group] += entry["failures"]
            tally.unsupported[group] += entry.get("unsupported", 0)
            for axis, values in entry["classes"].items():
                tally.classes[group][axis].update(values)
            tally.levels[group].update(entry.get("levels", {}))
        return tally


def _group_order(group: str) -> tuple[int, str]:
    return (GROUPS.index(group) if group in GROUPS else len(GROUPS), group)


def _axis_order(axis: str) -> tuple[int, str]:
    return (AXES.index(axis) if axis in AXES else len(AXES), axis)


def _class_key(axis: str, item: tuple[str, int]) -> tuple[int, int, str]:
    return _class_order(axis, item[0])


def _class_order(axis: str, value: str) -> tuple[int, int, str]:
    if axis == "rank" and value.isdigit():
        return (0, int(value), "")
    if axis == "dtype" and value in DTYPE_NAMES:
        return (0, DTYPE_NAMES.index(value), "")
    if axis == "boundary" and value[-2:] == "±1":  # "extent 64±1" ... "length 2048±1"
        kind, block = value[:-2].split()
        return (0, int(block), kind)
    return (1, 0, value)


def format_table(tally: Tally) -> list[str]:
    """The coverage table: a column per group, a row per (axis, class)."""
    groups = [g for g in GROUPS if tally.cases[g]] + sorted(
        g for g in tally.cases if g not in GROUPS)
    if not groups:
        return ["no diagfuzz cases ran"]
    rows: list[tuple[str, str, list[int]]] = [
        ("cases", "", [tally.cases[g] for g in groups]),
        ("failing", "", [tally.failures[g] for g in groups]),
    ]
    if tally.unsupported:
        rows.append(("unsupported", "", [tally.unsupported[g] for g in groups]))
    axes = sorted({a for g in groups for a in tally.classes[g]}, key=_axis_order)
    for axis in axes:
        values = sorted({v for g in groups for v in tally.classes[g][axis]},
                        key=partial(_class_order, axis))
        for i, value in enumerate(values):
            rows.append((axis if i == 0 else "", value,
                         [tally.classes[g][axis][value] for g in groups]))
    head = max(len(a) for a, _, _ in rows)
    sub = max(len(v) for _, v, _ in rows)
    widths = [max(len(g), 7) for g in groups]
    lines = [" " * (head + sub + 2) + "  ".join(g.rjust(w) for g, w in zip(groups, widths,
                                                                          strict=True))]
    for axis, value, counts in rows:
        cells = "  ".join((str(n) if n else ".").rjust(w)
                          for n, w in zip(counts, widths, strict=True))
        lines.append(f"{axis.ljust(head)}  {value.ljust(sub)}{cells}")
    if tally.unsupported_dtypes:
        lines.append("unsupported by dtype: " + ", ".join(
            f"{d} {n}" for d, n in sorted(tally.unsupported_dtypes.items())))
    if tally.unsupported_out:
        lines.append("unsupported .out calls (the impl has no <op>_out): " + ", ".join(
            f"{op} {n}" for op, n in sorted(tally.unsupported_out.items())))
    return lines


@dataclass
class Pace:
    """How fast the shards fuzzed: Cases and seconds inside shard items, per worker.

    A run's wall time also holds start-up (interpreters, CUDA, executors, collection), which
    dominates short runs on a GPU machine; the Cases/s *inside* shards is the rate a longer
    run approaches (first compiles, inside the first shards, included).
    """

    workers: dict[str, list[float]] = field(default_factory=dict)  # worker: [cases, seconds]
    #: The GPU each worker was pinned to (its CUDA_VISIBLE_DEVICES), where known.
    gpus: dict[str, str] = field(default_factory=dict)

    def add(self, worker: str, cases: int, seconds: float, gpu: str | None = None) -> None:
        """Count one shard item's Cases and the seconds its call took (on ``gpu``)."""
        done = self.workers.setdefault(worker, [0, 0.0])
        done[0] += cases
        done[1] += seconds
        if gpu:
            self.gpus[worker] = gpu

    def add_report(self, data: dict[str, Any], prefix: str = "") -> None:
        """Add a report's ``pace`` (its workers, and their GPUs), each name after ``prefix``
        (``p2/``: partition 2's machine, so that two hosts' GPU 0 stay apart)."""
        gpus = data.get("worker_gpus") or {}
        for worker, entry in (data.get("workers") or {}).items():
            gpu = gpus.get(worker)
            self.add(prefix + worker, int(entry.get("cases", 0)),
                     float(entry.get("shard_s", 0.0)), None if gpu is None else prefix + gpu)

    def per_gpu(self) -> dict[str, dict[str, Any]]:
        """Per GPU: its workers, their Cases, and the Cases/s they fuzzed together (each
        worker's rate inside its shards, summed: the GPU's share of the run's pace)."""
        split: dict[str, dict[str, Any]] = {}
        for worker, (cases, seconds) in sorted(self.workers.items()):
            gpu = self.gpus.get(worker)
            if gpu is None:
                continue
            entry = split.setdefault(gpu, {"workers": 0, "cases": 0, "cases_per_s": 0.0})
            entry["workers"] += 1
            entry["cases"] += int(cases)
            entry["cases_per_s"] += cases / seconds if seconds > 0 else 0.0
        for entry in split.values():
            entry["cases_per_s"] = round(entry["cases_per_s"], 1)
        return split

    def per_worker(self) -> float | None:
        """Cases/s of one worker inside shards: all shards' Cases over all their seconds, so
        a short shard weighs what it lasted (None before any shard ran). A worker xdist
        replaced after a crash reports under a new id; the rate is unaffected."""
        cases = sum(c for c, _ in self.workers.values())
        seconds = sum(t for _, t in self.workers.values())
        return cases / seconds if seconds > 0 else None

    def outside(self, duration_s: float) -> float:
        """Seconds of the run outside shards: its duration less the busiest worker's."""
        busiest = max((seconds for _, seconds in self.workers.values()), default=0.0)
        return max(duration_s - busiest, 0.0)

    def to_dict(self, duration_s: float) -> dict[str, Any]:
        """The report's ``pace``: per worker, the time-weighted rate, and the time outside
        shards (the run's duration less the busiest worker's shard seconds)."""
        rate = self.per_worker()
        return {
            "workers": {w: {"cases": int(c), "shard_s": round(t, 3),
                            "cases_per_s": round(c / t, 1) if t > 0 else None}
                        for w, (c, t) in sorted(self.workers.items())},
            "cases_per_s_per_worker": None if rate is None else round(rate, 1),
            "outside_shards_s": round(self.outside(duration_s), 3),
            "gpus": self.per_gpu(),
            "worker_gpus": dict(sorted(self.gpus.items())),
        }

    def summary(self, duration_s: float) -> str:
        """One line for the terminal."""
        rate = self.per_worker()
        if rate is None:
            return "pace: no shard ran"
        line = (f"pace: {rate:.0f} Cases/s per worker inside shards ({len(self.workers)} "
                f"worker id(s)); {self.outside(duration_s):.1f} s of the "
                f"{duration_s:.1f} s run outside them (start-up, collection)")
        split = self.per_gpu()
        if split:
            line += "; per GPU: " + ", ".join(
                f"{gpu} {e['cases']:,} Cases at {e['cases_per_s']:,.0f}/s ({e['workers']} "
                f"worker{'s' if e['workers'] != 1 else ''})" for gpu, e in split.items())
        return line


#: The JSON report's format version (``diagfuzz_report``).
REPORT_VERSION = 2


def report_data(header: dict[str, Any], tally: Tally, findings: list[Any]) -> dict[str, Any]:
    """The JSON report: run header (seed, impl, ...), counts, and every finding."""
    return {
        "diagfuzz_report": REPORT_VERSION,
        **header,
        "cases": tally.total,
        "failing_cases": tally.failing,
        "unsupported_cases": sum(tally.unsupported.values()),
        "counts": tally.to_dict(),
        "coverage": tally.coverage(),
        "findings": [f.to_dict() for f in findings],
    }


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write the report atomically (a reader never sees half of it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    tmp.replace(path)
