"""Oracles: decide pass or fail for one Case, bitwise, as a Verdict value.

``check(case, impl, device) -> Verdict`` is the entry point every runner calls: error parity
for invalid Cases; otherwise references on the CPU (torch.autograd or aten, plus an
independent index-arithmetic reference) and aten's kernel on the device, sentinel-filled
guarded allocations (unwritten and out-of-bounds writes), metadata and aliasing, raw bits,
metamorphic relations and the dispatch proof. Only ``checks.device_side`` touches the
device (one copy there, one back); the judgement runs on host copies (see checks.py).
``check_compile`` is torch.compile parity for a sample of Cases (slow: inductor
compiles). ``check_huge`` judges the huge tier's Cases (past 2**31 elements) on the
device, in chunks (huge.py). ``check_batch`` is ``check`` for a batch of Cases, paying the
per-Case fixed costs once (batch.py). ``check_registration`` audits how a library
registers an op into aten (registration.py); it and ``check_compile`` name the registration
that dropped a gradient (decomposition.py), on which that finding is keyed.

Every oracle judges inside ``diagfuzz.core.dispatch.aten_only``: references, copies and
comparisons run aten's own kernels whatever a library registered, and only the call of the
implementation (``reference.call_op``) runs under the library's registrations.
"""

from diagfuzz.oracles.batch import check_batch
from diagfuzz.oracles.checks import check, check_error_parity, check_valid
from diagfuzz.oracles.compile import check_compile
from diagfuzz.oracles.huge import check_huge
from diagfuzz.oracles.registration import check_registration

#: Oracles that judge a batch of Cases at once (``diagfuzz.execution.child``): name -> the
#: batch function, whose verdicts equal the single one's. Runners know the names as
#: ``diagfuzz.execution.messages.BATCHED_ORACLES`` (they import no torch).
BATCHED = {"check": check_batch}

__all__ = ["BATCHED", "check", "check_batch", "check_compile", "check_error_parity",
           "check_huge", "check_registration", "check_valid"]
