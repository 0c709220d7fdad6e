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
        # The gate's outputs are written and its children closed: the interpreter's
        # finalisation (torch, Triton) is left out (called with argv, it returns).
        from diagfuzz.core.exits import exit_now

        exit_now(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
