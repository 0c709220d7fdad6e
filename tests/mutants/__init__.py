"""Deliberately broken implementations: each is ``_base.Correct`` plus one realistic bug.

Every module exposes ``impl`` (so ``--impl tests.mutants.NAME:impl`` works) and a docstring
naming the bug class. ``tests/test_mutation.py`` fuzzes each one on the streams of the ops
it breaks and requires the oracles to catch it there; ``MUTANTS`` lists them in that
order, each with those ops (the ops of ``diagfuzz.specs`` whose results or errors the bug
changes).
"""

_BOTH = ("diagonal", "diagonal_backward")
_TRIANGLES = ("triu", "tril")
_IN_PLACE = ("triu_", "tril_")

MUTANTS: dict[str, tuple[str, ...]] = {
    "ignores_grad_strides": ("diagonal_backward",),
    "loses_negative_zero": _BOTH,
    "canonical_nan": _BOTH,
    "unwritten_last": _BOTH,
    "backward_assumes_zeroed": ("diagonal_backward",),
    "noncontiguous_result": _BOTH,
    "missing_dim_error": _BOTH,
    "wrong_negative_offset": _BOTH,
    "swapped_dims": _BOTH,
    "off_by_one_length": _BOTH,
    "aliases_input": ("diagonal",),
    "wrong_dtype": _BOTH,
    "int32_wrap": _BOTH,
    "bool_bytes": _BOTH,
    "mutates_input": ("diagonal",),
    "silent_fallback": _BOTH,
    "overruns_buffer": _BOTH,
    "embed_negative_zero_fill": ("diag_embed",),
    "embed_unzeroed": ("diag_embed",),
    "embed_input_rank_dims": ("diag_embed",),
    "embed_signed_length": ("diag_embed",),
    "scatter_drops_storage_offset": ("diagonal_scatter",),
    "scatter_contiguous_result": ("diagonal_scatter",),
    "scatter_offset_magnitude": ("diagonal_scatter",),
    "scatter_broadcasts_src": ("diagonal_scatter",),
    "diag_negative_diagonal": ("diag", "diag_1d"),
    "diag_value_error": ("diag",),
    "diag_square_length": ("diag",),
    "diag_vector_unzeroed": ("diag_1d",),
    "triangle_mask_multiply": _TRIANGLES,
    "triangle_strict_diagonal": _TRIANGLES,
    "triangle_swapped": _TRIANGLES,
    "triangle_int32_diagonal": _TRIANGLES,
    "triangle_batch_strides": _TRIANGLES,
    "inplace_returns_copy": _IN_PLACE,
    "inplace_contiguous_copy": _IN_PLACE,
}
