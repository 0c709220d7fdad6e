"""Deliberately broken implementations: each is ``_base.Correct`` plus one realistic bug.

Every module exposes ``impl`` (so ``--impl tests.mutants.NAME:impl`` works) and a docstring
naming the bug class. ``tests/test_mutation.py`` fuzzes each one and requires the oracles to
catch it; ``MUTANTS`` lists them in that order.
"""

MUTANTS = (
    "ignores_grad_strides",
    "loses_negative_zero",
    "canonical_nan",
    "unwritten_last",
    "backward_assumes_zeroed",
    "noncontiguous_result",
    "missing_dim_error",
    "wrong_negative_offset",
    "swapped_dims",
    "off_by_one_length",
    "aliases_input",
    "wrong_dtype",
    "int32_wrap",
    "bool_bytes",
    "mutates_input",
    "silent_fallback",
    "overruns_buffer",
)
