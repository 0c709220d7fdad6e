"""JUnit XML of a merged campaign: the partitions' own files joined, or one made from the
merged report.

pytest's ``--junitxml`` file of each partition names its shard items, which are disjoint
between partitions; joined, they are the whole run's items. Each partition's testsuite keeps
its counts and gets its file's name, so CI shows where a failure ran; a testsuite "diagfuzz
merge" adds one testcase that errs when the merge found the reports not one whole campaign.
Without input files the merged report's findings become the testcases (one failure each).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from typing import Any

_COUNTS = ("tests", "failures", "errors", "skipped")


class JunitError(Exception):
    """An input file that is not JUnit XML (a usage error)."""


def read_suites(path: Path) -> list[ET.Element]:
    """The ``testsuite`` elements of one JUnit file."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as exc:
        raise JunitError(f"{path}: not JUnit XML ({exc})") from exc
    if root.tag == "testsuite":
        return [root]
    if root.tag == "testsuites":
        return list(root.iter("testsuite"))
    raise JunitError(f"{path}: not JUnit XML (root element <{root.tag}>)")


def duplicates(paths: Sequence[Path]) -> list[str]:
    """Testcases that more than one file holds: partitions that overlapped."""
    seen: dict[tuple[str, str], Path] = {}
    found = []
    for path in paths:
        for suite in read_suites(path):
            for case in suite.iter("testcase"):
                key = (case.get("classname", ""), case.get("name", ""))
                if key in seen and seen[key] != path:
                    found.append(f"testcase {'::'.join(key)} in {seen[key]} and {path}")
                seen.setdefault(key, path)
    return found


def merged_junit(paths: Sequence[Path], merged: Any) -> ET.ElementTree:
    """The partitions' files joined (or the merged findings), and the merge's testcase."""
    root = ET.Element("testsuites", name="diagfuzz campaign")
    for path in paths:
        for suite in read_suites(path):
            suite.set("name", f"{suite.get('name', 'pytest')} [{path.name}]")
            root.append(suite)
    if not paths:
        root.append(_findings_suite(merged))
    root.append(_merge_suite(merged.errors, merged))
    _total(root)
    return ET.ElementTree(root)


def _findings_suite(merged: Any) -> ET.Element:
    from diagfuzz.harness.findings import evidence_lines

    suite = ET.Element("testsuite", name="diagfuzz findings")
    for finding in merged.findings:
        case = ET.SubElement(suite, "testcase", classname="diagfuzz.suite",
                             name=finding.signature.describe())
        text = "\n".join([finding.message, *evidence_lines(finding.details)]
                         + ([f"repro: python {finding.reproducer}"] if finding.reproducer
                            else []))
        ET.SubElement(case, "failure", type=finding.kind,
                      message=f"{finding.kind}: {finding.message}"[:500]).text = text
    if not merged.findings:
        ET.SubElement(suite, "testcase", classname="diagfuzz.suite", name="no findings")
    _count(suite)
    return suite


def _merge_suite(errors: list[str], merged: Any) -> ET.Element:
    suite = ET.Element("testsuite", name="diagfuzz merge")
    case = ET.SubElement(suite, "testcase", classname="diagfuzz.merge", name="campaign")
    if errors:
        ET.SubElement(case, "error", message=errors[0][:500]).text = "\n".join(errors)
    given = [str(p["partition"]) for p in merged.data["merged"]["partitions"]]
    ET.SubElement(case, "system-out").text = (
        f"partitions {', '.join(given)} of {merged.data['partitions']}; verdict exit "
        f"{merged.code}")
    _count(suite)
    return suite


def _count(suite: ET.Element) -> None:
    cases = list(suite.iter("testcase"))
    suite.set("tests", str(len(cases)))
    for attr, tag in (("failures", "failure"), ("errors", "error"), ("skipped", "skipped")):
        suite.set(attr, str(sum(c.find(tag) is not None for c in cases)))


def _total(root: ET.Element) -> None:
    suites = list(root.iter("testsuite"))
    for attr in _COUNTS:
        root.set(attr, str(sum(int(s.get(attr, "0") or 0) for s in suites)))
    root.set("time", f"{sum(float(s.get('time', '0') or 0) for s in suites):.3f}")


def write(tree: ET.ElementTree, path: Path) -> None:
    """Write ``tree`` to ``path`` (its directory made)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tree.write(path, encoding="utf-8", xml_declaration=True)
