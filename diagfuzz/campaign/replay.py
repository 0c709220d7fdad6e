"""Known failures: what any worker of any host found, replayed first by every other.

Hypothesis replays a test's saved failures at its next run, under the test's own key. The
shard engine saves under keys of its own (phase 2 shrinks each signature of one shard under
``stream:index:signature``), which no other shard ever runs: a failure found by shard 3 on
one host would never reach shard 5 on another. So, with a shared database, each shrunk
failure's choice sequence is also saved under a key of its *stream*
(``known_key``), and each worker, in its first shard of a stream, replays that key's entries
(``MAX_KNOWN`` at most, simplest first) before it explores. A replayed family is checked
and recorded like any explored family: counted in the report, and a failure goes under its
signature with its choice sequence, so phase 2 shrinks it (from an already shrunk family:
quickly) and reports it.

The key names the stream's strategy arguments (size cap, family size, narrowing): a choice
sequence draws the same family only from the same strategy, so campaigns with other
narrowing keep their own known failures. Replaying goes through Hypothesis itself (the
reuse phase, from an in-memory copy of the entries), so a family is drawn exactly as it
was; no entry is deleted from the shared key when it passes here (another impl, another
machine may still fail it). Redis expires keys nobody touched for 8 days.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable
from typing import Any

#: Known failures a worker replays per stream at most (the simplest first).
MAX_KNOWN = 32
#: Part of the key: a new meaning of the entries gets a new key.
FORMAT = 1


def known_key(stream: str, plan: Any) -> bytes:
    """The shared key of ``stream``'s known failures under ``plan``'s strategy arguments."""
    args = json.dumps(plan.strategy_args(stream), sort_keys=True, default=list)
    digest = hashlib.blake2b(args.encode(), digest_size=10).hexdigest()
    return f"diagfuzz-known:{FORMAT}:{stream}:{digest}".encode()


def shortlex(blob: bytes) -> tuple[int, bytes]:
    """Hypothesis' order of choice sequences: shorter first, then bytewise."""
    return len(blob), blob


def replay_known(shard: Any, run: Callable[..., None], shard_settings: Any, explorer: Any,
                 done: set[tuple[str, bytes]]) -> tuple[int, int]:
    """Check the stream's known failures not in ``done`` (added to it) as families of this
    shard; return (families replayed, families with a failing member)."""
    from hypothesis import Phase, Verbosity, settings
    from hypothesis.database import InMemoryExampleDatabase

    from diagfuzz.adapters import hypothesis as pipeline

    database = shard_settings.database
    if database is None or pipeline.unavailable():
        return 0, 0
    entries = sorted(set(database.fetch(known_key(shard.stream, shard.session.plan))),
                     key=shortlex)[:MAX_KNOWN]
    fresh = [e for e in entries if (shard.stream, e) not in done]
    done.update((shard.stream, e) for e in fresh)
    if not fresh:
        return 0, 0
    counts = [0, 0]

    def known(family: tuple[Any, ...]) -> None:
        choices = pipeline.current_choices()
        counts[0] += 1
        failed = False
        for case in family:
            verdict = shard.session.run_one(shard, case)
            explorer.record(case, verdict, choices)
            failed = failed or not verdict.ok
        counts[1] += failed

    # The reuse phase replays every entry under the test's key (none fails: this test
    # records verdicts, it does not raise), from a copy, so nothing shared is deleted.
    copy = InMemoryExampleDatabase()
    for entry in fresh:
        copy.save(pipeline.database_key(known), entry)
    how = settings(shard_settings, database=copy, phases=(Phase.reuse,),
                   max_examples=len(fresh), verbosity=Verbosity.quiet)
    with contextlib.suppress(Exception):  # a Hypothesis complaint costs the replay only
        run(known, how)
    return counts[0], counts[1]


def remember(stream: str, plan: Any, database: Any, choices: bytes) -> None:
    """Save ``choices`` (the family of a shrunk finding's representative: the last family
    that failed with its signature) as a known failure of ``stream``.

    Not the shrink key's best entry: Hypothesis also saves the example it was running when
    a BaseException ends a run (the shard's ``ShrinkBudget`` and ``TimeUp``), which may be a
    passing shrink candidate.
    """
    database.save(known_key(stream, plan), choices)
