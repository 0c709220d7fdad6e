"""The failure signature: what makes two failing Cases one cause, one thing to fix.

A run keeps fuzzing after a failure, so one implementation with several bugs shows every
one of them. Failures are grouped by their origin, as a maintainer counts what to fix:

* an exception the implementation raised (on a valid Case, or the wrong type on an invalid
  one): the exception's type and its raise site, the innermost frame of the
  implementation's own code (``diagfuzz.core.origin``). One ``assert`` is one finding
  whatever op, dtype, invalid class or stage reaches it (a library's ``zeros`` that
  ``diag_embed`` and ``diagonal_backward`` both call is one fix), and whatever aten raises
  there; without a frame of the implementation's own, the op too;
* a result where aten raises: the op and the check (the invalid classes it covers are
  listed inside the finding);
* a wrong result: the op, the check (without what varies from Case to Case:
  ``bitwise:autograd`` and ``bitwise:aten`` are one check) and the kind of defect, what a
  fix changes (``defect``): wrong values, wrong metadata (strides, dtype ...: the check
  names the field), unwritten elements, aliasing. Not its symptom (``diagfuzz.core.bits.
  symptom``: a lost -0.0, a NaN payload, zeroed or other wrong values): which symptom a
  Case shows depends on the values drawn, not on the bug (one wrong element read shows all
  four), so keyed on it one fix would be several findings. Two value bugs of one op and
  check are one finding until the first is fixed: the symptoms are counted inside it,
  each with its own shrunk Case (``symptom_of``), so the second bug still shows there;
* a gradient that never reaches the input, where the verdict names the aten registration
  that dropped it (``details["dropped_by"]``: a backend kernel for a
  CompositeImplicitAutograd op, ``diagfuzz.oracles.decomposition``): that registration, its
  dispatch key and its registering file:line, whichever op reached it (``diag`` and
  ``diag_1d`` both reach ``aten::diag``) and whichever stage met it (the registration
  audit, torch.compile parity): a maintainer fixes the registration once. The ops are
  counted inside the finding;
* a crash, a hang, an alias, a dispatch failure: the op, the kind and the check.

Dtypes, invalid classes, symptoms, stages and aten's exception types are not part of the
key: each finding counts them (``cause_axes``). Each signature gets one shrunk
representative (one per symptom for a wrong result), one classification, one reproducer.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


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
    """One cause, as the fields a user reads: ``op · kind · check · trigger · origin``."""

    op: str
    kind: str
    check: str = ""
    trigger: str = ""
    origin: str = ""

    def describe(self) -> str:
        """``diag_embed · error-parity · raised AssertionError · at lib/x.py:12 in f``."""
        origin = f"at {self.origin}" if self.origin else ""
        check = "" if self.check == self.kind else self.check  # error-parity twice says less
        return " · ".join(p for p in (self.op, self.kind, check, self.trigger, origin) if p)

    def to_dict(self) -> dict[str, str]:
        """Plain JSON data."""
        return asdict(self)

    @staticmethod
    def from_dict(data: dict[str, Any]) -> Signature:
        """The inverse of ``to_dict``."""
        return Signature(**{k: str(data.get(k, "")) for k in
                            ("op", "kind", "check", "trigger", "origin")})


def _raised(details: dict[str, Any], which: str) -> dict[str, Any]:
    entry = details.get(which)
    return entry if isinstance(entry, dict) else {}


#: The defect of a gradient that never reaches the input.
DROPPED_GRADIENT = "dropped gradient"
#: The checks whose failure is a gradient that never reached the input: the registration
#: audit's, and torch.compile parity's compiled gradient that is None (``compile:grad``
#: alone; a compiled gradient of wrong bits is ``compile:grad:bitwise...``).
GRADIENT_DROPS = ("registration:gradient", "compile:grad")
#: The check of a finding keyed on the registration that dropped a gradient, whichever
#: stage's check met it.
REGISTRATION_GRADIENT = "registration:gradient"


def dropping_registration(kind: str, check: str, details: dict[str, Any] | None
                          ) -> dict[str, str]:
    """The aten registration a dropped gradient is blamed on (``details["dropped_by"]``:
    ``op``, ``key``, ``where``), or {} for any other failure, and for a drop no
    registration explains (it keeps its op: conservative)."""
    if kind != "mismatch" or check not in GRADIENT_DROPS:
        return {}
    by = (details or {}).get("dropped_by")
    return by if isinstance(by, dict) and by.get("op") else {}


def keyed_on_registration(signature: Signature) -> bool:
    """Whether ``signature`` is a dropped gradient keyed on its aten registration (its
    ``op`` an ``aten::`` name): one cause for every stage, so no stage's oracle goes into
    its check (``diagfuzz.gate.stages.Finding``)."""
    return signature.trigger == DROPPED_GRADIENT and signature.op.startswith("aten::")


def signature_from(kind: str, check: str, case: dict[str, Any] | None,
                   details: dict[str, Any] | None) -> Signature:
    """The signature of a failure given as plain data (a Verdict's JSON fields)."""
    case = case or {}
    details = details or {}
    by = dropping_registration(kind, check, details)
    if by:  # the registration, not the op or the stage: one fix
        registration = "@".join(str(by[k]) for k in ("op", "key") if by.get(k))
        return Signature(registration, kind, REGISTRATION_GRADIENT, DROPPED_GRADIENT,
                         str(by.get("where", "")))
    op = str(case.get("op", ""))
    trigger = origin = ""
    if kind == "error-parity":
        actual = _raised(details, "actual")
        if actual:
            trigger = f"raised {actual.get('type', '')}"
            origin = str(actual.get("origin", ""))
            if _own_site(origin):
                op = ""  # one raise site is one fix, whichever op reached it
        elif _raised(details, "expected"):
            trigger = "returned a result where aten raises"
    elif kind == "mismatch":  # unwritten and alias: the kind names the defect
        trigger = defect(kind, check)
    elif kind == "crash" and check == "compile":
        trigger = f"raised {details.get('type', '')}"
        origin = str(details.get("origin", ""))
    elif kind == "harness-error":
        trigger = str(details.get("type", ""))
    return Signature(op, kind, check_class(check), trigger, origin)


def _own_site(origin: str) -> bool:
    """Whether ``origin`` is a raise site in the implementation's own code (not torch's
    innermost frame, which many causes share)."""
    return bool(origin) and not origin.endswith("(no impl frame)")


def defect(kind: str, check: str) -> str:
    """The kind of defect a wrong result is, what a fix changes: ``wrong values``,
    ``wrong metadata`` (a layout or type field: the check names it), ``unwritten
    elements``, ``aliasing``, ``dropped gradient`` (the registration audit's)."""
    if kind == "unwritten":
        return "unwritten elements"
    if kind == "alias":
        return "aliasing"
    if check.startswith(REGISTRATION_GRADIENT):
        return DROPPED_GRADIENT
    return "wrong values" if "bitwise" in check else "wrong metadata"


def symptom_of(kind: str, details: dict[str, Any] | None) -> str:
    """What a wrong result's differing elements looked like (``signed-zero``,
    ``nan-payload``, ``zeroed``, ``values``); '' for other failures."""
    value = (details or {}).get("symptom")
    return value if kind in ("mismatch", "unwritten") and isinstance(value, str) else ""


def shrink_key(verdict: Any) -> Signature:
    """What one shrink targets: the signature with the symptom in its trigger, so each
    symptom of a finding gets a shrunk Case of its own."""
    signature = signature_of(verdict)
    sym = symptom_of(verdict.kind, verdict.details)
    if not sym:
        return signature
    return Signature(signature.op, signature.kind, signature.check,
                     f"{signature.trigger} ({sym})", signature.origin)


def cause_axes(case: dict[str, Any] | None, details: dict[str, Any] | None
               ) -> dict[str, str]:
    """What a finding counts inside it, beside dtypes: the Case's invalid class (``valid``
    for a valid Case), where aten raised, aten's exception type, a wrong result's
    symptom, and for a raise site or a registration that dropped a gradient (both keyed
    without the op) the op that reached it."""
    case = case or {}
    details = details or {}
    axes = {"invalid class": str(case.get("invalid") or "valid")}
    actual = _raised(details, "actual")
    dropped = isinstance(details.get("dropped_by"), dict)
    if dropped or (actual and _own_site(str(actual.get("origin", "")))):
        axes["op"] = str(case.get("op", ""))
    if isinstance(details.get("symptom"), str):
        axes["symptom"] = details["symptom"]
    expected = _raised(details, "expected")
    if expected.get("type"):
        axes["aten raises"] = str(expected["type"])
    return axes


def signature_of(verdict: Any) -> Signature:
    """The signature of a failing ``diagfuzz.core.verdict.Verdict``."""
    case = verdict.case.to_dict() if verdict.case is not None else None
    return signature_from(verdict.kind, verdict.check, case, verdict.details)
