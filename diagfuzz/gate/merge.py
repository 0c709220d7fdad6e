"""``diagfuzz merge``: the partitions' reports of one campaign as one report and one verdict.

Each partition of a campaign (``--diagfuzz-partition=i/N``) writes its own JSON report. The
merge checks that they are one campaign, adds them up as one run would have, and decides
the verdict with a single run's exit codes:

* **Checks.** Every report has the same run seed, impl, profile, narrowing and run shape
  (shards, Cases per shard, family size, size cap: otherwise the partitions would not split
  one set of shard items), and the same N. Partitions are disjoint (a partition given twice
  is named) and complete (a missing one is named; an error unless ``--allow-partial``). A
  partition whose pytest ended with anything but 0, 1 or 6 did not finish its part.
* **Sums.** Case counts and coverage (``report.Tally``) add up; findings merge by signature
  (``findings.merge_findings``: counts add up, the simplest representative stays), from
  the shards' own findings that each partition's report keeps (``shard_findings``), so
  the merge picks what the whole run would have picked; shrink
  checks add up; the run is cut if any partition was. Pace stays per worker, each worker
  named ``p<i>/<worker>``; the duration is the longest partition's (they run side by side).
* **Verdict.** 3 when the reports are not one whole campaign (or a partition did not
  finish); else 1 with any finding (the suite does not classify: a finding is a failure,
  as in a single run); 6 when cut with nothing found; 0 clean.

The merged report is a suite report (``"diagfuzz_report": 2``) with ``"partition": null``
and ``"merged"``: the sources, each partition's own summary, what is missing, the errors.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from diagfuzz.campaign.report import summary_lines
from diagfuzz.core.exits import ExitCode

if TYPE_CHECKING:
    from diagfuzz.harness.report import Tally

EXIT_CLEAN, EXIT_FAILURE, EXIT_ERROR, EXIT_USAGE, EXIT_CUT = (
    ExitCode.CLEAN, ExitCode.FAILURE, ExitCode.ERROR, ExitCode.USAGE, ExitCode.CUT)
#: Fields every partition of one campaign must agree on: what draws the Cases, and the
#: shape that decides which shard items exist.
SAME = ("seed", "impl", "profile", "ops", "streams", "dtypes", "ranks", "layouts", "strict",
        "skipped", "shards", "cases_per_shard", "max_members", "max_elements", "partitions")
#: pytest exit statuses of a partition that ran its part (6: cut by its time cap).
FINISHED = (0, 1, 6)


class MergeUsageError(Exception):
    """An input that is no report, or reports of two kinds (exit 4)."""


@dataclass
class Part:
    """One partition's report."""

    path: Path
    data: dict[str, Any]

    @property
    def index(self) -> int:
        return int(self.data.get("partition") or 1)

    @property
    def count(self) -> int:
        return int(self.data.get("partitions") or 1)

    @property
    def label(self) -> str:
        return f"{self.index}/{self.count}"


@dataclass
class Merged:
    """The merge's outcome: the merged report, its verdict and what it checked."""

    data: dict[str, Any]
    code: int
    errors: list[str] = field(default_factory=list)
    missing: list[int] = field(default_factory=list)
    findings: list[Any] = field(default_factory=list)


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object from ``path``, or a usage error that names the file."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise MergeUsageError(f"{path}: cannot read it ({exc.strerror or exc})") from exc
    except ValueError as exc:
        raise MergeUsageError(f"{path}: not JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise MergeUsageError(f"{path}: not a diagfuzz report (a JSON object)")
    return data


def kind_of(data: dict[str, Any]) -> str:
    """``suite`` (a fuzz run's --diagfuzz-report), ``gate`` (diagfuzz gate --report) or ''."""
    if "diagfuzz_report" in data:
        return "suite"
    if "exit_code" in data and "stages" in data:
        return "gate"
    return ""


def _differences(parts: Sequence[Part]) -> list[str]:
    from diagfuzz.harness.report import REPORT_VERSION

    errors = []
    for name in SAME:
        values = {json.dumps(p.data.get(name), sort_keys=True) for p in parts}
        if len(values) > 1:
            seen = ", ".join(f"{p.path.name}: {json.dumps(p.data.get(name))}" for p in parts)
            errors.append(f"not one campaign: the reports differ in {name} ({seen})")
    versions = {p.data.get("diagfuzz_report") for p in parts}
    if versions != {REPORT_VERSION}:
        errors.append(f"report format {', '.join(sorted(map(str, versions)))}: this "
                      f"diagfuzz merges format {REPORT_VERSION}")
    return errors


def check(parts: Sequence[Part]) -> tuple[list[str], list[int]]:
    """(errors, missing partition numbers) of the reports as one campaign."""
    errors = _differences(parts)
    count = max(p.count for p in parts)
    by_index: dict[int, list[Part]] = {}
    for part in parts:
        by_index.setdefault(part.index, []).append(part)
    for index, given in sorted(by_index.items()):
        if len(given) > 1:
            errors.append(f"partition {index}/{count} given {len(given)} times: "
                          + ", ".join(str(p.path) for p in given))
    missing = [i for i in range(1, count + 1) if i not in by_index]
    for part in parts:
        status = part.data.get("exit_status")
        stopped = part.data.get("stopped")
        if status not in FINISHED or (stopped and not str(stopped).endswith("max-seconds")):
            why = f"stopped by {stopped}" if stopped else f"pytest exited {status}"
            errors.append(f"partition {part.label} ({part.path}) did not finish: {why}")
    return errors, missing


def merge_parts(parts: Sequence[Part], allow_partial: bool = False) -> Merged:
    """The merged report and verdict of ``parts`` (see the module docstring)."""
    from diagfuzz.harness.findings import Finding, merge_findings
    from diagfuzz.harness.report import Pace, Tally, report_data

    parts = sorted(parts, key=lambda p: (p.index, str(p.path)))
    errors, missing = check(parts)
    count = max(p.count for p in parts)
    if missing and not allow_partial:
        errors.append(f"partition(s) {', '.join(f'{i}/{count}' for i in missing)} missing "
                      "(--allow-partial merges the others)")
    tally = Tally()
    pace = Pace()
    found: list[Finding] = []
    # The shards' own findings where every partition kept them: merged at once, they give
    # the whole run's findings exactly (representatives, joined dtype families).
    raw = all("shard_findings" in p.data for p in parts)
    for part in parts:
        tally.merge(_hosts_gpus(Tally.from_dict(part.data.get("counts", {})), part.index))
        found += [Finding.from_dict(f) for f in
                  part.data.get("shard_findings" if raw else "findings", [])]
        pace.add_report(part.data.get("pace") or {}, f"p{part.index}/")
    findings = merge_findings(found)
    for finding in findings:
        finding.reproducer = None  # the partitions' paths are on their own machines
    cut = any(p.data.get("cut") for p in parts)
    failed = bool(findings) or any(p.data.get("exit_status") == 1 for p in parts)
    code = (EXIT_ERROR if errors else EXIT_FAILURE if failed else EXIT_CUT if cut
            else EXIT_CLEAN)
    duration = max(float(p.data.get("duration_s", 0.0)) for p in parts)
    header = {k: v for k, v in parts[0].data.items() if k not in _COMPUTED}
    pace_data = pace.to_dict(duration)
    pace_data["outside_shards_s"] = max(
        float((p.data.get("pace") or {}).get("outside_shards_s", 0.0)) for p in parts)
    header.update({
        "partition": None,
        "partitions": count,
        "workers": sum(int(p.data.get("workers", 0)) for p in parts),
        "run_dir": None,
        "exit_status": code,
        "duration_s": round(duration, 3),
        "cut": cut,
        "shrink_checks": sum(int(p.data.get("shrink_checks", 0)) for p in parts),
        "pace": pace_data,
        "database": _databases(parts),
    })
    data = report_data(header, tally, findings)
    data["merged"] = {
        "sources": [str(p.path) for p in parts],
        "partitions": [{"partition": p.index, "path": str(p.path),
                        "exit_status": p.data.get("exit_status"),
                        "cases": p.data.get("cases"), "findings": len(p.data.get("findings",
                                                                               [])),
                        "cut": p.data.get("cut"), "duration_s": p.data.get("duration_s"),
                        "workers": p.data.get("workers"), "run_dir": p.data.get("run_dir"),
                        "isolation": p.data.get("isolation"),
                        "pace": p.data.get("pace")} for p in parts],
        "missing": missing,
        "partial": bool(missing),
        "errors": errors,
    }
    return Merged(data, code, errors, missing, findings)


#: Header fields the merge computes rather than copies from the first partition.
_COMPUTED = ("diagfuzz_report", "cases", "failing_cases", "unsupported_cases", "counts",
             "coverage", "findings", "shard_findings")


def _databases(parts: Sequence[Part]) -> dict[str, Any] | None:
    """The partitions' shared-database stories as one (None when none had one)."""
    used = [p for p in parts if p.data.get("database")]
    if not used:
        return None
    fallbacks = [{"partition": p.index, **f} for p in used
                 for f in p.data["database"].get("fallbacks", [])]
    return {"url": ", ".join(dict.fromkeys(str(p.data["database"].get("url")) for p in used)),
            "known_replayed": sum(int(p.data["database"].get("known_replayed", 0))
                                  for p in used),
            "known_failing": sum(int(p.data["database"].get("known_failing", 0)) for p in used),
            "fell_back": bool(fallbacks), "fallbacks": fallbacks}


def write_reproducers(merged: Merged, directory: Path, device: str | None) -> str:
    """A reproducer per finding with a Case in ``directory`` (this merge's alone, old
    ``repro_*.py`` removed); '' or why not."""
    from diagfuzz.harness import reproducers as repro
    from diagfuzz.harness.history_check import sequence_arguments

    if not merged.findings:
        return ""
    data = merged.data
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for old in directory.glob("repro_*.py"):
            old.unlink()
        for finding, entry in zip(merged.findings, data["findings"], strict=True):
            verdict = finding.as_verdict()
            if verdict is None or verdict.case is None:
                continue
            finding.reproducer = entry["reproducer"] = str(repro.write_reproducer(
                verdict.case, directory, impl=data["impl"],
                device=device or repro._default_device(),
                timeout=data.get("timeout") or 30.0, verdict=verdict,
                impl_path=tuple(data.get("impl_path") or ()),
                strict=bool(data.get("strict")), **sequence_arguments(finding)))
    except OSError as exc:
        return f"could not write reproducers in {directory}: {exc}"
    return ""


def _hosts_gpus(tally: Tally, index: int) -> Tally:
    """The partition's GPU classes named as its host's (``0`` of partition 2: ``p2/0``), so
    two machines' GPU 0 stay apart in the merged coverage table."""
    for axes in tally.classes.values():
        if "gpu" in axes:
            axes["gpu"] = Counter({f"p{index}/{gpu}": n for gpu, n in axes["gpu"].items()})
    return tally


def summary(merged: Merged, written: Path | None, width: int = 88) -> list[str]:
    """The terminal summary, as a single run prints it, and the merge's own lines."""
    from diagfuzz.harness.findings import block
    from diagfuzz.harness.report import Pace, Tally, format_table

    data = merged.data
    tally = Tally.from_dict(data["counts"])
    n = len(merged.findings)
    title = (f" diagfuzz: {n} finding{'' if n == 1 else 's'} ({tally.failing} failing Cases "
             f"of {tally.total}; seed {data.get('seed')}, impl {data.get('impl')}) ")
    side = max(3, (width - len(title)) // 2)
    lines = ["=" * side + title + "=" * side]
    for i, finding in enumerate(merged.findings, 1):
        command = f"python {finding.reproducer}" if finding.reproducer else None
        lines += [*block(finding, i, n, command), ""]
    lines += format_table(tally)
    pace = Pace()
    pace.add_report(data["pace"])
    lines.append(pace.summary(float(data["duration_s"])))
    cut = [p["partition"] for p in data["merged"]["partitions"] if p.get("cut")]
    if cut:
        lines.append(f"cut: --diagfuzz-max-seconds ended partition(s) "
                     f"{', '.join(map(str, cut))} before their budget (exit {EXIT_CUT} when "
                     "nothing failed)")
    given = [p["partition"] for p in data["merged"]["partitions"]]
    lines.append(f"merged: partition(s) {', '.join(map(str, given))} of "
                 f"{data['partitions']}" + (f"; missing {', '.join(map(str, merged.missing))}"
                                            if merged.missing else ""))
    lines += summary_lines(None, None, data.get("database"))
    lines += [f"merge error: {e}" for e in merged.errors]
    lines.append(f"rerun: --diagfuzz-seed {data.get('seed')} (every partition)")
    if written is not None:
        lines.append(f"report: {written}")
    lines.append(f"verdict: exit {merged.code} ({_MEANING[ExitCode(merged.code)]})")
    return lines


_MEANING = {EXIT_CLEAN: "clean", EXIT_FAILURE: "findings", EXIT_ERROR: "could not merge "
            "one whole campaign", EXIT_CUT: "cut by the time cap, nothing found"}
