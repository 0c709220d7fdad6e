"""Findings: one per cause (failure signature), with its representative Case, as a person
reads it.

A run keeps fuzzing after a failure; every failing Case is counted under its signature
(``diagfuzz.core.signature``), and each signature keeps one representative, shrunk by Hypothesis
where it could be. A finding also counts what its failing Cases covered: dtypes, invalid
classes, aten's exception types (``cause_axes``). Shards report their findings to the
controller, which merges them by signature (counts add up; the simplest representative
wins), writes a reproducer for each and prints one compact block per finding.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from diagfuzz.core.case import Case
from diagfuzz.core.signature import (
    Signature,
    cause_axes,
    signature_from,
    signature_of,
    symptom_of,
)
from diagfuzz.core.verdict import Verdict
from diagfuzz.execution.classification import Classification, history_lines
from diagfuzz.execution.timeouts import unconfirmed_stall

#: How many differing elements a block shows.
FIRST_SHOWN = 3


@dataclass
class Finding:
    """One signature's failures: a representative verdict and what else was seen.

    ``count`` failing Cases while exploring (shrink attempts are not counted); ``dtypes``
    counts them per dtype and ``classes`` per other axis (``cause_axes``: invalid class,
    aten's exception type); ``shrunk``: the representative is Hypothesis' shrunk example;
    ``flaky``: the representative failed while exploring and passed when replayed.
    ``examples``: a wrong result's representative per symptom (``symptom_of``), each
    ``{"case", "shrunk", "flaky", "message"}``: one finding per fix, each symptom's Case.
    """

    signature: Signature
    verdict: dict[str, Any]
    count: int = 1
    dtypes: dict[str, int] = field(default_factory=dict)
    shrunk: bool = False
    flaky: bool = False
    test_ids: list[str] = field(default_factory=list)
    reproducer: str | None = None
    classes: dict[str, dict[str, int]] = field(default_factory=dict)
    examples: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: What its Case needs to fail beyond itself (the earlier calls of its executor, shrunk):
    #: the controller's check in fresh executors (``diagfuzz.harness.history_check``).
    classification: Classification | None = None

    @staticmethod
    def of(verdict: Verdict, test_id: str = "", *, count: int = 1,
           dtypes: dict[str, int] | None = None,
           classes: dict[str, dict[str, int]] | None = None) -> Finding:
        """The finding a failing Verdict stands for."""
        data = json.loads(verdict.to_json())
        case = verdict.case
        seen = dtypes if dtypes is not None else ({case.dtype: count} if case else {})
        if classes is None:
            axes = cause_axes(data.get("case"), verdict.details)
            classes = {axis: {value: count} for axis, value in axes.items()}
        return Finding(signature_of(verdict), data, count, dict(seen),
                       test_ids=[test_id] if test_id else [], classes=classes)

    @staticmethod
    def harness(test_id: str, case: Case | None, exc: BaseException) -> Finding:
        """The harness itself failed on ``case`` (the runner raised): not the impl's verdict."""
        details: dict[str, Any] = {"type": type(exc).__name__}
        data: dict[str, Any] = {"kind": "harness-error", "check": "harness",
                "message": f"{type(exc).__name__}: {exc}",
                "case": case.to_dict() if case else None, "details": details}
        return Finding(signature_from("harness-error", "harness", data["case"], details),
                       json.loads(json.dumps(data)), test_ids=[test_id] if test_id else [])

    # --- fields of the representative ---------------------------------------------------
    @property
    def kind(self) -> str:
        return str(self.verdict.get("kind", ""))

    @property
    def check(self) -> str:
        return str(self.verdict.get("check", ""))

    @property
    def message(self) -> str:
        return str(self.verdict.get("message", ""))

    @property
    def details(self) -> dict[str, Any]:
        return dict(self.verdict.get("details") or {})

    @property
    def case(self) -> Case | None:
        data = self.verdict.get("case")
        return Case.from_json(data) if data else None

    def as_verdict(self) -> Verdict | None:
        """The representative as a Verdict (None for a harness error: no verdict kind)."""
        if self.case is None or self.kind == "harness-error":
            return None
        return Verdict(self.kind, self.check, self.message, self.case, self.details)

    # --- merging ------------------------------------------------------------------------
    def preference(self) -> tuple[Any, ...]:
        """Sort key of representatives: a confirmed hang's Case before a known hang's later
        stall (a stall past a short allowance, never confirmed: on a loaded machine a slow
        call), shrunk, not flaky, then the simplest Case."""
        case = self.case
        simple = (case.layout.storage_size, len(case.sizes), len(case.to_json()),
                  case.to_json()) if case else (0, 0, 0, "")
        return (unconfirmed_stall(self.kind, self.verdict.get("details")), not self.shrunk,
                self.flaky, *simple)

    def symptom_examples(self) -> dict[str, dict[str, Any]]:
        """``examples``, or the representative as its symptom's example (a finding fresh
        from one shard's shrink holds one symptom)."""
        return self.examples or own_example(self.verdict, self.shrunk, self.flaky)

    def merge(self, other: Finding) -> None:
        """Add ``other`` (same signature) to this finding; the better representative stays."""
        self.examples = merge_examples(self.symptom_examples(), other.symptom_examples())
        if other.preference() < self.preference():
            self.verdict, self.shrunk, self.flaky = other.verdict, other.shrunk, other.flaky
            self.classification = other.classification  # of the representative's Case
        self.count += other.count
        self.dtypes = dict(Counter(self.dtypes) + Counter(other.dtypes))
        self.classes = add_tallies(self.classes, other.classes)
        self.test_ids += [t for t in other.test_ids if t not in self.test_ids]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data (the report's ``findings`` entries)."""
        return {"signature": self.signature.to_dict(), "describe": self.signature.describe(),
                "kind": self.kind, "check": self.check, "message": self.message,
                "case": self.verdict.get("case"), "verdict": self.verdict,
                "count": self.count, "dtypes": dict(sorted(self.dtypes.items())),
                "classes": {axis: dict(sorted(values.items()))
                            for axis, values in sorted(self.classes.items())},
                "shrunk": self.shrunk, "flaky": self.flaky, "test_ids": list(self.test_ids),
                "reproducer": self.reproducer, "examples": self.symptom_examples(),
                **({"classification": self.classification.to_dict()}
                   if self.classification is not None else {})}

    @staticmethod
    def from_dict(data: dict[str, Any]) -> Finding:
        """The inverse of ``to_dict``."""
        return Finding(Signature.from_dict(data["signature"]), dict(data["verdict"]),
                       int(data.get("count", 1)), dict(data.get("dtypes", {})),
                       bool(data.get("shrunk")), bool(data.get("flaky")),
                       list(data.get("test_ids", [])), data.get("reproducer"),
                       {str(axis): {str(k): int(n) for k, n in values.items()}
                        for axis, values in dict(data.get("classes", {})).items()},
                       {str(k): dict(v) for k, v in dict(data.get("examples") or {}).items()},
                       _classification(data))


def _classification(data: dict[str, Any]) -> Classification | None:
    """A report entry's classification, where it has one and a Case."""
    found, case = data.get("classification"), data.get("verdict", {}).get("case")
    if not found or not case:
        return None
    return Classification.from_dict(found, Case.from_json(case))


def own_example(verdict: dict[str, Any], shrunk: bool, flaky: bool
                ) -> dict[str, dict[str, Any]]:
    """A representative verdict (JSON) as its symptom's example; {} for a failure with no
    symptom (a raise, a crash ...)."""
    symptom = symptom_of(str(verdict.get("kind", "")), verdict.get("details"))
    if not symptom or not verdict.get("case"):
        return {}
    return {symptom: {"case": verdict["case"], "shrunk": shrunk, "flaky": flaky,
                      "message": str(verdict.get("message", ""))}}


def example_preference(example: dict[str, Any]) -> tuple[Any, ...]:
    """Sort key of one symptom's examples, as ``Finding.preference`` (less its hang rule:
    a hang has no symptom examples)."""
    case = Case.from_json(example["case"]) if example.get("case") else None
    simple = (case.layout.storage_size, len(case.sizes), len(case.to_json()),
              case.to_json()) if case else (0, 0, 0, "")
    return (not example.get("shrunk"), bool(example.get("flaky")), *simple)


def merge_examples(a: dict[str, dict[str, Any]], b: dict[str, dict[str, Any]]
                   ) -> dict[str, dict[str, Any]]:
    """Per symptom, the better of ``a``'s and ``b``'s examples."""
    merged = dict(a)
    for symptom, example in b.items():
        if symptom not in merged or example_preference(example) < example_preference(
                merged[symptom]):
            merged[symptom] = example
    return dict(sorted(merged.items()))


def add_tallies(a: dict[str, dict[str, int]], b: dict[str, dict[str, int]]
                ) -> dict[str, dict[str, int]]:
    """Per-axis counts of ``a`` and ``b`` added up."""
    return {axis: dict(Counter(a.get(axis, {})) + Counter(b.get(axis, {})))
            for axis in sorted(set(a) | set(b))}


def merge_findings(findings: list[Finding]) -> list[Finding]:
    """One finding per signature, sorted by signature, counts added up."""
    merged: dict[Signature, Finding] = {}
    for finding in findings:
        if finding.signature in merged:
            merged[finding.signature].merge(finding)
        else:
            merged[finding.signature] = Finding.from_dict(finding.to_dict())
    return sorted(merged.values(), key=lambda f: f.signature)


# --- the compact block -------------------------------------------------------------------

def dtype_tally(dtypes: dict[str, int]) -> str:
    """Failing Cases per dtype, most first (``float32 3, float16 2``): the finding block's
    and the gate summary's count."""
    return ", ".join(f"{d} {n}" for d, n in sorted(dtypes.items(),
                                                   key=lambda kv: (-kv[1], kv[0])))


def _seen(finding: Finding) -> str:
    dtypes = dtype_tally(finding.dtypes)
    cases = "Case" if finding.count == 1 else "Cases"
    return f"{finding.count} failing {cases} drawn" + (f": {dtypes}" if dtypes else "")


def covers_lines(classes: dict[str, dict[str, int]], indent: str = "  ") -> list[str]:
    """``covers   Case class: same_dims 12, valid 3`` for every axis with more than its
    trivial value (a finding of valid Cases alone says nothing of invalid classes)."""
    lines = []
    for axis, values in sorted(classes.items()):
        if axis == "symptom" or (axis == "invalid class" and set(values) == {"valid"}):
            continue  # symptoms: symptom_lines, each with its Case
        # The axis holds "valid" beside the invalid classes: "invalid class: valid" misread.
        name = "Case class" if axis == "invalid class" else axis
        lines.append(f"{indent}{'covers':<8} {name}: {dtype_tally(values)}")
    return lines


def symptom_lines(classes: dict[str, dict[str, int]],
                  examples: dict[str, dict[str, Any]], indent: str = "  ") -> list[str]:
    """One line per symptom of a wrong result, most Cases first: its count and its own
    representative (``symptom  signed-zero: 14 Cases, shrunk diagonal(sizes=[1, 1] ...)``),
    so a second bug merged into the finding shows its own Case."""
    counts = dict(classes.get("symptom", {}))
    lines = []
    for symptom in sorted(set(counts) | set(examples), key=lambda k: (-counts.get(k, 0), k)):
        n = counts.get(symptom, 0)
        text = f"{indent}{'symptom':<8} {symptom}: {n} Case{'' if n == 1 else 's'}"
        example = examples.get(symptom) or {}
        if example.get("case"):
            how = ("shrunk" if example.get("shrunk") else
                   "flaky" if example.get("flaky") else "first")
            text += f", {how} {Case.from_json(example['case']).describe()}"
        lines.append(text)
    return lines


def _exception_line(label: str, entry: Any) -> str | None:
    if not isinstance(entry, dict):
        return None
    message = str(entry.get("message", "")).strip().splitlines()
    text = f" {message[0][:160]}" if message else ""
    return f"  {label:<8} {entry.get('type', '?')}:{text}"


def evidence_lines(details: dict[str, Any]) -> list[str]:
    """The first differing elements (expected and actual values, hex bits) and exceptions."""
    lines = []
    for entry in list(details.get("first") or [])[:FIRST_SHOWN]:
        lines.append(f"  {'element':<8} {entry.get('index')}: expected "
                     f"{entry.get('expected')} ({entry.get('expected_bits')}), actual "
                     f"{entry.get('actual')} ({entry.get('actual_bits')})")
    more = int(details.get("differing", 0)) - len(lines)
    if lines and more > 0:
        lines.append(f"  {'':<8} ... {more} more of {details.get('numel')} elements differ")
    for label, key in (("aten", "expected"), ("impl", "actual")):
        line = _exception_line(label, details.get(key))
        if line:
            lines.append(line)
    if details.get("field"):
        lines.append(f"  {details['field']:<8} expected {details.get('expected')}, actual "
                     f"{details.get('actual')}")
    tail = stderr_lines(str(details.get("stderr_tail") or ""))
    lines += [f"  {'stderr':<8} {line}" for line in tail]
    return lines


#: Frames of a dying executor's stack shown in a finding (innermost first).
FRAMES_SHOWN = 4


def stderr_lines(tail: str) -> list[str]:
    """What a crash's stderr tail says, in a few lines: faulthandler's error line and the
    innermost frames of the crashing thread (where the implementation died, which a plain
    tail cut off under torch's module list); any other tail, its last lines."""
    lines = [line.rstrip() for line in tail.strip().splitlines() if line.strip()]
    fatal = [line for line in lines if line.startswith("Fatal Python error")]
    crashing = [i for i, line in enumerate(lines)
                if line.startswith(("Current thread", "Thread 0x"))
                and "most recent call first" in line]
    if not (fatal and crashing):
        return lines[-6:]
    start = next((i for i in crashing if lines[i].startswith("Current thread")), crashing[0])
    frames = []
    for line in lines[start + 1:]:
        if not line.lstrip().startswith("File "):
            break
        frames.append(line.strip())
    return [fatal[-1], *frames[:FRAMES_SHOWN]]


def block(finding: Finding, number: int, total: int,
          command: str | None = None) -> list[str]:
    """The compact block of one finding: signature, full Case, evidence, reproducer."""
    flags = [w for w, on in (("flaky: passed when replayed", finding.flaky),
                             ("not shrunk", not finding.shrunk and not finding.flaky))
             if on]
    head = f"[{number}/{total}] {finding.signature.describe()}  ({_seen(finding)})"
    lines = [head + (f"  [{'; '.join(flags)}]" if flags else "")]
    case = finding.case
    if case is not None:
        # "shrunk": Hypothesis' smallest failing Case, which need not be one of the drawn
        # Cases the head counts (its dtype may be none of theirs).
        described = case.describe_full()
        lines.append(f"  {'shrunk' if finding.shrunk else 'case':<8} {described[0]}")
        lines += [f"  {'':<8} {line}" for line in described[1:]]
    where = f" [{finding.check}]" if finding.check else ""
    lines.append(f"  {'found':<8} {finding.kind}{where}: {finding.message}")
    lines += covers_lines(finding.classes)
    lines += symptom_lines(finding.classes, finding.symptom_examples())
    lines += ["  " + line for line in history_lines(finding.classification)]
    lines += evidence_lines(finding.details)
    if command:
        lines.append(f"  {'repro':<8} {command}")
    return lines
