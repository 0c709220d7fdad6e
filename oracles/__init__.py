"""Oracles: decide pass or fail for one Case, bitwise, as a Verdict value.

``check(case, impl, device) -> Verdict`` is the entry point every runner calls: error parity
for invalid Cases; otherwise references (torch.autograd or aten with the registration off,
plus an independent index-arithmetic reference, plus CPU on CUDA), sentinel-filled guarded
allocations (unwritten and out-of-bounds writes), metadata and aliasing, raw bits,
metamorphic relations and the dispatch proof. ``check_compile`` is torch.compile parity for
a sample of Cases (slow: inductor compiles).
"""

from diagfuzz.oracles.checks import check, check_error_parity, check_valid
from diagfuzz.oracles.compile import check_compile

__all__ = ["check", "check_compile", "check_error_parity", "check_valid"]
