"""Partitions of a campaign: ``--diagfuzz-partition=i/N``, numbered from 1.

A partition is a fixed subset of the run's shard items, (stream, shard index) pairs. Every
partition of one campaign resolves the same ``RunPlan`` shape (seed, shards, budget per
shard, narrowing), so each collects exactly the items an unpartitioned run collects, with
the same shard seeds (``RunPlan.shard_seed(stream, index)``), and then deselects the items
dealt to the other partitions. Deselecting, not re-parametrizing, keeps a shard's index, and
with it its seed and its test id, the same as in the whole run; every xdist worker of a
partition deselects the same items, so their collections agree.

Items are dealt round-robin from one list: shard 0 of every stream that runs, then shard 1
with the streams rotated by one, and so on; the skipped streams' items come last. Partition
p (1-based) gets the items at positions p-1, p-1+N, p-1+2N... So partitions differ in size by
one item at most, and each mixes the streams (with as many partitions as streams and at
least two shards, no partition runs one stream only; streams differ in speed).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from diagfuzz.core.streams import STREAMS

_SYNTAX = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


class PartitionError(ValueError):
    """A partition option that cannot be used (the plugin turns it into a usage error)."""


@dataclass(frozen=True)
class Partition:
    """Partition ``index`` of ``count`` (1 <= index <= count)."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse(text: str) -> Partition:
    """``"i/N"`` with 1 <= i <= N: CI matrices list ``1..N``, and so does a person."""
    match = _SYNTAX.match(str(text))
    if not match:
        raise PartitionError(f"--diagfuzz-partition={text!r}: give i/N, e.g. 1/4 (partitions "
                             "are numbered from 1)")
    index, count = int(match.group(1)), int(match.group(2))
    if count < 1:
        raise PartitionError(f"--diagfuzz-partition={text!r}: N must be at least 1")
    if not 1 <= index <= count:
        first = " (partitions are numbered from 1)" if index == 0 else ""
        raise PartitionError(f"--diagfuzz-partition={text!r}: i must be in 1..{count}{first}")
    return Partition(index, count)


def dealing_order(shards: int, active: Sequence[str],
                  skipped: Sequence[str] = ()) -> list[tuple[str, int]]:
    """Every shard item as (stream, index), in the order partitions are dealt from."""
    order = [(active[(k + i) % len(active)], i)
             for i in range(shards) for k in range(len(active))] if active else []
    order += [(stream, i) for stream in skipped for i in range(shards)]
    return order


def items_of(partition: Partition, shards: int, active: Sequence[str],
             skipped: Sequence[str] = ()) -> set[tuple[str, int]]:
    """The (stream, shard index) items dealt to ``partition``."""
    order = dealing_order(shards, active, skipped)
    return {item for position, item in enumerate(order)
            if position % partition.count == partition.index - 1}


def plan_items(plan: Any) -> set[tuple[str, int]]:
    """The items of ``plan``'s partition (every item when the plan is not partitioned)."""
    skipped = [s for s in STREAMS if s in plan.skipped]
    if not plan.partitions:
        return set(dealing_order(plan.shards, plan.active_streams, skipped))
    return items_of(Partition(plan.partition, plan.partitions), plan.shards,
                    plan.active_streams, skipped)


def check_size(partition: Partition, shards: int, active: int, shards_given: bool) -> None:
    """Every partition gets a shard item of a stream that runs, or a usage error says how."""
    items = shards * active
    if items >= partition.count:
        return
    need = -(-partition.count // max(active, 1))
    how = ("raise --diagfuzz-shards" if shards_given else "give --diagfuzz-shards")
    raise PartitionError(
        f"--diagfuzz-partition={partition}: the run has {items} shard items ({shards} shards "
        f"x {active} streams), fewer than {partition.count} partitions; {how} to at least "
        f"{need}")


def item_key(item: Any, fixture: str) -> tuple[str, int] | None:
    """(stream, shard index) of a collected shard item, or None for any other item."""
    callspec = getattr(item, "callspec", None)
    if callspec is None or fixture not in callspec.params:
        return None
    name = getattr(item, "originalname", None) or item.name.split("[")[0]
    return name, int(callspec.params[fixture])


def deselect(plan: Any, config: Any, items: list[Any], fixture: str) -> None:
    """Keep the shard items of ``plan``'s partition (and every item that is no shard);
    tell pytest which were deselected, as ``-k`` does."""
    if not plan.partitions:
        return
    mine = plan_items(plan)
    kept: list[Any] = []
    dropped: list[Any] = []
    for item in items:
        key = item_key(item, fixture)
        (kept if key is None or _dealt_here(key, plan, mine) else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def _dealt_here(key: tuple[str, int], plan: Any, mine: set[tuple[str, int]]) -> bool:
    """Whether shard item ``key`` is this partition's. A shard test of the user's own (not
    one of the suite's streams) is dealt by a hash of its name and index."""
    if key[0] in STREAMS:
        return key in mine
    return zlib.crc32(f"{key[0]}:{key[1]}".encode()) % plan.partitions == plan.partition - 1
