"""``diagfuzz gate`` and the tools around it: stages, classification, outputs, ``diagfuzz
merge`` and the command line (reproducers and the corpus are the harness's and the core's).

The public names load their modules on first use: ``diagfuzz gate`` parses its options and
starts the fuzz suite before anything imports torch (``diagfuzz.gate.suite``), and the stages
import it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from diagfuzz.gate.options import DEFAULT_BUDGET, Options
    from diagfuzz.gate.run import Result, distinct, exit_code, reproduce_command, run_gate
    from diagfuzz.gate.stages import (
        BASELINE_IMPL,
        COMPILE_TIMEOUT,
        Finding,
        Stage,
        compile_cases,
        error_parity_cases,
        report_coverage,
        suite_findings,
    )
    from diagfuzz.gate.suite import suite_command, suite_environment

_HOMES = {
    "DEFAULT_BUDGET": "options", "Options": "options",
    "Result": "run", "distinct": "run", "exit_code": "run", "reproduce_command": "run",
    "run_gate": "run",
    "BASELINE_IMPL": "stages", "COMPILE_TIMEOUT": "stages", "Finding": "stages",
    "Stage": "stages", "compile_cases": "stages", "error_parity_cases": "stages",
    "report_coverage": "stages", "suite_findings": "stages",
    "suite_command": "suite", "suite_environment": "suite",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'diagfuzz.gate' has no attribute {name!r}")
    return getattr(importlib.import_module(f"diagfuzz.gate.{home}"), name)


__all__ = [
    "BASELINE_IMPL", "COMPILE_TIMEOUT", "DEFAULT_BUDGET", "Finding", "Options", "Result",
    "Stage", "compile_cases", "distinct", "error_parity_cases", "exit_code",
    "report_coverage", "reproduce_command", "run_gate", "suite_command", "suite_environment",
    "suite_findings",
]
