"""A crash shrinks like a mismatch: dtype, layout and specials down to what the crash
needs (tests.faulty.abort aborts on offset == 1, whatever else the Case holds)."""

from __future__ import annotations

from pathlib import Path

from diagfuzz.core.case import Case
from tests.test_suite_run import fuzz


def test_crash_shrinks_like_a_mismatch(tmp_path: Path) -> None:
    code, out, report = fuzz(tmp_path, "-n", "0", "--impl", "tests.faulty.abort:impl",
                             "--diagfuzz-seed", "3", "--diagfuzz-budget", "200",
                             "--diagfuzz-ops=diagonal", "-k", "test_diagonal and not backward",
                             "--hypothesis-profile", "ci")
    assert code == 1, out
    (finding,) = report["findings"]
    assert finding["kind"] == "crash" and finding["shrunk"], finding
    case = Case.from_json(finding["case"])
    assert case.offset == 1
    assert case.layout.kinds == ("contiguous",) and case.layout.storage_offset == 0, case
    assert not case.values.specials and case.dtype == "float32", case
    assert len(case.sizes) == 2 and max(case.sizes) <= 2, case
