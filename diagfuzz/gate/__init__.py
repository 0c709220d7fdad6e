"""``diagfuzz gate`` and the tools around it: stages, classification, outputs, ``diagfuzz
merge`` and the command line (reproducers and the corpus are the harness's and the core's)."""

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
    suite_command,
    suite_environment,
    suite_findings,
)

__all__ = [
    "BASELINE_IMPL", "COMPILE_TIMEOUT", "DEFAULT_BUDGET", "Finding", "Options", "Result",
    "Stage", "compile_cases", "distinct", "error_parity_cases", "exit_code",
    "report_coverage", "reproduce_command", "run_gate", "suite_command", "suite_environment",
    "suite_findings",
]
