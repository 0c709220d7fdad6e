"""Verdict: the outcome of one Case, as a value that crosses process boundaries.

Oracles return Verdicts; tests turn them into assertions only at the edge; the executor,
journal, reports and reproducers carry them as JSON.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, is_dataclass
from typing import Any

from diagfuzz.core.case import Case

#: Every kind a Verdict can have. "pass" is the good one; "unsupported" (a Case outside what
#: the implementation declares) is not judged, and not a failure either.
KINDS = ("pass", "unsupported", "mismatch", "unwritten", "alias", "error-parity", "dispatch",
         "crash", "hang")
#: The kinds that are not failures.
NOT_FAILURES = ("pass", "unsupported")


@dataclass(frozen=True)
class Verdict:
    """pass, or a failure ``kind`` found by ``check``, with a human ``message``.

    ``details`` is JSON-serialisable evidence (element counts, first differing indices with
    expected/actual values and hex bits).
    """

    kind: str
    check: str = ""
    message: str = ""
    case: Case | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"Verdict.kind must be one of {KINDS}, got {self.kind!r}")

    @property
    def ok(self) -> bool:
        """True unless the Verdict is a failure: a pass, or an unsupported Case."""
        return self.kind in NOT_FAILURES

    @property
    def unsupported(self) -> bool:
        """The Case lies outside what the implementation declares: counted, not judged."""
        return self.kind == "unsupported"

    @staticmethod
    def passed(case: Case | None = None) -> Verdict:
        """The passing verdict."""
        return Verdict("pass", case=case)

    def to_dict(self, with_case: bool = True) -> dict[str, Any]:
        """The Verdict as plain values (``dataclasses.asdict``'s result, without its deep
        copy of the Case); ``with_case=False`` leaves ``case`` None."""
        return {"kind": self.kind, "check": self.check, "message": self.message,
                "case": self.case.to_dict() if with_case and self.case else None,
                "details": _plain(self.details)}

    def to_json(self) -> str:
        """One line of JSON; ``from_json`` gives back an equal Verdict."""
        return json.dumps(self.to_dict(), sort_keys=True, default=repr)

    def to_json_without_case(self) -> str:
        """``to_json`` with ``case`` None: for a receiver that holds the Case already (the
        executor's reply to the runner that sent it; ``from_json(text, case=...)``)."""
        return json.dumps(self.to_dict(with_case=False), sort_keys=True, default=repr)

    @staticmethod
    def from_json(text: str | dict, case: Case | None = None) -> Verdict:
        """Rebuild a Verdict from ``to_json``'s output (or its parsed dict); ``case``, if
        given, is the Verdict's Case instead of the one in the text (which is not parsed)."""
        data = json.loads(text) if isinstance(text, str) else dict(text)
        stored = data.pop("case", None)
        if case is None and stored:
            case = Case.from_json(stored)
        return Verdict(**data, case=case)

    def __str__(self) -> str:
        where = f" [{self.check}]" if self.check else ""
        case = f"\n  case: {self.case.describe()}" if self.case else ""
        return f"{self.kind}{where}: {self.message}{case}"


def _plain(value: Any) -> Any:
    """``value`` as JSON values, with any dataclass instance in it as its dict, as ``asdict``
    converts them (evidence is JSON values already; this keeps the rare exception to the
    same output, and the journal's copy to the same bytes as ``to_json``)."""
    if isinstance(value, dict):  # keys as JSON has them (strings), sorted as text
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):  # a list in JSON either way (a namedtuple too)
        return [_plain(v) for v in value]
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    return value
