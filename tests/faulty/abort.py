"""Aborts the whole process (SIGABRT, like a failed device assert) when offset == 1."""

from __future__ import annotations

import os

from tests.faulty._base import Faulty


class Abort(Faulty):
    def fault(self, result, offset):
        if offset == 1:
            os.abort()
        return result


impl = Abort()
