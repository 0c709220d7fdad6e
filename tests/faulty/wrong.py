"""Deterministically wrong: flips one result bit whenever offset > 0."""

from __future__ import annotations

from tests.faulty._base import Faulty, flip_first_bit


class Wrong(Faulty):
    def fault(self, result, offset):
        return flip_first_bit(result) if offset > 0 else result


impl = Wrong()
