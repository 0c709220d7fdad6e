"""``python -m diagfuzz`` and the ``diagfuzz`` console script (``diagfuzz.gate.cli``).

Why a module of its own: ``diagfuzz gate`` needs an executor of its own beside the fuzz
suite's, and the fork server it comes from imports torch and Triton for seconds. Started
here, before the command's own imports (torch among them), those imports run side by side.
"""

from __future__ import annotations

import sys

#: Arguments after which the gate runs no executor: no server to start.
_NO_EXECUTOR = {"-h", "--help", "--plan"}


def main(argv: list[str] | None = None) -> int:
    """The ``diagfuzz`` command; returns its exit code."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["gate"] and not _NO_EXECUTOR & set(args):
        from diagfuzz.execution import forkserver
        from diagfuzz.execution.stopbound import EarlyStop

        EarlyStop.install()  # a stop during start-up still ends with the gate's outputs
        forkserver.start_early()
    from diagfuzz.gate.cli import main as command

    code = command(argv)
    if argv is None and args[:1] == ["gate"]:
        exit_now(code)
    return code


def exit_now(code: int) -> None:
    """End the process as the interpreter would, less its finalisation: after a gate,
    tearing down torch's and Triton's modules takes 1.5 s on a 2-core CPU, and nothing
    of it is the gate's (its outputs are written, its children closed). Non-daemon threads
    are joined and the ``atexit`` functions run first, as at a normal exit."""
    import atexit
    import contextlib
    import os
    import threading

    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # closed: nothing left to say
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
