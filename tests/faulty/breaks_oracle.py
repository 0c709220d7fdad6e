"""Returns, whenever offset == 1, a tensor subclass that raises on every torch call: the
oracle itself raises on such a result (a harness error, not a verdict), with other Cases in
flight in the pipelined runner."""

from __future__ import annotations

import torch

from tests.faulty._base import Faulty


class Unreadable(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        raise RuntimeError(f"tests.faulty.breaks_oracle: {getattr(func, '__name__', func)}")


class BreaksOracle(Faulty):
    def fault(self, result, offset):
        return result.as_subclass(Unreadable) if offset == 1 else result


impl = BreaksOracle()
