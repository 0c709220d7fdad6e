"""FlagGems 5.0.2 through its adapter (``examples.flaggems``), with a kernel that never ends
launched first on every rank-4 input whose first dim is 3 (GPU only, as FlagGems)."""

from __future__ import annotations

from examples import flaggems
from tests.faulty.shape_fault import ShapeFault, _device_spin

impl = ShapeFault(_device_spin, base=flaggems.impl)
