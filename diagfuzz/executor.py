"""Where reproducers find the executor: ``diagfuzz.execution.parent``'s runner."""

from diagfuzz.execution.parent import (
    DEFAULT_TIMEOUT,
    ExecutorError,
    ProcessRunner,
    default_timeout,
)

__all__ = ["DEFAULT_TIMEOUT", "ExecutorError", "ProcessRunner", "default_timeout"]
