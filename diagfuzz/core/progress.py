"""Progress marks: the moments an executor's judging moves on (an implementation's call
begins or ends, a device synchronisation returns).

Why: a runner must tell a stuck call of the implementation from a long batch of quick ones.
The executor installs a ``Mark`` that records each moment where its runner can read it
(``diagfuzz.execution.beacon``); the runner times only the stretch since the last mark.
Without an installed mark (in-process judging, a reproducer), ``tick`` does nothing.
"""

from __future__ import annotations

from collections.abc import Callable


def _nothing() -> None:
    return None


_mark: Callable[[], None] = _nothing


def tick() -> None:
    """Judging moved on now."""
    _mark()


def install(mark: Callable[[], None] | None) -> None:
    """Call ``mark`` at every ``tick`` (None: nothing again)."""
    global _mark
    _mark = mark or _nothing
