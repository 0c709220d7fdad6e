"""A library that registers only when its switch is called (as FlagGems' ``enable()``)."""

from __future__ import annotations

import torch

from tests.registered import _kernels

LIB = torch.library.Library("aten", "IMPL")


def enable() -> None:
    LIB.impl("diag_embed", _kernels.diag_embed, "CPU")
