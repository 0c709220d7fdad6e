"""A worker's part of a campaign: its example database, known failures, its report.

One ``WorkerCampaign`` per worker process (``diagfuzz.harness.worker.ShardSession`` holds
it). What it learns (replays, a fallback of the shared database) goes to the controller in
each shard item's payload, under ``"campaign"``, as the item's counts and findings do.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from diagfuzz.campaign import replay


class WorkerCampaign:
    """The example database of one worker, and what it reports about it."""

    def __init__(self, plan: Any, worker_id: str, local_dir: Path) -> None:
        self.plan = plan
        self.worker_id = worker_id
        self.local_dir = local_dir
        self._database: Any = None
        self._replayed: set[tuple[str, bytes]] = set()
        self._pending: Counter[str] = Counter()
        self._fallback_reported = False

    @property
    def database(self) -> Any:
        """The worker's Hypothesis database: its directory database, or the shared one
        behind it (``diagfuzz.campaign.database``); made on first use."""
        if self._database is None:
            from diagfuzz.campaign.database import open_database

            self._database = open_database(self.plan.database, self.local_dir)
        return self._database

    def replay_known(self, shard: Any, run: Callable[..., None], shard_settings: Any,
                     explorer: Any) -> None:
        """Before ``shard`` explores: replay its stream's known failures (shared database
        only; each once per worker)."""
        if self.plan.database is None:
            return
        families, failing = replay.replay_known(shard, run, shard_settings, explorer,
                                                self._replayed)
        self._pending["known_replayed"] += families
        self._pending["known_failing"] += failing

    def remember(self, stream: str, database: Any, chosen: list[bytes]) -> None:
        """A shrunk failure (``chosen``: its family's choices, if recorded) becomes a known
        failure of ``stream`` (shared database only); this worker has seen it, so it does
        not replay it itself."""
        if self.plan.database is not None and database is not None and chosen:
            replay.remember(stream, self.plan, database, chosen[-1])
            self._replayed.add((stream, chosen[-1]))

    def payload(self) -> dict[str, Any]:
        """What the controller learns with this item: ``{"campaign": {...}}`` or ``{}``."""
        data: dict[str, Any] = {k: v for k, v in self._pending.items() if v}
        self._pending.clear()
        failure = getattr(self._database, "failure", None)
        if failure and not self._fallback_reported:
            self._fallback_reported = True
            data["fallback"] = {"worker": self.worker_id, "local": str(self.local_dir),
                                **failure}
        return {"campaign": data} if data else {}
