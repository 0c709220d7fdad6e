"""Hypothesis profiles of the fuzz suite, and the budget each one stands for.

A profile's budget is ``examples`` Cases per shard × ``shards`` per stream × the suite's
streams (one per op of ``diagfuzz.specs``, then the invalid Cases of every op), on tensors of
at most ``max_elements`` elements. The
Hypothesis profile carries ``max_examples = examples`` (right for a test drawing one Case per
example); the rest lives here because Hypothesis settings cannot hold it. The suite draws
Case families (``diagfuzz.strategies.*_case_families``), so a shard runs its Case budget
divided by the mean family size (``diagfuzz.strategies.MEAN_MEMBERS``, measured: 7.3) as
Hypothesis examples, so a profile stands for about the same number of Cases as before
families, in about a seventh of the examples.

Every profile has ``deadline=None`` (the first call of a kernel compiles, which trips any
deadline) and suppresses the health checks that flag slow or large *data*, since big
tensors are what a kernel fuzzer must draw. Health checks that point at a broken strategy
(filter_too_much, large_base_example) stay on.

Profiles are registered only when the diagfuzz plugin is active (``pytest -p diagfuzz``), so
a project that merely installs diagfuzz keeps its own ``dev``/``ci`` profiles.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, settings

from diagfuzz.adapters.hypothesis import pin_constant_pool

#: Hypothesis profile name used when ``--hypothesis-profile`` is not given.
DEFAULT_PROFILE = "dev"


@dataclass(frozen=True)
class Budget:
    """How much one profile fuzzes: Cases per shard, shards per stream, tensor size cap."""

    examples: int
    shards: int
    max_elements: int
    derandomize: bool = False
    doc: str = ""
    #: Cases per family at most (1: one Case per Hypothesis example, no families); the
    #: default is diagfuzz.strategies.MAX_MEMBERS, written out so this module stays light
    #: (tests/test_families_suite.py checks the two agree through a run's report).
    max_members: int = 12
    #: The suite's ``test_huge`` runs (the huge tier: Cases past 2**31 elements, on a CUDA
    #: GPU, ``diagfuzz.oracles.check_huge``); otherwise only ``--diagfuzz-huge`` runs it.
    huge: bool = False
    #: Call sequences the suite's ``test_sequences`` draws (``diagfuzz.harness.sequences``:
    #: bugs that depend on what ran before); 0: it does not run. Only nightly's: the dev
    #: and ci profiles are the inner loop (up to 30 s more), the gate has a stage of its own.
    sequences: int = 0

    @property
    def total(self) -> int:
        """Cases over all shards of every stream (``diagfuzz.harness.sharding.STREAMS``)."""
        from diagfuzz.harness.sharding import STREAMS

        return self.examples * self.shards * len(STREAMS)


#: The budgets, documented in the README, per stream (``Budget.total``: over all streams).
#: Times, with the three streams diagonal, diagonal_backward and invalid: ``pytest -n 2`` on
#: 2 CPU cores (Triton interpreter, executor-process isolation, a busy machine): 6,000 Cases
#: 84 s wall, 600 Cases 28 s; each op's stream adds its share.
#: The gate draws no families (max_members=1): its budget is small (400 Cases a stream; its
#: tests use 24) and Hypothesis spends a shard's first example on the simplest family, a
#: single minimal Case, so at 2 Cases a shard families left every shard that Case alone (a
#: bug at offset 1 went unseen). A gate runs its Cases in executor processes, where running,
#: not drawing, costs, so families would save it little; and it keeps drawing the Cases it
#: drew before families, so its verdicts and corpus stay comparable.
BUDGETS: dict[str, Budget] = {
    "dev": Budget(500, 4, 4096, doc="default: 2,000 Cases a stream"),
    "ci": Budget(100, 2, 1024, doc="the fuzz step of CI: 200 Cases a stream"),
    "gate": Budget(100, 4, 4096, derandomize=True, max_members=1,
                   doc="pre-merge gate: 400 Cases a stream (diagfuzz gate passes its own "
                       "--budget), derandomized, no example database: one seed, the same "
                       "Cases; one Case per example"),
    "nightly": Budget(10_000, 16, 1 << 20, huge=True, sequences=2000,
                      doc="160,000 Cases a stream up to 2**20 elements, and the huge tier: "
                          "meant for a GPU machine"),
}

_QUIET = (HealthCheck.too_slow, HealthCheck.data_too_large)


def register() -> None:
    """Register every profile of BUDGETS with Hypothesis (idempotent).

    Each inherits from Hypothesis' plain ``default`` profile, not from whatever is loaded:
    with ``CI`` set, Hypothesis loads its own ``ci`` profile (derandomized, no database),
    and profiles inheriting from it changed meaning under CI (seen: no database to replay).
    """
    pin_constant_pool()  # a seed draws the same Cases on every install and worker
    plain = settings.get_profile("default")
    for name, budget in BUDGETS.items():
        extra = ({"database": None, "derandomize": True} if budget.derandomize
                 else {"database": plain.database, "derandomize": False})
        settings.register_profile(
            name,
            parent=plain,
            max_examples=budget.examples,
            deadline=None,
            suppress_health_check=_QUIET,
            print_blob=False,  # its advice names a test inside diagfuzz; reproducers do it
            report_multiple_bugs=False,
            **extra,
        )


def budget_for(profile: str) -> Budget:
    """The budget of ``profile``; a foreign profile keeps its max_examples, dev's shape."""
    if profile in BUDGETS:
        return BUDGETS[profile]
    dev = BUDGETS[DEFAULT_PROFILE]
    return Budget(settings.get_profile(profile).max_examples, dev.shards, dev.max_elements)


def shard_settings(profile: str, *, max_examples: int, database: Any) -> settings:
    """The settings one shard runs under: ``profile`` with the shard's budget and database.

    A foreign profile gets the same deadline and health-check relief as ours. A profile
    without a database (gate) keeps none, so a derandomized run never replays old failures.
    """
    parent = settings.get_profile(profile)
    keep_no_db = parent.database is None
    suppressed = tuple(dict.fromkeys((*parent.suppress_health_check, *_QUIET)))
    return settings(
        parent,
        max_examples=max_examples,
        deadline=None,
        suppress_health_check=suppressed,
        report_multiple_bugs=False,
        database=None if keep_no_db else database,
    )
