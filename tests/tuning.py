"""Tuning knobs changed for one test."""

from __future__ import annotations

import dataclasses

import pytest

from diagfuzz.ops import _tiling


def tune(monkeypatch: pytest.MonkeyPatch, **changes: int | bool) -> None:
    """``ops._tiling.TUNING`` with ``changes`` until the test ends (``monkeypatch`` restores
    it; the test's own plan caches keep its plans apart)."""
    monkeypatch.setattr(_tiling, "TUNING", dataclasses.replace(_tiling.TUNING, **changes))
