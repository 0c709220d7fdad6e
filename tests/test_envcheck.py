"""tools/dev's environment step (tools/envcheck.py): which torch .venv uses.

The decision is tested on injected facts; the end-to-end tests run tools/dev itself (dry
run: it makes the venv, installs nothing) against a parent venv holding fake packages, with
pip cut off from every index, so any attempt to install torch fails the test.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("envcheck", REPO / "tools" / "envcheck.py")
envcheck = importlib.util.module_from_spec(_spec)
sys.modules["envcheck"] = envcheck  # dataclasses look their module up
_spec.loader.exec_module(envcheck)

SITE = "/opt/torch/.venv/lib/python3.12/site-packages"


def facts(torch_version=None, override=None, entry=SITE):
    torch = envcheck.Torch(torch_version, entry) if torch_version else None
    return envcheck.Facts(python="/opt/torch/.venv/bin/python", torch=torch,
                          site_dirs=(SITE,), override=override)


def test_supported_range_is_pyprojects():
    text = (REPO / "pyproject.toml").read_text()
    assert f'"{envcheck.SUPPORTED_TEXT}"' in text
    bounds = re.fullmatch(r"torch>=(\d+\.\d+),<(\d+\.\d+)", envcheck.SUPPORTED_TEXT).groups()
    got = tuple(tuple(int(p) for p in bound.split(".")) for bound in bounds)
    assert got == envcheck.SUPPORTED


@pytest.mark.parametrize(("version", "ok"), [
    ("2.11.0", True), ("2.11.0+cu128", True), ("2.12.1", True), ("2.13.0+cpu", True),
    ("2.13.0.dev20260101", True), ("2.11.1rc1", True), ("2.11", True),
    ("2.10.1", False), ("2.11.0a0+git1234", False), ("2.11.0.dev20250101", False),
    ("2.14.0", False), ("2.14.0a0", False), ("3.0.0", False), ("1.13.1", False),
])
def test_supported(version, ok):
    assert envcheck.supported(version) is ok


def test_no_torch_gets_the_pinned_cpu_build():
    plan = envcheck.decide(facts())
    assert (plan.mode, plan.torch_spec) == ("install", "torch==2.13.0")


@pytest.mark.parametrize("version", ["2.11.0+cu128", "2.13.0+cpu"])
def test_torch_in_range_is_reused_never_installed(version):
    plan = envcheck.decide(facts(version))
    assert plan.mode == "reuse" and plan.torch_spec is None
    assert plan.torch.version == version and plan.site_dirs == (SITE,)


def test_torch_out_of_range_stops_with_what_to_do():
    with pytest.raises(envcheck.EnvError) as e:
        envcheck.decide(facts("2.9.1+cu126"))
    msg = str(e.value)
    for part in ("2.9.1+cu126", SITE, "torch>=2.11,<2.14", "PYTHON=", "DIAGFUZZ_TORCH="):
        assert part in msg


@pytest.mark.parametrize("version", [None, "2.11.0", "2.9.0"])
def test_diagfuzz_torch_installs_into_an_isolated_venv(version):
    plan = envcheck.decide(facts(version, override="torch==2.12.0"))
    assert (plan.mode, plan.torch_spec, plan.site_dirs) == ("install", "torch==2.12.0", ())


def test_site_dirs_keep_the_parents_order_once_each(tmp_path):
    a, b, c = (str(tmp_path / n) for n in "abc")
    got = envcheck.ordered_site_dirs(["", "/usr/lib/python3.12", b, a, b + "/", c],
                                     candidates=[a, b, str(tmp_path / "missing")])
    assert got == (b, a)


# ---- end to end: tools/dev against a parent venv with fake packages ----

def fake_parent(root: Path, torch_version: str, others=envcheck.DEPS[1:]) -> tuple[Path, Path]:
    """A real venv (no pip: quick) whose site-packages holds a fake torch (CUDA available)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    py = root / "bin" / "python"
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()"
                                "['purelib'])"], capture_output=True, text=True,
                               check=True).stdout.strip())
    torch = site / "torch"
    torch.mkdir()
    (torch / "__init__.py").write_text(
        "from torch.version import __version__\nfrom torch import cuda\n")
    (torch / "version.py").write_text(f"__version__ = {torch_version!r}\n")
    (torch / "cuda.py").write_text("def is_available():\n    return True\n")
    for name in others:
        (site / name).mkdir()
        (site / name / "__init__.py").write_text("")
    return py, torch / "__init__.py"


def dev(parent: Path, venv: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PIP_", "DIAGFUZZ_", "PYTHON", "VIRTUAL_ENV"))}
    # pip may reach no index and no wheel directory: installing torch would fail.
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1", PYTHON=str(parent),
               DIAGFUZZ_VENV=str(venv), DIAGFUZZ_DEV_DRYRUN="1")
    return subprocess.run([str(REPO / "tools" / "dev"), *args], env=env, capture_output=True,
                          text=True, timeout=120)


def test_dev_reuses_a_parent_venvs_torch_venv_in_venv(tmp_path):
    parent, fake_torch = fake_parent(tmp_path / "parent", "2.11.0+cu128")
    venv = tmp_path / "child"
    out = dev(parent, venv, "fuzz", "-x")
    log = out.stdout + out.stderr
    assert out.returncode == 0, log
    assert "installing" not in log and not re.search(r"pip install\b.* torch", log), log
    assert "--no-deps --no-build-isolation -e" in log, log
    assert re.search(r"would run: \S+/child/bin/python -m pytest -n auto -p diagfuzz "
                     r"--pyargs diagfuzz.suite -x", log), log
    got = subprocess.run(
        [str(venv / "bin" / "python"), "-c",
         "import torch; print(torch.__version__, torch.cuda.is_available(), torch.__file__)"],
        capture_output=True, text=True, check=True).stdout.split()
    assert got[:2] == ["2.11.0+cu128", "True"]
    assert Path(got[2]).resolve() == fake_torch.resolve()
    # The README's `pytest` after `source .venv/bin/activate` is .venv's own script, run by
    # .venv's interpreter (the parent's pytest script would run the parent, without diagfuzz).
    (fake_torch.parents[1] / "pytest" / "__init__.py").write_text(
        "import sys\ndef console_main():\n    print(sys.prefix)\n    return 0\n")
    ran = subprocess.run([str(venv / "bin" / "pytest")], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert Path(ran).resolve() == venv.resolve()

    # A venv made from that venv (a third level) still sees the same torch.
    grandchild = tmp_path / "grandchild"
    out = dev(venv / "bin" / "python", grandchild, "test")
    assert out.returncode == 0, out.stdout + out.stderr
    got = subprocess.run([str(grandchild / "bin" / "python"), "-c",
                          "import torch; print(torch.__file__)"],
                         capture_output=True, text=True, check=True).stdout.strip()
    assert Path(got).resolve() == fake_torch.resolve()

    # Run again: the venv fits, so it is neither made again nor reported.
    out = dev(parent, venv, "test")
    assert out.returncode == 0 and "made" not in out.stderr, out.stderr


def test_dev_run_from_the_activated_venv_keeps_it(tmp_path):
    """After the README's `source .venv/bin/activate`, `python3` is .venv's own interpreter:
    tools/dev plans with the interpreter that made .venv, so .venv stays as it is (planning
    from .venv's own would remake .venv and remove the interpreter doing it)."""
    parent, fake_torch = fake_parent(tmp_path / "parent", "2.11.0+cu128")
    venv = tmp_path / "child"
    assert dev(parent, venv, "env").returncode == 0
    marker = (venv / envcheck.MARKER).read_text()
    out = dev(venv / "bin" / "python", venv, "test")
    log = out.stdout + out.stderr
    assert out.returncode == 0, log
    assert "own interpreter: planning with" in log and "making" not in log, log
    assert (venv / envcheck.MARKER).read_text() == marker
    got = subprocess.run([str(venv / "bin" / "python"), "-c",
                          "import torch; print(torch.__file__)"],
                         capture_output=True, text=True, check=True).stdout.strip()
    assert Path(got).resolve() == fake_torch.resolve()


def test_dev_with_missing_deps_pins_the_parents_torch(tmp_path):
    parent, _ = fake_parent(tmp_path / "parent", "2.13.0+cpu", others=("numpy",))
    out = dev(parent, tmp_path / "child", "test")
    log = out.stdout + out.stderr
    assert out.returncode == 0, log
    assert re.search(r"would run: .*pip install .* -c \S+ -e \S+\[dev\]", log), log
    assert (tmp_path / "child" / envcheck.CONSTRAINTS).read_text() == "torch==2.13.0+cpu\n"


def test_dev_stops_on_a_torch_outside_the_range(tmp_path):
    parent, _ = fake_parent(tmp_path / "parent", "2.9.1+cu126", others=())
    out = dev(parent, tmp_path / "child", "fuzz")
    assert out.returncode == 3, out.stdout + out.stderr
    assert "torch 2.9.1+cu126" in out.stderr and "DIAGFUZZ_TORCH=" in out.stderr
    assert not (tmp_path / "child").exists()


def test_a_reinstall_drops_a_stale_egg_info_from_the_project_root(tmp_path):
    stale = tmp_path / "diagfuzz.egg-info"
    stale.mkdir()
    (stale / "entry_points.txt").write_text("[pytest11]\ndiagfuzz = diagfuzz.plugin\n")
    (tmp_path / "keep.txt").write_text("x")
    envcheck.drop_stale_metadata(tmp_path)
    assert not stale.exists() and (tmp_path / "keep.txt").exists()


@pytest.mark.parametrize(("deps_present", "last", "mode"), [
    (True, "", "no-deps"),  # an offline GPU machine's python3 holds every dependency
    (True, "no-deps", "no-deps"),  # ... and still has no index to reach on a reinstall
    (False, "", "dev"),
    (False, "no-deps", "dev"),
    # A venv installed with its extras, every dependency now present: a reinstall (after
    # pyproject.toml changed) installs the extras again, so one added since is installed.
    (True, "dev", "dev"),
])
def test_a_reinstall_keeps_the_install_mode(deps_present, last, mode):
    assert envcheck.install_mode(deps_present, last) == mode
