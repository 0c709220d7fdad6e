"""Exit codes: one table for every diagfuzz command and the pytest plugin.

The help epilogs, the README and docs/options.md are made from or tested against this
table (``tests/test_docs_truth.py``), so a code means the same thing wherever it is read.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import textwrap
import threading
from collections.abc import Callable
from enum import IntEnum


class ExitCode(IntEnum):
    """What a diagfuzz process's exit status says."""

    CLEAN = 0
    FAILURE = 1
    FLAKY = 2
    ERROR = 3
    USAGE = 4
    CUT = 6
    STOPPED = 7


#: One line per code: what it means, and which commands give it. A usage error is anything
#: the user can fix in the command line before anything runs, an ``--impl`` that does not
#: import included (pytest's own bad-option code is 4 too).
MEANING: dict[ExitCode, str] = {
    ExitCode.CLEAN: "clean: nothing failed (repro, replay: the Case passes)",
    ExitCode.FAILURE: "a deterministic or unclassified failure (repro, replay: the bug is "
                      "there)",
    ExitCode.FLAKY: "only flaky failures (gate, and merge of gate reports)",
    ExitCode.ERROR: "could not run: an infrastructure error (an executor that cannot start, "
                    "a stage that broke, reports that are not one campaign, a stage "
                    "--require-stages asks for that this machine cannot run, an impl whose "
                    "loading changed aten's own references)",
    ExitCode.USAGE: "usage error: a bad option or argument, an --impl that does not import; "
                    "nothing ran",
    ExitCode.CUT: "cut by --max-seconds (--diagfuzz-max-seconds), nothing failed in what ran",
    ExitCode.STOPPED: "stopped by SIGTERM or SIGINT, nothing failed in what finished; the "
                      "report, JUnit and summary hold what finished",
}


def table(width: int = 88) -> str:
    """The exit codes as the ``--help`` epilog prints them (one entry per code, wrapped)."""
    lines = ["exit codes:"]
    for code in ExitCode:
        lines += textwrap.wrap(MEANING[code], width, initial_indent=f"  {int(code)}  ",
                               subsequent_indent="     ")
    return "\n".join(lines)


def markdown_table() -> str:
    """The exit codes as a markdown table (README, docs/options.md quote it)."""
    rows = ["| exit | meaning |", "| ---: | --- |"]
    rows += [f"| {int(code)} | {MEANING[code]} |" for code in ExitCode]
    return "\n".join(rows)


def exit_now(code: int) -> None:
    """End the process as the interpreter would, less its finalisation: tearing down torch's
    and Triton's modules (and collecting their objects) takes 1 to 1.5 s on a 2-core CPU,
    and nothing of it is diagfuzz's. Non-daemon threads are joined, the ``atexit`` functions
    run and the standard streams are flushed first, as at a normal exit."""
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # closed: nothing left to say
            stream.flush()
    os._exit(code)


def exit_now_at_shutdown(code: int, when: Callable[[], bool]) -> bool:
    """Have this process end with ``exit_now(code)`` once its main thread is done, if
    ``when()`` holds then; returns whether that was arranged.

    Through threading's exit hooks (``threading._register_atexit``): the interpreter calls
    them, last registered first, when the main thread is done and before it joins the
    non-daemon threads and calls the ``atexit`` functions, which ``exit_now`` then does in
    that order. Arranged only while no other hook is registered, so that this one comes last
    (``concurrent.futures`` registers one that stops its pools' threads, which the join
    needs first), and only where the hooks exist (CPython 3.9 on)."""
    hooks = getattr(threading, "_threading_atexits", None)
    register = getattr(threading, "_register_atexit", None)
    if not isinstance(hooks, list) or hooks or register is None:
        return False

    def at_shutdown() -> None:
        if when():
            exit_now(code)

    register(at_shutdown)
    return True
