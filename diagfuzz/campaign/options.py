"""The campaign's pytest options, and what they add to the controller's ``RunPlan``.

Checked on the controller before any worker starts, like every diagfuzz option: a bad
value is pytest's usage error (exit 4) that names the option.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from diagfuzz.campaign.partition import Partition, PartitionError, check_size, parse
from diagfuzz.core.streams import shard_count


def add_options(group: Any) -> None:
    """``--diagfuzz-partition`` and ``--diagfuzz-database`` (in the plugin's group)."""
    group.addoption("--diagfuzz-partition", default=None, metavar="i/N",
                    help="run partition i of N (numbered from 1) of the campaign of "
                         "--diagfuzz-seed: a fixed, disjoint share of its shard items, with "
                         "the shard seeds of the whole run; `diagfuzz merge` joins the "
                         "partitions' --diagfuzz-report files")
    group.addoption("--diagfuzz-database", default=None, metavar="redis://HOST:PORT/DB",
                    help="an example database shared by every worker and host (needs "
                         "diagfuzz[redis]): failures found anywhere are replayed first; "
                         "each worker also keeps its local database and falls back to it "
                         "when the server fails (default: the local one alone)")


def partition(config: pytest.Config) -> Partition | None:
    """``--diagfuzz-partition``, checked (None when not given)."""
    value = config.getoption("diagfuzz_partition", None)
    if value is None:
        return None
    try:
        return parse(value)
    except PartitionError as exc:
        raise pytest.UsageError(str(exc)) from exc


def shards_for(part: Partition | None, profile_shards: int, n_workers: int,
               active: int) -> int:
    """Shards per stream when ``--diagfuzz-shards`` is not given.

    A whole run adds shards so each of its workers gets an item. A partition must not: its
    shard count would then follow its host's workers, the partitions would disagree on the
    run's items, and their union would not be one run. So a partition takes the profile's
    shards, or enough that each of the N partitions gets an item; keeping W workers busy on
    each host needs ``--diagfuzz-shards`` of at least N*W/streams.
    """
    if part is None:
        return shard_count(profile_shards, n_workers)
    return max(profile_shards, math.ceil(part.count / max(active, 1)), 1)


def check_partition(part: Partition | None, seed: int | None, derandomize: bool,
                    shards: int, active: int, shards_given: bool) -> None:
    """A partition needs the campaign's seed, and at least one shard item."""
    if part is None:
        return
    if seed is None and not derandomize:
        raise pytest.UsageError(
            f"--diagfuzz-partition={part} needs --diagfuzz-seed: every partition of a "
            "campaign runs with the same run seed (pick one, e.g. the CI run number)")
    try:
        check_size(part, shards, active, shards_given)
    except PartitionError as exc:
        raise pytest.UsageError(str(exc)) from exc


def database(config: pytest.Config) -> str | None:
    """``--diagfuzz-database``: a redis URL whose client is installed (None: not given)."""
    from diagfuzz.campaign.database import DatabaseError, check_url

    value = config.getoption("diagfuzz_database", None)
    if value is None:
        return None
    try:
        return check_url(value)
    except DatabaseError as exc:
        raise pytest.UsageError(str(exc)) from exc


def run_dir_name(seed: int, part: Partition | None) -> str:
    """``run-<seed>``, and ``run-<seed>-part<i>of<N>`` for a partition: partitions that
    share a machine (or a root) keep their journals and databases apart."""
    return f"run-{seed}" if part is None else f"run-{seed}-part{part.index}of{part.count}"
