"""What a campaign adds to a run's report: the partition, and the shared database's story.

The controller's ``Reporter`` keeps a ``CampaignTally``: it adds up what workers put under
``"campaign"`` in their items' payloads (``diagfuzz.campaign.worker``), puts it in the JSON
report's header (``"database"``; ``"partition"`` and ``"partitions"`` come with the plan) and
adds lines to the terminal summary.
"""

from __future__ import annotations

from typing import Any

from diagfuzz.campaign.database import redact
from diagfuzz.campaign.partition import plan_items
from diagfuzz.core.streams import STREAMS


def plan_lines(plan: Any) -> list[str]:
    """The run header's lines about the campaign (none for a plain run)."""
    lines = []
    if plan.partitions:
        lines.append(f"diagfuzz: partition {plan.partition}/{plan.partitions} of the campaign "
                     f"of seed {plan.seed}: {len(plan_items(plan))} of "
                     f"{plan.shards * len(STREAMS)} shard items (`diagfuzz merge` joins the "
                     "partitions' reports)")
    if plan.database:
        lines.append(f"diagfuzz: shared example database {redact(plan.database)} (each "
                     "worker also keeps its own; known failures are replayed first)")
    return lines


class CampaignTally:
    """The controller's sum of what workers report about the campaign."""

    def __init__(self, plan: Any) -> None:
        self.plan = plan
        self.known_replayed = 0
        self.known_failing = 0
        self.fallbacks: list[dict[str, Any]] = []
        self.shard_findings: list[dict[str, Any]] = []

    def keep_shard_findings(self, findings: list[Any]) -> None:
        """A partition keeps its shards' findings as they came, before merging by signature:
        ``merge_findings`` picks representatives and joins dtype families depending on
        which findings it sees together, so ``diagfuzz merge`` merges the partitions' shard
        findings all at once, as the whole run merges its own."""
        if self.plan.partitions:
            self.shard_findings = [f.to_dict() for f in findings]

    def add(self, payload: dict[str, Any]) -> None:
        """One shard item's payload (its ``"campaign"`` part, if any)."""
        data = payload.get("campaign") or {}
        self.known_replayed += int(data.get("known_replayed", 0))
        self.known_failing += int(data.get("known_failing", 0))
        if data.get("fallback"):
            self.fallbacks.append(dict(data["fallback"]))

    def header(self) -> dict[str, Any]:
        """The report's ``database`` (None without a shared database): the server (without
        its password), known failures replayed, and each worker's fallback; a partition's
        ``shard_findings`` too."""
        extra: dict[str, Any] = (
            {"shard_findings": self.shard_findings} if self.plan.partitions else {})
        if not self.plan.database:
            return {**extra, "database": None}
        return {**extra, "database": {
            "url": redact(self.plan.database),
            "known_replayed": self.known_replayed,
            "known_failing": self.known_failing,
            "fell_back": bool(self.fallbacks),
            "fallbacks": sorted(self.fallbacks, key=lambda f: str(f.get("worker"))),
        }}

    def lines(self) -> list[str]:
        """The terminal summary's lines."""
        return summary_lines(self.plan.partition, self.plan.partitions,
                             self.header().get("database"))


def summary_lines(partition: int | None, partitions: int | None,
                  database: dict[str, Any] | None) -> list[str]:
    """Lines about a partition and a shared database (a run's summary, and a merge's)."""
    lines = []
    if partitions and partition:
        lines.append(f"partition: {partition}/{partitions} of a campaign; `diagfuzz merge` "
                     "joins every partition's --diagfuzz-report")
    if database:
        lines.append(f"database: {database['url']} shared; {database['known_replayed']} "
                     f"known failure(s) replayed first, {database['known_failing']} failing")
        for f in database.get("fallbacks", []):
            where = f"partition {f['partition']} " if f.get("partition") else ""
            lines.append(f"database: {where}{f['worker']} fell back to its local database "
                         f"{f['after_s']:g} s into the run ({f['op']}: {f['error']}); "
                         "every example it saved is there")
    return lines
