"""Triton kernels for the diagonal family (``diagonal_copy``, ``diagonal_backward``,
``diag_embed``, ``diagonal_scatter``, ``triu``, ``tril``; ``diag`` reaches them through aten),
and their aten registration.

Importing this package chooses where kernels run (``_runtime`` must come first: it sets
TRITON_INTERPRET on machines without a CUDA GPU before any kernel is decorated).
"""

from diagfuzz.ops._runtime import DEVICE, DISPATCH_KEY, INTERPRET  # noqa: I001  (must be first)
from diagfuzz.core.runtime import check_import_order

check_import_order()

from diagfuzz.ops._counters import launches  # noqa: E402
from diagfuzz.ops.diag_embed import diag_embed, diag_embed_out  # noqa: E402
from diagfuzz.ops.diagonal_backward import diagonal_backward, diagonal_backward_out  # noqa: E402
from diagfuzz.ops.diagonal_copy import diagonal_copy, diagonal_copy_out  # noqa: E402
from diagfuzz.ops.diagonal_scatter import diagonal_scatter, diagonal_scatter_out  # noqa: E402
from diagfuzz.ops.registration import disable, enable, enabled, use_triton  # noqa: E402
from diagfuzz.ops.triangle import tril, tril_, tril_out, triu, triu_, triu_out  # noqa: E402

__all__ = [
    "DEVICE",
    "DISPATCH_KEY",
    "INTERPRET",
    "diag_embed",
    "diag_embed_out",
    "diagonal_backward",
    "diagonal_backward_out",
    "diagonal_copy",
    "diagonal_copy_out",
    "diagonal_scatter",
    "diagonal_scatter_out",
    "disable",
    "enable",
    "enabled",
    "launches",
    "tril",
    "tril_",
    "tril_out",
    "triu",
    "triu_",
    "triu_out",
    "use_triton",
]
