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
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from diagfuzz.core.opnames import op_names
from diagfuzz.core.streams import STREAM_KINDS, STREAM_OPS, STREAMS

SPECS = op_names()  # the op names, read without importing torch
#: Under --diagfuzz-max-seconds S: shards draw for this share of S, shrink until
#: ``SHRINK_SHARE`` of it, and the controller stops what still runs at ``HARD_SHARE`` of it
#: and writes its report, so the run ends within 5 % of S.
DRAW_SHARE = 0.6
SHRINK_SHARE = 0.85
HARD_SHARE = 0.95


def new_run_seed() -> int:
    """A fresh random run seed (32 bits, easy to type back in)."""
    return secrets.randbits(32)


def derive_seed(run_seed: int, stream: str, shard: int) -> int:
    """The Hypothesis seed of shard ``shard`` of ``stream``: stable across machines."""
    digest = hashlib.blake2b(f"{run_seed}:{stream}:{shard}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def examples_per_shard(total: int, shards: int, streams: int = len(STREAMS)) -> int:
    """Cases each shard runs so that all shards together run about ``total``."""
    return max(1, math.ceil(total / (shards * streams)))


def suite_split(total: int, shards: int, streams: int) -> tuple[int, str]:
    """How a suite budget of about ``total`` Cases is split (what the shards run in all,
    and ``"234 Cases x 4 shards x 3 streams"``): the one wording of ``--budget``'s help and
    of ``diagfuzz gate --plan``."""
    per_shard = examples_per_shard(total, shards, streams)
    return (per_shard * shards * streams,
            f"{per_shard:,} Cases x {shards} shards x {streams} streams")


def families_per_shard(cases: int, mean_members: float) -> int:
    """Hypothesis examples (Case families of ``mean_members`` Cases on average) that make
    about ``cases`` Cases: the suite draws families, and max_examples counts examples."""
    if mean_members < 1:
        raise ValueError(f"mean_members={mean_members!r} must be at least 1")
    return max(1, math.ceil(cases / mean_members))


@dataclass(frozen=True)
class RunPlan:
    """Everything a worker needs to collect and run the same shards as every other worker.

    Decided once on the controller (or the single pytest process) and shipped to xdist
    workers as a plain dict, so no worker re-derives anything from its own environment;
    what depends on the impl each worker completes from it alike (``resolved``).
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
    #: Pipeline draws with checks (process isolation only; diagfuzz.adapters.hypothesis).
    pipeline: bool = True
    #: Executor processes one pipelined worker feeds (diagfuzz.execution.fanout; 1: a single one).
    executors: int = 1
    #: The ops fuzzed (requested and provided by the impl), and the stream kinds.
    ops: tuple[str, ...] = SPECS
    streams: tuple[str, ...] = STREAM_KINDS
    #: Narrowing of every stream's draws (None: the strategies' defaults), per op for dtypes
    #: (what was asked, within what the impl declares).
    dtypes: dict[str, tuple[str, ...]] | None = None
    ranks: tuple[int, int] | None = None
    layouts: tuple[str, ...] | None = None
    #: --diagfuzz-strict: declarations ignored, binding-level errors of the bindings' types.
    strict: bool = False
    #: Wall-clock time (time.time()) after which shards draw no new Cases; None: no cap.
    deadline: float | None = None
    #: The cap the deadline came from (--diagfuzz-max-seconds).
    max_seconds: float | None = None
    #: Wall-clock time the cap ends (the run's start + max_seconds): shrinking ends before
    #: it, and the controller stops whatever still runs just before it.
    stop_at: float | None = None
    #: Directories the impl is imported from (sys.path entries the controller added).
    impl_path: tuple[str, ...] = ()
    #: Why a stream is skipped (an op the impl does not provide, a narrowing that leaves
    #: nothing to draw); streams not named here run.
    skipped: dict[str, str] = field(default_factory=dict)
    #: --diagfuzz-partition=i/N: this run is partition ``partition`` (1-based) of
    #: ``partitions`` of one campaign (diagfuzz.campaign.partition); None: the whole run.
    partition: int | None = None
    partitions: int | None = None
    #: --diagfuzz-database: a shared example database's URL (diagfuzz.campaign.database);
    #: None: each worker's own directory database.
    database: str | None = None
    #: The device Cases run on (diagfuzz.core.runtime.DEVICE once resolved; before, what
    #: ``diagfuzz.core.preselect.device_without_torch`` is certain of, else None).
    device: str | None = None
    #: This run's own id (random): a rerun with the same seed shares the run directory,
    #: not this run's shrink claims (diagfuzz.harness.claims).
    run_id: str = ""
    #: Whether the suite's ``test_huge`` runs (the profile's ``huge``, or --diagfuzz-huge).
    huge: bool = False
    #: Call sequences the suite's ``test_sequences`` draws (the profile's, or
    #: --diagfuzz-sequences); 0: it does not run.
    sequences: int = 0
    #: --diagfuzz-covering: each valid stream's shards first judge their share of the op's
    #: covering Cases (``diagfuzz.strategies.covering``), then draw.
    covering: bool = False
    #: The controller's fork server, which every worker's executors are forked from
    #: (``diagfuzz.execution.forkserver.start_for_run``); '': each worker starts its own.
    fork_server: str = ""
    #: What the impl's loading registered into aten and what a Case calls
    #: (``diagfuzz.impl.registration_lines``): said at the run's start and end.
    registrations: tuple[str, ...] = ()
    #: Whether what depends on the impl (``ops``, ``skipped``, ``dtypes``,
    #: ``registrations``, ``cases_per_shard``, a partition's ``shards``, ``device``) is
    #: decided. An xdist controller leaves it to its workers, which import torch and the
    #: impl anyway (``diagfuzz.harness.planning.complete``); the controller imports neither.
    resolved: bool = True
    #: What the options ask, for ``complete``: --diagfuzz-ops and --diagfuzz-dtypes (None:
    #: not given), the Case budget over all shards, the profile's shards per stream and
    #: whether --diagfuzz-shards was given (a partition's shards follow the streams that run).
    asked_ops: tuple[str, ...] | None = None
    asked_dtypes: tuple[str, ...] | None = None
    budget: int = 0
    profile_shards: int = 0
    shards_given: bool = False

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
    def active_streams(self) -> tuple[str, ...]:
        """The streams that run (the others are skipped, with why)."""
        return tuple(s for s in STREAMS if s not in self.skipped)

    @property
    def total(self) -> int:
        """The Case budget over all shards of the streams that run (about: families vary
        in size)."""
        return self.cases_per_shard * self.shards * len(self.active_streams)

    def worker_dir(self, worker_id: str) -> Path:
        """The private directory of one worker (``main`` without xdist)."""
        return Path(self.run_dir) / worker_id

    @property
    def stop_file(self) -> Path:
        """Created by the controller when the run is stopped (SIGTERM, Ctrl-C, the cap's
        hard stop): its workers end the shard they are in and start no other. A signal
        reaches only the controller when sent to it alone, and xdist would let each worker
        finish its queued shards before the controller may exit."""
        return Path(self.run_dir) / "stop"

    def stop_requested(self) -> bool:
        """Whether the controller asked the workers to stop (one ``stat``)."""
        return self.stop_file.exists()

    @property
    def journal_dir(self) -> Path:
        """Where each worker's write-ahead journal lives (``<worker>.jsonl``)."""
        return Path(self.run_dir) / "journal"

    def to_dict(self) -> dict[str, Any]:
        """Plain data for xdist's workerinput."""
        return asdict(self)

    @staticmethod
    def from_dict(data: dict[str, Any]) -> RunPlan:
        """The inverse of ``to_dict`` (JSON lists back to tuples)."""
        data = dict(data)
        for name in ("ops", "streams", "layouts", "ranks", "impl_path", "registrations",
                     "asked_ops", "asked_dtypes"):
            if data.get(name) is not None:
                data[name] = tuple(data[name])
        if data.get("dtypes") is not None:
            data["dtypes"] = {op: tuple(names) for op, names in data["dtypes"].items()}
        return RunPlan(**data)

    def stream_ops(self, stream: str) -> tuple[str, ...]:
        """The ops a stream draws."""
        return (STREAM_OPS[stream],) if stream in STREAM_OPS else self.ops

    def strategy_args(self, stream: str) -> dict[str, Any]:
        """Keyword arguments of the stream's family strategy: the run's narrowing."""
        args: dict[str, Any] = {"max_elements": self.max_elements,
                                "max_members": self.max_members}
        if self.ranks is not None:
            args["ranks"] = self.ranks
        if self.layouts is not None:
            args["layout_kinds"] = self.layouts
        if self.dtypes is not None:
            names: list[str] = []
            for op in self.stream_ops(stream):
                names += [d for d in self.dtypes.get(op, ()) if d not in names]
            args["dtypes"] = tuple(names)
        if stream not in STREAM_OPS and set(self.ops) != set(SPECS):
            # The invalid Cases of the ops fuzzed only (an impl providing some ops).
            args["op"] = self.ops[0] if len(self.ops) == 1 else self.ops
        return args

    def describe(self) -> str:
        """The run header: how to rerun, how big the run is, what it leaves out. Unresolved
        (an xdist controller's plan), only how to rerun: the rest is said once a worker has
        loaded the impl."""
        if not self.resolved:
            return (f"diagfuzz: seed {self.seed} (rerun: --diagfuzz-seed {self.seed}), impl "
                    f"{self.impl}, run dir {self.run_dir}: the workers load the impl, then "
                    "the plan follows")
        lines = [self._headline()]
        if self.dtypes is not None or self.ranks or self.layouts or self.strict:
            lines.append("diagfuzz: narrowed to " + self._narrowing())
        lines += [f"diagfuzz: skipped {stream.removeprefix('test_')}: {why}"
                  for stream, why in self.skipped.items()]
        if self.huge:
            from diagfuzz.core import huge

            unable = huge.skip_reason(self.device or "cpu")
            lines.append(f"diagfuzz: skipped huge tier: {unable}" if unable else
                         "diagfuzz: huge tier: test_huge judges Cases past "
                         f"{huge.threshold():,} elements")
        from diagfuzz.campaign.report import plan_lines

        lines += plan_lines(self)  # the partition, the shared database
        if self.deadline is not None:
            lines.append("diagfuzz: shards draw no new Case after the time cap "
                         "(--diagfuzz-max-seconds); a cut run is reported as cut")
        return "\n".join(lines)

    def _narrowing(self) -> str:
        parts = []
        if self.dtypes is not None:
            parts += [f"{op} dtypes {', '.join(names) or '(none)'}"
                      for op, names in self.dtypes.items()]
        if self.ranks:
            parts.append(f"ranks {self.ranks[0]}..{self.ranks[1]}")
        if self.layouts:
            parts.append(f"layouts {', '.join(self.layouts)}")
        if self.strict:
            parts.append("strict (declarations ignored, binding error types checked)")
        return "; ".join(parts)

    def _headline(self) -> str:
        return (f"diagfuzz: seed {self.seed} (rerun: --diagfuzz-seed {self.seed}), "
                f"impl {self.impl}, profile {self.profile}: {self.shards} shards x "
                f"{len(self.active_streams)} streams x about {self.cases_per_shard} Cases "
                f"(families of up to {self.max_members}), max "
                f"{self.max_elements} elements, isolation {self.isolation}"
                f"{self._pipelined()}, "
                f"run dir {self.run_dir}")
