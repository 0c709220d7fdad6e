"""Make a Hypothesis seed draw the same Cases whatever else the process imported.

Hypothesis (6.13x and later) mixes literals from every *local* module in ``sys.modules``
into its draws (``hypothesis.internal.conjecture.providers._get_local_constants``). Which
modules count as local depends on where they live: an editable install of diagfuzz or of the
impl under test is local, a wheel in site-packages is not, and a pytest worker holds whatever
test modules it happened to collect. So a derandomized gate or a ``--diagfuzz-seed`` rerun
drew other Cases on another install or worker (seen: a derandomized coverage test missed a
complex64 class only under xdist). diagfuzz's strategies draw boundary values on purpose, so
the constant pool adds little; ``pin_constant_pool`` empties it for the whole process.
"""

from __future__ import annotations

from typing import Any

_pinned = False


def pin_constant_pool() -> bool:
    """Stop Hypothesis drawing literals of imported local modules (idempotent).

    Returns whether this Hypothesis has the pool (False: nothing to pin, draws never
    depended on it). The pool is private Hypothesis API, hence the checks; a Hypothesis that
    renames it makes tests/test_determinism.py fail rather than silently reintroduce it.
    """
    global _pinned
    try:
        from hypothesis.internal.conjecture import providers
    except ImportError:  # pragma: no cover - a Hypothesis without the module
        return False
    if not hasattr(providers, "_get_local_constants"):
        return False
    if not _pinned:
        empty = providers.Constants()

        def no_local_constants() -> Any:
            return empty

        providers._get_local_constants = no_local_constants
        cache = getattr(providers, "CONSTANTS_CACHE", None)
        if cache is not None and hasattr(cache, "cache"):
            cache.cache.clear()  # pools computed before the pin held local constants
        _pinned = True
    return True
