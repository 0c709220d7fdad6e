"""The regression corpus: failing Cases as reviewable JSON files, replayed before any fuzzing.

The gate saves one file per cause (finding): its shrunk Case, named ``<op>-<hash>.json``
from a hash of the finding's signature (``save_finding``), and never a second file for a
cause the corpus already holds. Files saved by hand (``save``) are named from a hash of the
Case's JSON. Each file holds the Case and, under ``found``, what it once did (kind, check,
message, signature, impl, reproducibility) — history for the reviewer; only ``case`` is
replayed.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from diagfuzz.core.signature import Signature

if TYPE_CHECKING:  # torch-heavy: ``diagfuzz gate`` parses its options without torch
    from diagfuzz.core.case import Case
    from diagfuzz.core.verdict import Verdict

#: The corpus in the repository, relative to its root.
DEFAULT_DIR = "corpus"


def case_id(case: Case) -> str:
    """A stable 16-hex-digit name for ``case`` (sha256 of its canonical JSON)."""
    return hashlib.sha256(case.canonical_json().encode()).hexdigest()[:16]


def file_name(case: Case) -> str:
    """``<op>-<case_id>.json``."""
    return f"{case.op}-{case_id(case)}.json"


def pretty_case(case: Case, indent: str = "") -> str:
    """The Case's JSON with one field per line: short, and diffs line by line in review."""
    fields = json.loads(case.to_json())
    lines = [f'{indent}  "{k}": {json.dumps(v, sort_keys=True)}' for k, v in fields.items()]
    return "{\n" + ",\n".join(lines) + f"\n{indent}}}"


@dataclass(frozen=True)
class Entry:
    """One corpus file: its path, its Case, and the ``found`` notes (may be empty)."""

    path: Path
    case: Case
    found: dict[str, Any] = field(default_factory=dict)


def signature_id(signature: Signature) -> str:
    """A stable 16-hex-digit name for a cause (sha256 of its signature's JSON)."""
    text = json.dumps(signature.to_dict(), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def save_finding(case: Case, signature: Signature,
                 directory: str | os.PathLike[str] = DEFAULT_DIR, *,
                 verdict: Verdict | None = None, impl: str = "",
                 reproducibility: str = "",
                 existing: list[Entry] | None = None,
                 impl_path: Sequence[str] = (),
                 sequence: Sequence[dict[str, Any]] = ()) -> Path | None:
    """Save a finding's Case as ``<op>-<signature id>.json``; None (nothing written) when
    the corpus holds that cause already, under any name, or that very Case. ``existing``:
    the corpus's entries, read once by a caller saving several findings. ``impl_path``:
    the directories the impl was imported from (``repro`` and ``replay`` find it there
    from any directory). ``sequence``: the calls a fresh process makes before the Case for
    it to fail (``diagfuzz.execution.history.sequence_dicts``), replayed before it."""
    root = Path(directory)
    if existing is None:
        existing = entries(root)
    for entry in existing:
        if entry.found.get("signature") == signature.to_dict() or entry.case == case:
            return None
    path = root / f"{case.op}-{signature_id(signature)}.json"
    return _write(path, case, verdict, impl, reproducibility, "", signature, impl_path,
                  sequence)


def sequence_of(entry: Entry) -> list[dict[str, Any]]:
    """The calls an entry's Case needs before it to fail ([] for one that fails alone)."""
    calls = entry.found.get("sequence")
    return list(calls) if isinstance(calls, list) else []


def save(case: Case, directory: str | os.PathLike[str] = DEFAULT_DIR, *,
         verdict: Verdict | None = None, impl: str = "", reproducibility: str = "",
         note: str = "") -> Path:
    """Write ``case`` to the corpus (once: an existing file, and its history, is kept)."""
    path = Path(directory) / file_name(case)
    if path.exists():
        return path
    return _write(path, case, verdict, impl, reproducibility, note, None)


def _write(path: Path, case: Case, verdict: Verdict | None, impl: str, reproducibility: str,
           note: str, signature: Signature | None, impl_path: Sequence[str] = (),
           sequence: Sequence[dict[str, Any]] = ()) -> Path:
    found: dict[str, Any] = {}
    if signature is not None:
        found["signature"] = signature.to_dict()
    if verdict is not None:
        found.update(kind=verdict.kind, check=verdict.check, message=verdict.message)
    if impl:
        found["impl"] = impl
    if impl_path:
        found["impl_path"] = [str(Path(p).resolve()) for p in impl_path]
    if reproducibility:
        found["reproducibility"] = reproducibility
    if note:
        found["note"] = note
    if sequence:
        found["sequence"] = list(sequence)
    text = (f'{{\n  "case": {pretty_case(case, "  ")},\n'
            f'  "found": {json.dumps(found, sort_keys=True)}\n}}\n')
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return path


def read_entry(path: str | os.PathLike[str]) -> Entry:
    """One corpus file (a ``{"case": ..., "found": ...}`` record or a bare Case JSON)."""
    from diagfuzz.core.case import Case

    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if "case" in data:
            return Entry(path, Case.from_json(data["case"]), dict(data.get("found", {})))
        return Entry(path, Case.from_json(data))
    except (ValueError, TypeError) as exc:
        raise ValueError(f"corpus file {path}: not a diagfuzz Case: {exc}") from exc


def recorded_impl_path(entry: Entry) -> list[str]:
    """The directories an entry's impl was imported from that exist here, absolute."""
    paths = entry.found.get("impl_path") or []
    return [str(p) for p in paths if isinstance(p, str) and Path(p).is_dir()]


def entries(directory: str | os.PathLike[str] = DEFAULT_DIR) -> list[Entry]:
    """Every entry of the corpus, in file-name order (deterministic); [] if it is absent."""
    root = Path(directory)
    if not root.exists():
        return []
    if not root.is_dir():
        raise ValueError(f"corpus {root} is not a directory")
    return [read_entry(p) for p in sorted(root.glob("*.json"))]


def load(directory: str | os.PathLike[str] = DEFAULT_DIR) -> list[Case]:
    """The corpus's Cases, in file-name order: what every run replays first."""
    return [entry.case for entry in entries(directory)]
