"""Split one fuzz budget into shards with fixed seeds derived from one run seed.

Hypothesis runs one ``@given`` test on one xdist worker, so the suite is split into shards:
separate collected items, each a Hypothesis run with its own seed. The run seed is chosen
once (on the xdist controller), printed, and shipped to the workers; every shard's seed is a
hash of (run seed, stream, shard index), so collection and cases are identical on every
worker and on every rerun with the same ``--diagfuzz-seed``.
"""

from __future__ import annotations

import hashlib
import math
import secrets
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

#: Test functions of diagfuzz.suite, one stream of cases each.
STREAMS = ("test_diagonal", "test_diagonal_backward", "test_invalid")


def new_run_seed() -> int:
    """A fresh random run seed (32 bits, easy to type back in)."""
    return secrets.randbits(32)


def derive_seed(run_seed: int, stream: str, shard: int) -> int:
    """The Hypothesis seed of shard ``shard`` of ``stream``: stable across machines."""
    digest = hashlib.blake2b(f"{run_seed}:{stream}:{shard}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def shard_count(profile_shards: int, workers: int, streams: int = len(STREAMS)) -> int:
    """Shards per stream: the profile's, or more so every worker gets an item."""
    return max(profile_shards, math.ceil(workers / streams), 1)


def examples_per_shard(total: int, shards: int, streams: int = len(STREAMS)) -> int:
    """Cases each shard runs so that all shards together run about ``total``."""
    return max(1, math.ceil(total / (shards * streams)))


def families_per_shard(cases: int, mean_members: float) -> int:
    """Hypothesis examples (Case families of ``mean_members`` Cases on average) that make
    about ``cases`` Cases: the suite draws families, and max_examples counts examples."""
    if mean_members < 1:
        raise ValueError(f"mean_members={mean_members!r} must be at least 1")
    return max(1, math.ceil(cases / mean_members))


@dataclass(frozen=True)
class RunPlan:
    """Everything a worker needs to collect and run the same shards as every other worker.

    Resolved once on the controller (or the single pytest process) and shipped to xdist
    workers as a plain dict, so no worker re-derives anything from its own environment.
    """

    seed: int
    impl: str
    profile: str
    shards: int
    cases_per_shard: int
    max_elements: int
    isolation: str
    timeout: float | None
    run_dir: str
    workers: int
    #: Cases per family at most (diagfuzz.strategies.MAX_MEMBERS; 1: a Case per example).
    max_members: int = 12
    #: Pipeline draws with checks (process isolation only; diagfuzz.pipeline).
    pipeline: bool = True
    #: Executor processes one pipelined worker feeds (diagfuzz.fanout; 1: one, as before).
    executors: int = 1

    @property
    def pipelines(self) -> bool:
        """Whether workers draw while their executor checks: process isolation only."""
        return self.pipeline and self.isolation == "process"

    @property
    def fans_out(self) -> bool:
        """Whether each worker feeds several executors: pipelined process isolation only."""
        return self.executors > 1 and self.pipelines

    def _pipelined(self) -> str:
        if not self.pipelines:
            return ""
        return f", pipelined to {self.executors} executors" if self.fans_out else ", pipelined"

    def shard_seed(self, stream: str, shard: int) -> int:
        """The seed of one shard."""
        return derive_seed(self.seed, stream, shard)

    @property
    def total(self) -> int:
        """The Case budget over all shards of all streams (about: families vary in size)."""
        return self.cases_per_shard * self.shards * len(STREAMS)

    def worker_dir(self, worker_id: str) -> Path:
        """The private directory of one worker (``main`` without xdist)."""
        return Path(self.run_dir) / worker_id

    @property
    def journal_dir(self) -> Path:
        """Where each worker's write-ahead journal lives (``<worker>.jsonl``)."""
        return Path(self.run_dir) / "journal"

    def to_dict(self) -> dict[str, Any]:
        """Plain data for xdist's workerinput."""
        return asdict(self)

    @staticmethod
    def from_dict(data: dict[str, Any]) -> RunPlan:
        """The inverse of ``to_dict``."""
        return RunPlan(**data)

    def describe(self) -> str:
        """One line for the run header: how to rerun, and how big the run is."""
        return (f"diagfuzz: seed {self.seed} (rerun: --diagfuzz-seed {self.seed}), "
                f"impl {self.impl}, profile {self.profile}: {self.shards} shards x "
                f"{len(STREAMS)} streams x about {self.cases_per_shard} Cases (families of up "
                f"to {self.max_members}), max "
                f"{self.max_elements} elements, isolation {self.isolation}"
                f"{self._pipelined()}, "
                f"run dir {self.run_dir}")
