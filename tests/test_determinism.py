"""A seed draws the same Cases whatever local modules the process imported."""

from __future__ import annotations

import importlib
import subprocess
import sys
import textwrap
from pathlib import Path

from diagfuzz.adapters.hypothesis import pin_constant_pool

_DRAW = textwrap.dedent("""
    import hashlib
    import sys
    from hypothesis import HealthCheck, Phase, given, settings
    from diagfuzz.strategies import diagonal_backward_cases
    {pin}
    if {extra!r}:
        sys.path.insert(0, {extra!r})
        import extra_literals  # a local module full of integer literals
    drawn = []

    @settings(max_examples=150, derandomize=True, database=None, deadline=None,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(diagonal_backward_cases(max_elements=256))
    def draw(case):
        drawn.append(case.to_json())

    draw()
    print(hashlib.sha256("\\n".join(drawn).encode()).hexdigest())
""")


def _draw_hash(tmp_path: Path, *, pin: bool, extra: bool) -> str:
    module_dir = tmp_path / "mods"
    module_dir.mkdir(exist_ok=True)
    literals = ", ".join(str(n) for n in [3, 5, 7, 11, 13, 17, 19, 23, 29, 31, -2, -3, 2**31,
                                              63, 255, 4097, 1023, -129])
    (module_dir / "extra_literals.py").write_text(f"VALUES = [{literals}]\n")
    code = _DRAW.format(
        pin="from diagfuzz.adapters.hypothesis import pin_constant_pool; pin_constant_pool()"
        if pin else "", extra=str(module_dir) if extra else "")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=tmp_path)
    return out.stdout.strip()


def test_pinned_draws_do_not_depend_on_imported_modules(tmp_path) -> None:
    assert _draw_hash(tmp_path, pin=True, extra=False) == _draw_hash(tmp_path, pin=True,
                                                                     extra=True)


def test_unpinned_draws_do_depend_on_them(tmp_path) -> None:
    """The pin is what makes the test above pass: without it, importing a local module of
    literals changes the Cases a derandomized run draws."""
    assert _draw_hash(tmp_path, pin=False, extra=False) != _draw_hash(tmp_path, pin=False,
                                                                      extra=True)


def test_pin_is_in_force_for_this_hypothesis() -> None:
    assert pin_constant_pool() is True  # this Hypothesis has the pool, and it is pinned
    providers = importlib.import_module("hypothesis.internal.conjecture.providers")
    assert len(providers._get_local_constants()) == 0
