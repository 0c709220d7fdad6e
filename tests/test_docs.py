"""The documents a user reads state the present: no development diary, no dead links.

History (sessions, "before", "used to", issue numbers) belongs in commit messages. Measured
numbers carry their date, which is not history: only phrases that narrate development fail.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCUMENTS = sorted([REPO / "README.md", REPO / "BENCHMARKS.md", REPO / "CONTRIBUTING.md",
                    *(REPO / "docs").glob("*.md")])

#: Phrases that narrate development rather than describe the present.
HISTORY = re.compile(
    r"\b(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|\d+(?:st|nd|rd|th)"
    r"|this|last|next|previous) session\b"
    r"|\bsessions?\s+\d"
    r"|\bbefore \d{4}-\d\d-\d\d"
    r"|\bused to\b|\bno longer\b|\bpreviously\b|\bwas changed\b"
    r"|\bissues? #?\d+\b"
    r"|\.\./shared/",
    re.IGNORECASE)
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: str(p.relative_to(REPO)))
def test_documents_state_the_present(path: Path) -> None:
    found = [f"{path.name}:{n}: {m.group(0)!r} in {line.strip()[:100]}"
             for n, line in enumerate(path.read_text().splitlines(), 1)
             for m in HISTORY.finditer(line)]
    assert not found, "history belongs in commit messages:\n" + "\n".join(found)


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(path: Path) -> None:
    dead = [target for target in LINK.findall(path.read_text())
            if "://" not in target and not (path.parent / target).exists()]
    assert not dead, f"{path.name} links to missing files: {dead}"


def test_the_readme_fits_a_few_screens() -> None:
    assert len((REPO / "README.md").read_text().splitlines()) <= 150


def test_the_history_check_bites() -> None:
    for phrase in ("Families (8 before 2026-11-30's seventh session)", "as it used to",
                   "see issue 22", "See ../shared/DESIGN.md", "the eighth session"):
        assert HISTORY.search(phrase), phrase
    for phrase in ("measured 2026-12-01 on one H200", "a session of Hypothesis"):
        assert not HISTORY.search(phrase), phrase
