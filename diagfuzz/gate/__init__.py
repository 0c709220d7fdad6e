"""``diagfuzz gate`` and the tools around it: stages, classification, outputs, ``diagfuzz
merge`` and the command line (reproducers and the corpus are the harness's and the core's)."""

from diagfuzz.gate.stages import (
    BASELINE_IMPL,
    COMPILE_TIMEOUT,
    DEFAULT_BUDGET,
    EXIT_CLEAN,
    EXIT_CUT,
    EXIT_ERROR,
    EXIT_FAILURE,
    EXIT_FLAKY,
    EXIT_USAGE,
    Finding,
    Options,
    Result,
    Stage,
    compile_cases,
    distinct,
    error_parity_cases,
    exit_code,
    report_coverage,
    reproduce_command,
    run_gate,
    suite_command,
    suite_environment,
    suite_findings,
)

__all__ = [
    "BASELINE_IMPL", "COMPILE_TIMEOUT", "DEFAULT_BUDGET", "EXIT_CLEAN", "EXIT_CUT",
    "EXIT_ERROR", "EXIT_FAILURE", "EXIT_FLAKY", "EXIT_USAGE", "Finding", "Options", "Result",
    "Stage", "compile_cases", "distinct", "error_parity_cases", "exit_code",
    "report_coverage", "reproduce_command", "run_gate", "suite_command", "suite_environment",
    "suite_findings",
]
