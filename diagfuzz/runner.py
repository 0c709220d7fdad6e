"""Runners turn a Case into a Verdict. The suite talks to a Runner, never to oracles directly.

``InProcessRunner`` calls the oracles in this process. The isolation work adds a runner with
the same interface that runs each Case in a spawned executor process (crash/hang isolation).
"""

from __future__ import annotations

from typing import Any, Protocol

from diagfuzz import oracles
from diagfuzz.case import Case
from diagfuzz.impl import load_impl
from diagfuzz.verdict import Verdict


class Runner(Protocol):
    """Anything that runs a Case against the implementation under test."""

    def run(self, case: Case) -> Verdict: ...

    def close(self) -> None: ...


class InProcessRunner:
    """Runs the oracles in this process: fastest, but a crash takes the process down."""

    def __init__(self, impl_spec: str, device: str) -> None:
        self.impl_spec = impl_spec
        self.impl: Any = load_impl(impl_spec)
        self.device = device

    def run(self, case: Case) -> Verdict:
        return oracles.check(case, self.impl, self.device)

    def close(self) -> None:
        """Nothing to release."""
