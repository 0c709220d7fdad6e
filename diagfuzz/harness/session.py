"""What a shard needs of its worker's session: the protocol ``diagfuzz.harness.shard`` types
its session by.

The plugin's ``diagfuzz.harness.worker.ShardSession`` is the session a worker makes; it
imports the shard engine to run its items, so the shard engine names the session by this
protocol and imports nothing of the plugin.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from diagfuzz.campaign.worker import WorkerCampaign
    from diagfuzz.execution.journal import JournaledRunner
    from diagfuzz.harness.progress import WorkerProgress
    from diagfuzz.harness.sharding import RunPlan


class ShardSession(Protocol):
    """One worker's part of the run, as its shards use it."""

    #: The run's plan (shard seeds, the deadline).
    plan: RunPlan
    #: The worker's part of a campaign: its example database, known failures to replay.
    campaign: WorkerCampaign
    #: The worker's progress file (each verdict, as it comes).
    progress: WorkerProgress

    @property
    def runner(self) -> JournaledRunner:
        """The worker's journaled runner."""
        ...

    def run_one(self, shard: Any, case: Any) -> Any:
        """One Case's verdict; a runner that raises stops the shard."""
        ...

    def harness_error(self, shard: Any, case: Any, exc: BaseException) -> None:
        """The runner raised on ``case``: a finding of the harness."""
        ...

    def pipeline_refusal(self, shard_settings: Any) -> str:
        """'' if the shards may pipeline, else why not."""
        ...
