"""The decision of a run: options validated into one ``RunPlan``, then completed with what
the implementation provides and declares.

Every option is checked before any worker starts, with a message that names the option and
the valid choices (pytest's usage error, exit 4); an ``--impl`` module that is not there
too. The controller imports neither torch nor the impl (its start-up is the run's critical
path), so what depends on the impl is decided by ``complete`` where the impl is loaded
anyway: in each xdist worker, or in a run without xdist. An impl that cannot be imported,
provides none of the ops or leaves nothing to run is a usage error there (``PlanError``);
what it declares (the ops it provides, its dtypes) narrows the streams before anything is
drawn.
"""

from __future__ import annotations

import dataclasses
import math
import os
import secrets
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from diagfuzz.campaign import options as campaign
from diagfuzz.core import rundirs
from diagfuzz.core.exits import ExitCode
from diagfuzz.core.streams import shards_within_budget
from diagfuzz.harness import workers
from diagfuzz.harness.sharding import (
    DRAW_SHARE,
    SPECS,
    STREAM_KINDS,
    STREAM_OPS,
    STREAMS,
    RunPlan,
    examples_per_shard,
    new_run_seed,
)

#: The exit status of a run cut by its time cap with no failure in what ran (the gate's
#: too): not 0, since the budget was not run, and apart from pytest's own 0-5.
EXIT_CUT = int(ExitCode.CUT)


def names(config: pytest.Config, option: str, valid: Sequence[str]) -> tuple[str, ...] | None:
    """A comma-separated option as names from ``valid`` (None when not given)."""
    value = config.getoption(option.lstrip("-").replace("-", "_"))
    if value is None:
        return None
    chosen = tuple(dict.fromkeys(v.strip() for v in str(value).split(",") if v.strip()))
    unknown = [v for v in chosen if v not in valid]
    if unknown or not chosen:
        raise pytest.UsageError(f"{option}={value!r}: unknown {', '.join(unknown) or 'empty'}; "
                                f"choose from {', '.join(valid)}")
    return chosen


def ranks(config: pytest.Config) -> tuple[int, int] | None:
    """``--diagfuzz-ranks=N`` or ``LO-HI``, within what the strategies draw."""
    from diagfuzz.core.names import MAX_RANK

    value = config.getoption("diagfuzz_ranks")
    if value is None:
        return None
    low, _, high = str(value).replace("..", "-").partition("-")
    try:
        pair = (int(low), int(high or low))
    except ValueError:
        pair = (0, -1)
    if not 2 <= pair[0] <= pair[1] <= MAX_RANK:
        raise pytest.UsageError(f"--diagfuzz-ranks={value!r}: give N or LO-HI with "
                                f"2 <= LO <= HI <= {MAX_RANK}")
    return pair


def positive(config: pytest.Config, dest: str) -> Any:
    """An option that must be positive when given."""
    value = config.getoption(dest)
    if value is not None and value <= 0:
        raise pytest.UsageError(f"--{dest.replace('_', '-')} must be positive, got {value}")
    return value


def isolation(choice: str) -> str:
    """auto means process isolation (the executor is part of diagfuzz)."""
    return "process" if choice == "auto" else choice


def check_output_path(option: str, value: str | None) -> Path | None:
    """An output file the run will write: fail now, not after the run, if it cannot be."""
    if not value:
        return None
    path = Path(value).expanduser().resolve()
    if path.is_dir():
        raise pytest.UsageError(f"{option}={value}: is a directory; give a file path")
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise pytest.UsageError(f"{option}={value}: {parent} is a file, not a "
                                        "directory")
            if not os.access(parent, os.W_OK):
                raise pytest.UsageError(f"{option}={value}: cannot write in {parent}")
            break
    return path


def _float32_first(dtypes: tuple[str, ...] | None) -> tuple[str, ...] | None:
    """Declared dtypes with float32 first where declared: draws shrink to the first."""
    if dtypes is None or "float32" not in dtypes:
        return dtypes
    return ("float32", *(d for d in dtypes if d != "float32"))


class PlanError(ValueError):
    """What the impl declares leaves the options nothing to run: a usage error, said by the
    process that loaded the impl (the controller's pytest raises it as one)."""


def _impl_capabilities(plan: RunPlan, impl: Any, proof: str
                       ) -> tuple[tuple[str, ...], dict[str, str],
                                  dict[str, tuple[str, ...]] | None, tuple[str, ...]]:
    """(ops fuzzed, streams skipped with why, dtypes per op, what the impl registered into
    aten) from the options ``plan`` carries and the impl's declarations."""
    from diagfuzz.core.case import available_dtypes
    from diagfuzz.core.impl import no_method
    from diagfuzz.impl import declared_dtypes, provided_ops, registration_lines

    asked_ops = plan.asked_ops or SPECS
    provided = provided_ops(impl)
    asked_dtypes = plan.asked_dtypes
    lacking = [d for d in asked_dtypes or () if d not in available_dtypes()]
    if lacking:  # names diagfuzz knows that this torch has not
        raise PlanError(f"--diagfuzz-dtypes={','.join(asked_dtypes or ())!r}: unknown "
                        f"{', '.join(lacking)}; choose from {', '.join(available_dtypes())}")
    kinds = plan.streams
    skipped: dict[str, str] = {}
    dtypes: dict[str, tuple[str, ...]] = {}
    ops: list[str] = []
    for op in asked_ops:
        stream = next(s for s, o in STREAM_OPS.items() if o == op)
        if op not in provided:
            skipped[stream] = no_method(op)
            continue
        declared = None if plan.strict else declared_dtypes(impl, op)
        wanted = asked_dtypes if asked_dtypes is not None else _float32_first(declared)
        if wanted is not None:
            kept = tuple(d for d in wanted if declared is None or d in declared)
            if not kept:
                skipped[stream] = (f"--diagfuzz-dtypes {', '.join(asked_dtypes or ())} "
                                   f"leaves nothing the impl declares for {op} "
                                   f"({', '.join(declared or ())})")
                continue
            dtypes[op] = kept
        ops.append(op)
        if "valid" not in kinds:
            skipped[stream] = "--diagfuzz-streams leaves out valid Cases"
    for stream, op in STREAM_OPS.items():
        if op not in asked_ops:
            skipped.setdefault(stream, f"--diagfuzz-ops leaves out {op}")
    if "invalid" not in kinds:
        skipped["test_invalid"] = "--diagfuzz-streams leaves out invalid Cases"
    elif not ops:
        skipped["test_invalid"] = "no op left to fuzz"
    if all(s in skipped for s in STREAMS):
        raise PlanError("nothing to fuzz: " + "; ".join(
            f"{s.removeprefix('test_')}: {why}" for s, why in skipped.items()))
    narrowed = None
    if dtypes:  # an op without a narrowing draws every dtype, float32 first (its shrink goal)
        every = ("float32", *(d for d in available_dtypes() if d != "float32"))
        narrowed = {op: dtypes.get(op, every) for op in ops}
    return tuple(ops), skipped, narrowed, tuple(registration_lines(impl, proof, ops))


def complete(plan: RunPlan) -> RunPlan:
    """``plan`` with what depends on the impl decided: the impl imported and proven here
    (``diagfuzz.impl.load_proven``), the streams narrowed by what it provides and declares,
    the budget split over the streams that run. Every worker of a run gets the same answer
    from the same plan; PlanError when the impl cannot be used or leaves nothing to run."""
    if plan.resolved:
        return plan
    from diagfuzz.campaign.partition import Partition, PartitionError, check_size
    from diagfuzz.core.runtime import DEVICE
    from diagfuzz.impl import ImplError, ReferenceReplaced, load_proven, use_roots

    use_roots(plan.impl_path)
    try:
        impl, proof = load_proven(plan.impl, "cpu")
    except (ImplError, ReferenceReplaced) as exc:
        raise PlanError(str(exc)) from exc
    ops, skipped, dtypes, registrations = _impl_capabilities(plan, impl, proof)
    active = len(STREAMS) - len(skipped)
    shards = plan.shards
    part = Partition(plan.partition or 1, plan.partitions) if plan.partitions else None
    if not plan.shards_given:
        if part is not None:
            shards = campaign.shards_for(part, plan.profile_shards, plan.workers, active)
        # From the budget and the streams alone, so a campaign's partitions and the whole
        # run of its seed and budget take the same shards (each partition one item at least).
        shards = shards_within_budget(shards, plan.budget, active)
        if part is not None:
            shards = max(shards, math.ceil(part.count / max(active, 1)))
    if part is not None:
        try:
            check_size(part, shards, active, plan.shards_given)
        except PartitionError as exc:
            raise PlanError(str(exc)) from exc
    return dataclasses.replace(
        plan, resolved=True, ops=ops, skipped=skipped, dtypes=dtypes,
        registrations=registrations, shards=shards,
        cases_per_shard=examples_per_shard(plan.budget, shards, active), device=DEVICE)


def _option_skips(kinds: tuple[str, ...], asked_ops: tuple[str, ...] | None) -> int:
    """Streams the options alone leave out (the impl may leave out more; the options
    alone never leave out every stream: neither names an empty list)."""
    ops = asked_ops or SPECS
    valid = (sum(op not in ops for op in STREAM_OPS.values()) if "valid" in kinds
             else len(STREAM_OPS))
    return valid + ("invalid" not in kinds)


def resolve_plan(config: pytest.Config, n_workers: int, with_impl: bool = True) -> RunPlan:
    """Decide the run once: seed, profile budget, narrowing, shards, time cap, directories,
    every option checked. ``with_impl``: also import the impl and decide what depends on
    it (``complete``); an xdist controller leaves that to its workers, so it imports
    neither torch nor the impl."""
    from hypothesis import settings
    from hypothesis.errors import InvalidArgument

    from diagfuzz.core.names import DTYPE_NAMES, LAYOUT_KINDS
    from diagfuzz.core.preselect import device_without_torch
    from diagfuzz.core.roots import DEFAULT_IMPL, ImplError, import_roots, locate_impl, use_roots
    from diagfuzz.harness import profiles

    roots = import_roots(config.rootpath)
    use_roots(roots)
    spec = config.getoption("diagfuzz_impl") or DEFAULT_IMPL
    try:  # a module that is not there: said now, before any worker starts
        locate_impl(spec)
    except ImplError as exc:
        raise pytest.UsageError(str(exc)) from exc
    strict = bool(config.getoption("diagfuzz_strict"))
    asked_ops = names(config, "--diagfuzz-ops", SPECS)
    asked_dtypes = names(config, "--diagfuzz-dtypes", DTYPE_NAMES)
    kinds = names(config, "--diagfuzz-streams", STREAM_KINDS) or STREAM_KINDS
    profile = config.getoption("hypothesis_profile", None) or profiles.DEFAULT_PROFILE
    try:
        budget = profiles.budget_for(profile)
        derandomize = settings.get_profile(profile).derandomize
    except InvalidArgument as exc:
        raise pytest.UsageError(f"--hypothesis-profile={profile!r}: {exc}; diagfuzz's "
                                f"profiles are {', '.join(profiles.BUDGETS)}") from exc
    # At most this many streams run; a worker counts those the impl leaves (``complete``).
    active = len(STREAMS) - _option_skips(kinds, asked_ops)
    part = campaign.partition(config)  # --diagfuzz-partition: the shards of one campaign
    shards_given = config.getoption("diagfuzz_shards") is not None
    shards = (positive(config, "diagfuzz_shards")
              or campaign.shards_for(part, budget.shards, n_workers, active))
    total = positive(config, "diagfuzz_budget") or budget.total
    seed = config.getoption("diagfuzz_seed")
    campaign.check_partition(part, seed, derandomize, shards, active, shards_given)
    if seed is None:
        seed = 0 if derandomize else new_run_seed()
    max_seconds = positive(config, "diagfuzz_max_seconds")
    timeout = positive(config, "diagfuzz_timeout")
    root = Path(config.getoption("diagfuzz_root") or config.rootpath / ".diagfuzz")
    plan = RunPlan(
        seed=seed,
        impl=spec,
        profile=profile,
        shards=shards,
        cases_per_shard=examples_per_shard(total, shards, active),
        max_elements=positive(config, "diagfuzz_max_elements") or budget.max_elements,
        isolation=isolation(config.getoption("diagfuzz_isolation")),
        timeout=timeout,
        run_dir=str(rundirs.fresh_dir(root.resolve(), campaign.run_dir_name(seed, part))),
        workers=n_workers,
        max_members=positive(config, "diagfuzz_max_members") or budget.max_members,
        pipeline=config.getoption("diagfuzz_pipeline") == "on",
        executors=(positive(config, "diagfuzz_executors")
                   or workers.auto_executors(n_workers, workers.cpu_count())),
        streams=kinds,
        ranks=ranks(config),
        layouts=names(config, "--diagfuzz-layouts", LAYOUT_KINDS),
        strict=strict,
        deadline=None if max_seconds is None else time.time() + DRAW_SHARE * max_seconds,
        max_seconds=max_seconds,
        stop_at=None if max_seconds is None else time.time() + max_seconds,
        impl_path=tuple(roots),
        partition=part.index if part else None,
        partitions=part.count if part else None,
        database=campaign.database(config),
        device=device_without_torch(),
        run_id=secrets.token_hex(8),
        huge=budget.huge or bool(config.getoption("diagfuzz_huge", False)),
        sequences=_sequences(config, budget.sequences),
        # One partition of a campaign judges them (partition 1), not every one.
        covering=bool(config.getoption("diagfuzz_covering", False))
        and (part is None or part.index == 1),
        resolved=False,
        asked_ops=asked_ops,
        asked_dtypes=asked_dtypes,
        budget=total,
        profile_shards=budget.shards,
        shards_given=shards_given,
    )
    if not with_impl:
        return plan
    try:
        return complete(plan)
    except PlanError as exc:
        raise pytest.UsageError(str(exc)) from exc


#: A worker's resolution of the plan, in its directory: ``{"plan": ...}`` or ``{"error": ...}``.
RESOLVED_FILE = "plan.json"


def write_resolved(worker_dir: Path, plan: RunPlan, error: str) -> None:
    """Leave ``complete``'s answer for the controller (written whole, then renamed)."""
    import json

    worker_dir.mkdir(parents=True, exist_ok=True)
    data = {"error": error} if error else {"plan": plan.to_dict()}
    partial = worker_dir / f".{RESOLVED_FILE}.{os.getpid()}"
    partial.write_text(json.dumps(data), encoding="utf-8")
    partial.replace(worker_dir / RESOLVED_FILE)


def read_resolved(worker_dir: Path) -> RunPlan | None:
    """The plan a worker completed (None where it wrote none); a usage error where it
    found the impl unusable."""
    import json

    try:
        data = json.loads((worker_dir / RESOLVED_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if "error" in data:
        raise pytest.UsageError(data["error"])
    return RunPlan.from_dict(data["plan"])


def device() -> str:
    """Where Cases run here: CUDA, or the CPU under Triton's interpreter (asks torch, not
    the kernels: no Triton import, no registration)."""
    from diagfuzz.core.runtime import DEVICE

    return DEVICE


def root_warning(config: pytest.Config) -> str:
    """'' when pytest's root is the current directory or above it; else a warning: a path
    option written with a space (``--diagfuzz-report /tmp/x.json``) makes pytest take the
    path's directory as its root, and the run directory would land there."""
    cwd = Path.cwd().resolve()
    root = Path(config.rootpath).resolve()
    if cwd == root or root in cwd.parents or getattr(config.option, "rootdir", None):
        return ""
    return (f"diagfuzz: warning: pytest's root is {root}, outside the current directory "
            f"{cwd}; run directories go to {root / '.diagfuzz'} unless --diagfuzz-root "
            "says otherwise. Give path options as --opt=PATH (with a space, pytest takes "
            "the path for a test path and picks its root from it).")


def _sequences(config: pytest.Config, profile: int) -> int:
    """--diagfuzz-sequences N, else the profile's (0: the sequence search does not run)."""
    asked = config.getoption("diagfuzz_sequences", None)
    return profile if asked is None else max(0, int(asked))
