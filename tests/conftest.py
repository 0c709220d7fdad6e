"""Test-suite wide setup."""

from __future__ import annotations

import dataclasses
import itertools
import os
import sys
import tempfile
from pathlib import Path

# No torch at import: pytest imports this file early (``testpaths``) in every pytest run in
# the repository root, the README's fuzz command included, before any plugin's configure, and
# a fuzz worker launches its executors in its configure (torch's import cost 4 s there on an
# H200 host).


def _cache_bytecode() -> None:
    """Where the environment forbids writing bytecode (``PYTHONDONTWRITEBYTECODE``), cache
    it outside the tree instead (``PYTHONPYCACHEPREFIX``, a directory under the system's
    temporary directory unless one is set), for this process and every process it starts.

    The suite starts hundreds of Python processes (xdist workers, gates, fuzz runs, their
    executors, reproducers). Without a cache each one compiles every module of diagfuzz
    and the tests it imports from source, and each pytest among them rewrites the asserts
    of diagfuzz, Hypothesis and xdist (pytest plugins, rewritten whole) again: 1.5 CPU-s a
    pytest start on this 2-CPU machine, and about a fifth of the CPU time of the fuzz-run
    tests (tests/test_suite_run.py and tests/test_families_suite.py, -n 2: 167 CPU-s
    without a cache, 130 with one written from empty). Nothing is written into the tree;
    what is compiled is what runs, checked against its source as Python always does."""
    if not sys.dont_write_bytecode:
        return
    prefix = os.environ.get("PYTHONPYCACHEPREFIX") or str(
        Path(tempfile.gettempdir()) / f"diagfuzz-tests-pycache-{os.getuid()}")
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = prefix
    sys.pycache_prefix = prefix
    sys.dont_write_bytecode = False


_cache_bytecode()  # before xdist starts its workers: they and their children inherit it


#: The tests of 20 s or more on CI's 2 CPUs (``--durations``), longest first, each a whole
#: gate, fuzz run or executor of its own (none shares a module-scoped fixture with the
#: tests around it). pytest-xdist's worksteal hands each worker a contiguous part of the
#: collection, and an idle worker takes queued tests from the end of a busy one's queue
#: (never its last two): these open each worker's part, dealt in turn, so both queues end
#: on short tests and the run does not end on one of these beside an idle CPU.
LONG_FIRST = (
    "test_gate_end_to_end.py::test_correct_impl_passes_every_stage",
    "test_real_targets.py::test_plain_pytorch_passes_the_default_gate",
    "test_evidence_anywhere.py::test_reproducers_and_corpus_files_run_from_another_directory",
    "test_gate_history.py::test_a_polluted_op_is_one_deterministic_finding_with_its_polluter",
    "test_gate_hang_bound.py::test_a_common_shape_hang_costs_the_gate_seconds_not_hours",
    "test_suite_history_check.py::"
    "test_a_finding_that_passes_alone_gets_a_reproducer_that_replays_its_polluter",
    "test_suite_sequences.py::"
    "test_a_state_bug_is_found_by_the_suite_and_its_reproducer_replays_what_came_before",
    "test_families_suite.py::test_the_case_budget_holds_with_families",
    # Both take the shared run of tests.shared_runs (pipelined_wrong_run): one worker, in turn.
    "test_pipeline_suite.py::test_phase_one_finds_phase_two_shrinks_as_the_synchronous_mode",
    "test_fanout_suite.py::test_two_executors_find_and_shrink_like_one",
    "test_suite_hang_shrink.py::test_a_confirmed_hang_is_kept_as_found_not_shrunk_into_its_stalls",
    "test_suite_run.py::test_wrong_impl_fails_with_its_shrunk_case_the_same_on_every_run",
    "test_gate_causes.py::test_one_finding_per_cause_over_dtypes_classes_and_stages",
    "test_real_targets.py::test_integers_beyond_int64_reach_the_gate",
    "test_huge_tier.py::test_the_suite_runs_the_tier_on_request_and_reports_the_planted_bug",
    "test_real_targets.py::test_three_independent_bugs_are_three_findings_of_one_run",
    "test_opinfo.py::test_the_gate_stage_reports_a_finding_with_a_failing_reproducer",
    "test_suite_history_check.py::test_with_the_check_off_the_reproducer_runs_the_case_alone",
    "test_real_targets.py::test_impl_and_reproducer_from_the_users_own_directory",
    "test_campaign_partition.py::test_two_partitions_merge_into_the_whole_run",
    "test_real_targets.py::test_integers_beyond_int32_and_int64_reach_the_report[2]",
    "test_gate_end_to_end.py::test_deterministic_bug_exits_1_with_a_failing_reproducer",
    "test_gate_pool.py::test_one_or_two_stage_executors_judge_the_same_findings_and_counts",
    "test_covering_bugs.py::test_suite_judges_the_covering_cases_before_drawing_with_the_option",
    "test_huge_tier.py::test_gate_huge_finds_the_planted_narrow_index_with_reproducers",
    "test_suite_run.py::test_an_oracle_error_stops_its_shard_and_no_other",
    "test_rundirs.py::test_two_fuzz_runs_with_one_seed_keep_each_ones_reproducers",
    "test_suite_run.py::test_dead_worker_is_attributed_to_its_case",
    "test_stop_bound.py::"
    "test_a_gate_stuck_in_its_impl_import_and_children_that_ignore_sigterm_ends",
    "test_stop_bound.py::test_a_stop_sent_to_the_whole_group_while_spares_start_ends_as_fast",
    "test_gate_stop.py::test_sigterm_writes_what_finished_and_keeps_the_last_runs_reproducers",
    "test_families_suite.py::test_an_int8_bug_is_reported_as_its_small_failing_member",
    "test_plugin_workers.py::test_each_worker_gets_one_gpu_the_runs_cache_and_its_own_database",
    "test_real_targets.py::test_integers_beyond_int32_and_int64_reach_the_report[0]",
    "test_family_fuzz.py::test_the_ops_streams_pass[diagonal_scatter-diagfuzz.impl:triton_aten]",
    "test_real_targets.py::test_a_planted_bug_in_plain_pytorch_is_its_finding",
    "test_suite_run.py::test_two_workers_aggregate_every_case",
    "test_hang_bounds.py::test_every_case_of_one_op_hanging_costs_each_a_short_allowance",
    "test_forkserver.py::test_a_server_that_must_not_fork_spawns_each_executor",
    "test_real_targets.py::test_progress_shows_cases_findings_and_pace",
    "test_stop_bound.py::test_a_fuzz_run_whose_worker_never_returns_ends_within_the_bound",
    "test_huge_tier.py::test_the_tier_is_the_nightly_profiles_and_skips_without_a_gpu",
    "test_crash_shrink.py::test_crash_shrinks_like_a_mismatch",
    "test_gate_end_to_end.py::test_flaky_bug_exits_2_with_k_of_r",
)


def pytest_collection_modifyitems(config, items) -> None:
    """Each xdist worker's part of the collection (worksteal's split: the k-th of W parts
    holds (n - earlier parts) // (W - k) tests) opens with every W-th test of
    ``LONG_FIRST``; the other tests keep their collection order. The same order on every
    worker, as xdist requires; without xdist, ``LONG_FIRST`` first."""
    rank = {f"tests/{test}": i for i, test in enumerate(LONG_FIRST)}
    long = sorted((item for item in items if item.nodeid in rank),
                  key=lambda item: rank[item.nodeid])
    rest = iter([item for item in items if item.nodeid not in rank])
    workers = int(getattr(config, "workerinput", {}).get("workercount", 1))
    ordered, left = [], len(items)
    for k in range(workers):
        size = left // (workers - k)
        left -= size
        part = long[k::workers]
        ordered += part + list(itertools.islice(rest, max(0, size - len(part))))
    items[:] = [*ordered, *rest]


def pytest_configure(config) -> None:
    from diagfuzz.adapters.hypothesis import pin_constant_pool

    # Derandomized tests must draw the same examples on every xdist worker, whatever test
    # modules it collected (diagfuzz/determinism.py).
    pin_constant_pool()
    if hasattr(config, "workerinput") or not config.getoption("numprocesses", None):
        _skip_dead_overflow_checks()  # where kernels run: not in an xdist controller


def _skip_dead_overflow_checks() -> None:
    """Triton's interpreter, with its default options (debug off), computes an int64 copy of
    every int32 add, sub and mul of a kernel and the bounds check on it
    (``sanitize_overflow``), then hands the check to ``device_assert``, which returns at once
    without debug: nothing is ever checked or raised, the work is thrown away. It was over
    half of a small-block kernel test's time (test_kernel_blocks.py: 68 s, 26 s without).
    Turned off only while debug is off, i.e. only where it checks nothing; with debug on it
    stays as Triton sets it (tests/test_interpreter_options.py checks both)."""
    from diagfuzz.core import runtime

    if not runtime.INTERPRET or runtime.COMPILE_ONLY:
        return
    from triton.runtime import interpreter

    builder = interpreter.interpreter_builder
    if not builder.options.debug:
        builder.options = dataclasses.replace(builder.options, sanitize_overflow=False)
