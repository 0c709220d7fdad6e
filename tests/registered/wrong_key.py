"""A registration that never serves a call: diagonal_copy registered at
CompositeExplicitAutograd, which aten's own CompositeExplicitAutogradNonFunctional kernel
outranks, so every call is aten's."""

from __future__ import annotations

import torch

from tests.registered import _kernels

LIB = torch.library.Library("aten", "IMPL")
LIB.impl("diagonal_copy", _kernels.diagonal_copy, "CompositeExplicitAutograd")
