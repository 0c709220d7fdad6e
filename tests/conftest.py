"""Test-suite wide setup."""

from __future__ import annotations

from diagfuzz.adapters.hypothesis import pin_constant_pool


def pytest_configure(config) -> None:
    # Derandomized tests must draw the same examples on every xdist worker, whatever test
    # modules it collected (diagfuzz/determinism.py).
    pin_constant_pool()
