"""The failure signature: what makes two failing Cases the same bug.

A run keeps fuzzing after a failure, so one implementation with several bugs shows every
one of them. Failures are grouped by a signature built from what a user would call the bug:

* the op and the verdict's kind;
* the check that caught it, without what varies from Case to Case (``bitwise:autograd``
  and ``bitwise:aten`` are one check);
* the trigger: for error parity the invalid class and the two exception types (or that
  the implementation raised on a valid Case, and what); for a bit difference its symptom
  (``oracles._bits.symptom``: a lost -0.0 and a wrong element look different);
* the dtype family (bool, integer, float, float8, complex) of a valid Case, and of an
  invalid one the implementation raised the wrong exception for: a kernel that breaks on
  complex breaks there, whatever else the Case draws.

Each signature gets one shrunk representative, one classification, one reproducer. Two bugs
of one op with the same symptom on the same dtype family share a signature; the shrunk
representative is the simplest Case of either.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

#: Dtype families, by dtype name prefix, in report order.
FAMILIES = ("bool", "integer", "float8", "float", "complex")


def dtype_family(dtype: str) -> str:
    """The family of a dtype name (``FAMILIES``)."""
    if dtype == "bool":
        return "bool"
    if dtype.startswith("float8"):
        return "float8"
    if dtype.startswith(("float", "bfloat")):
        return "float"
    if dtype.startswith("complex"):
        return "complex"
    return "integer"


def check_class(check: str) -> str:
    """A check name without its per-Case part: what follows ``bitwise`` (the reference
    that judged) is dropped, e.g. ``compile:grad:bitwise:eager-grad`` -> ``compile:grad:
    bitwise``."""
    parts = check.split(":")
    for i, part in enumerate(parts):
        if part.startswith("bitwise"):
            return ":".join([*parts[:i], "bitwise"])
    return check


@dataclass(frozen=True, order=True)
class Signature:
    """One bug, as the fields a user reads: ``op · kind · check · trigger · family``."""

    op: str
    kind: str
    check: str = ""
    trigger: str = ""
    family: str = ""

    def describe(self) -> str:
        """``diagonal_backward · mismatch · bitwise · signed-zero · float``."""
        return " · ".join(p for p in (self.op, self.kind, self.check, self.trigger,
                                      self.family) if p)

    def to_dict(self) -> dict[str, str]:
        """Plain JSON data."""
        return asdict(self)

    @staticmethod
    def from_dict(data: dict[str, Any]) -> Signature:
        """The inverse of ``to_dict``."""
        return Signature(**{k: str(data.get(k, "")) for k in
                            ("op", "kind", "check", "trigger", "family")})


def _type(details: dict[str, Any], which: str) -> str:
    entry = details.get(which)
    return str(entry.get("type", "")) if isinstance(entry, dict) else ""


def _parity_trigger(case: dict[str, Any], details: dict[str, Any]) -> str:
    actual, expected = _type(details, "actual"), _type(details, "expected")
    invalid = case.get("invalid", "")
    if not invalid:
        return f"raised {actual}" if actual else "error parity"
    if actual and expected:
        return f"{invalid}: raised {actual}, aten {expected}"
    if expected:
        return f"{invalid}: returned a result, aten raises {expected}"
    return f"{invalid}: raised {actual}, aten returns" if actual else invalid


def signature_from(kind: str, check: str, case: dict[str, Any] | None,
                   details: dict[str, Any] | None) -> Signature:
    """The signature of a failure given as plain data (a Verdict's JSON fields)."""
    case = case or {}
    details = details or {}
    op = str(case.get("op", ""))
    family = dtype_family(str(case["dtype"])) if case.get("dtype") else ""
    trigger = ""
    if kind == "error-parity":
        trigger = _parity_trigger(case, details)
        if case.get("invalid") and not _type(details, "actual"):
            family = ""  # returned a result where aten raises: not a dtype's doing
    elif kind in ("mismatch", "unwritten") and isinstance(details.get("symptom"), str):
        trigger = details["symptom"]
    elif kind == "harness-error":
        trigger = str(details.get("type", ""))
    return Signature(op, kind, check_class(check), trigger, family)


def explained_by(signature: Signature, others: set[Signature]) -> Signature | None:
    """The valid-Case signature that explains an invalid Case's wrong exception, if any.

    An implementation that raises KeyError for every complex Case raises it for invalid
    complex Cases too, before its argument checks run: that is one bug (the valid Cases'
    ``raised KeyError · complex``), not one per invalid class.
    """
    if signature.kind != "error-parity" or ": raised " not in signature.trigger:
        return None
    raised = signature.trigger.split(": raised ", 1)[1].split(",", 1)[0]
    valid = Signature(signature.op, signature.kind, signature.check, f"raised {raised}",
                      signature.family)
    return valid if valid in others else None


def signature_of(verdict: Any) -> Signature:
    """The signature of a failing ``diagfuzz.core.verdict.Verdict``."""
    case = verdict.case.to_dict() if verdict.case is not None else None
    return signature_from(verdict.kind, verdict.check, case, verdict.details)
