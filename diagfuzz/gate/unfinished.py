"""The stopped fuzz suite's unfinished part: Cases and findings of shards that never
reported, from the workers' progress files.

The suite's pytest writes its report when the stop reaches it, while its workers go on
judging until the gate kills them; the report's tally holds the finished shards alone. The
workers' ``progress.json`` files (``diagfuzz.harness.progress``) hold every Case each
judged and each signature's first failing verdict, so the stage counts those Cases and
keeps those findings, and its note says how many Cases came from which part.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from diagfuzz.core.signature import Signature
from diagfuzz.harness.progress import read_all


def progress_counts(root: Path) -> dict[str, Any]:
    """The workers' counts summed over every suite run directory under ``root``."""
    total: dict[str, Any] = {"cases": 0, "findings": []}
    for run_dir in sorted(root.glob("run-*")):
        counts = read_all(run_dir)
        total["cases"] += int(counts["cases"])
        total["findings"] += list(counts["findings"])
    return total


def unfinished_findings(known: set[Signature], found: list[dict[str, Any]]
                        ) -> list[dict[str, Any]]:
    """The progress files' findings (first failing verdicts) whose signature the report
    lacks, one per signature."""
    extra: dict[Signature, dict[str, Any]] = {}
    for data in found:
        signature = Signature.from_dict(dict(data.get("signature") or {}))
        if signature not in known and signature not in extra:
            extra[signature] = data
    return list(extra.values())


def unfinished_note(finished: int, seen: int) -> str:
    """What the stopped stage's count holds, part by part."""
    unfinished = max(0, seen - finished)
    return (f"stopped: {finished:,} Cases of shards that finished, {unfinished:,} of shards "
            "that did not (counted from the workers' progress files; their findings are "
            "their first failing Case, not shrunk)")
