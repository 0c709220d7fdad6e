"""The fuzz suite's streams, and how many shards each gets.

A stream is one test function of ``diagfuzz.suite`` drawing one kind of Case: valid Cases
of one op (``test_<op>``, for every op of ``diagfuzz.specs``), then the invalid Cases of
every op (``test_invalid``). The op names are read from the spec sources
(``diagfuzz.core.opnames``), so nothing here imports torch. The harness plans a run's shards
over these streams; a campaign deals them out to its partitions.
"""

from __future__ import annotations

import math

from diagfuzz.core.opnames import op_names

#: The op each valid stream draws: ``test_<op>`` for every op of ``diagfuzz.specs``.
STREAM_OPS = {f"test_{op}": op for op in op_names()}
#: Test functions of diagfuzz.suite, one stream of Cases each: one per op, then the
#: invalid Cases of every op.
STREAMS = (*STREAM_OPS, "test_invalid")
#: What ``--diagfuzz-streams`` names: valid Cases of the ops, invalid Cases of the ops.
STREAM_KINDS = ("valid", "invalid")


#: The fewest Cases a shard is given when the run chooses the shard count (about two
#: Case families): Hypothesis draws a test's simplest example first whatever its seed, so
#: every shard of a stream opens with the same Case, and a shard of one example (a dev
#: run's budget of 100 over 4 shards of 7 streams) draws nothing else.
MIN_CASES_PER_SHARD = 16


def shard_count(profile_shards: int, workers: int, streams: int = len(STREAMS)) -> int:
    """Shards per stream: the profile's, or more so every worker gets an item."""
    return max(profile_shards, math.ceil(workers / streams), 1)


def shards_within_budget(shards: int, budget: int, streams: int) -> int:
    """``shards``, fewer where a budget of ``budget`` Cases over ``streams`` streams would
    give a shard under ``MIN_CASES_PER_SHARD`` (at least one a stream): a small budget
    then draws that many different Cases instead of each shard's simplest one."""
    return max(1, min(shards, budget // (max(streams, 1) * MIN_CASES_PER_SHARD)))
