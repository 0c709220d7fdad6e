"""tools/dev's environment step: which torch `.venv` gets, and making `.venv` so.

tools/dev runs this file with the user's interpreter (PYTHON, default python3), called the
parent here. It only reads the parent; everything it writes lies under the venv directory.

  DIAGFUZZ_TORCH set       .venv is isolated and pip installs that torch (a download)
  parent has torch in      .venv reuses it: a plain venv whose .pth file adds the parent's
  SUPPORTED                site directories (site.addsitedir, in the parent's sys.path
                           order), so it sees exactly the parent's packages, whether the
                           parent is a plain interpreter, a venv (venv in venv) or a conda
                           environment; pip runs with a constraint that pins the parent's
                           torch, so it never fetches another
  parent has other torch   an error that names it and the ways out; nothing is installed
  parent has no torch      .venv is isolated and gets the CPU build (DEFAULT_TORCH)

With every dependency importable in .venv diagfuzz installs with --no-deps
--no-build-isolation (an offline GPU machine); else `pip install -e .[dev]`. Which of the two
ran is kept in .venv, and a reinstall (pyproject.toml changed) repeats it: a .venv installed
with its dev extras gets the extras pyproject.toml adds later. A marker file
in .venv records the choice; when the choice changes (another PYTHON, DIAGFUZZ_TORCH, the
parent's torch) .venv is made again. `--dry-run` makes .venv without pip and prints the
install commands instead of running them.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import re
import shutil
import site
import subprocess
import sys
import sysconfig
from pathlib import Path

SUPPORTED = ((2, 11), (2, 14))  # torch>=2.11,<2.14, as pyproject.toml states
SUPPORTED_TEXT = "torch>=2.11,<2.14"
DEFAULT_TORCH = "torch==2.13.0"  # the CPU build (this machine's pip finds it on disk)
DEPS = ("torch", "triton", "hypothesis", "pytest", "xdist", "numpy", "setuptools")
#: Dependencies an install from the parent's packages may go without, saying so: the
#: GPU machines' image has no expecttest and no index to fetch it from (the gate then
#: names the OpInfo stage as not run in its headline).
SOFT_DEPS = ("expecttest",)
#: The dev extras' modules (pyproject.toml's ``dev``): an offline install goes without them.
DEV_MODULES = ("ruff", "mypy", "redis", "importlinter")
MARKER = ".diagfuzz-env.json"
STAMP = ".diagfuzz-installed"
PTH = "diagfuzz-parent-site.pth"
CONSTRAINTS = ".diagfuzz-constraints.txt"
#: Console scripts the README runs from an activated .venv, with their entry points. A venv
#: that reuses the parent's packages gets none from pip (they are installed already, in
#: the parent), and the parent's own `pytest` runs the parent's interpreter, which lacks
#: diagfuzz; so .venv gets its own.
REUSED_SCRIPTS = {"pytest": ("pytest", "console_main")}


class EnvError(Exception):
    """What is wrong and what to do; tools/dev prints it and stops."""


def parse_version(text: str) -> tuple[tuple[int, ...], bool]:
    """(release, is_prerelease) of a PEP 440 version; the local label (+cu128) is ignored."""
    m = re.match(r"\s*v?(\d+(?:\.\d+)*)(.*)$", text.split("+", 1)[0])
    if not m:
        raise ValueError(f"not a version: {text!r}")
    release = tuple(int(p) for p in m.group(1).split("."))
    return release, bool(re.search(r"(a|b|c|rc|alpha|beta|pre|preview|dev)\d*", m.group(2)))


def supported(text: str) -> bool:
    """Whether torch `text` satisfies SUPPORTED (a pre-release of the lower bound does not)."""
    release, pre = parse_version(text)
    release = (*release, 0, 0, 0)[:3]
    low, high = ((*bound, 0) for bound in SUPPORTED)
    if release < low or (release == low and pre):
        return False
    return release < high


@dataclasses.dataclass(frozen=True)
class Torch:
    version: str
    entry: str  # the sys.path entry that holds the torch package


@dataclasses.dataclass(frozen=True)
class Facts:
    python: str  # the parent interpreter, as invoked (a venv's python is not resolved)
    torch: Torch | None
    site_dirs: tuple[str, ...]  # the parent's site directories, in its sys.path order
    override: str | None  # DIAGFUZZ_TORCH


@dataclasses.dataclass(frozen=True)
class Plan:
    mode: str  # "reuse" (the parent's torch) or "install" (pip installs torch_spec)
    torch_spec: str | None = None
    torch: Torch | None = None
    site_dirs: tuple[str, ...] = ()
    note: str = ""

    def key(self, python: str, dry_run: bool) -> dict:
        return {
            "python": python,
            "mode": self.mode,
            "torch_spec": self.torch_spec,
            "torch": dataclasses.asdict(self.torch) if self.torch else None,
            "site_dirs": list(self.site_dirs),
            "dry_run": dry_run,
        }


def decide(facts: Facts) -> Plan:
    """The plan for .venv from facts about the parent (pure: no I/O)."""
    if facts.override:
        what = f"torch {facts.torch.version} at {facts.torch.entry}" if facts.torch else "no torch"
        return Plan("install", torch_spec=facts.override,
                    note=f"DIAGFUZZ_TORCH={facts.override}: an isolated .venv gets it "
                         f"({facts.python} has {what})")
    if facts.torch is None:
        return Plan("install", torch_spec=DEFAULT_TORCH,
                    note=f"{facts.python} has no torch: .venv gets the CPU build")
    if not supported(facts.torch.version):
        raise EnvError(
            f"{facts.python} has torch {facts.torch.version} (in {facts.torch.entry}), outside "
            f"diagfuzz's supported range {SUPPORTED_TEXT}; tools/dev does not install a second "
            f"torch beside it. Either run with an interpreter whose torch is in range "
            f"(PYTHON=/path/to/python3 tools/dev ...), or set DIAGFUZZ_TORCH to a torch to "
            f"install into an isolated .venv (e.g. DIAGFUZZ_TORCH={DEFAULT_TORCH}, the CPU "
            f"build; pip downloads it).")
    return Plan("reuse", torch=facts.torch, site_dirs=facts.site_dirs,
                note=f"reusing torch {facts.torch.version} from {facts.torch.entry}")


def ordered_site_dirs(sys_path: list[str], candidates: list[str]) -> tuple[str, ...]:
    """The entries of sys_path that are site directories, in sys_path's order, once each."""
    wanted = {os.path.normcase(os.path.abspath(c)) for c in candidates}
    out: list[str] = []
    for entry in sys_path:
        norm = os.path.normcase(os.path.abspath(entry)) if entry else ""
        if norm in wanted and norm not in {os.path.normcase(o) for o in out}:
            out.append(os.path.abspath(entry))
    return tuple(out)


def torch_of_this_interpreter() -> Torch | None:
    """Where this interpreter would import torch from, and its version, without importing it."""
    spec = importlib.util.find_spec("torch")
    if spec is None:
        return None
    if spec.submodule_search_locations:
        pkg = Path(next(iter(spec.submodule_search_locations)))
    else:
        pkg = Path(spec.origin or "").parent
    version = None
    version_py = pkg / "version.py"
    if version_py.is_file():
        m = re.search(r"""^__version__\s*(?::\s*str\s*)?=\s*['"]([^'"]+)['"]""",
                      version_py.read_text(errors="replace"), re.M)
        version = m.group(1) if m else None
    if version is None:
        try:
            from importlib.metadata import version as dist_version
            version = dist_version("torch")
        except Exception as e:
            raise EnvError(f"{sys.executable} has a torch package at {pkg} whose version "
                           f"cannot be read ({e}); fix or remove it, or use another "
                           f"PYTHON") from e
    return Torch(version=version, entry=str(pkg.parent))


def probe() -> Facts:
    """Facts about the running interpreter (the parent)."""
    candidates = [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    if hasattr(site, "getsitepackages"):
        candidates += site.getsitepackages()
    if site.ENABLE_USER_SITE:
        candidates.append(site.getusersitepackages())
    return Facts(
        python=sys.executable,
        torch=torch_of_this_interpreter(),
        site_dirs=ordered_site_dirs(sys.path, candidates),
        override=os.environ.get("DIAGFUZZ_TORCH") or None,
    )


# ---- acting on a plan (everything below writes only under the venv directory) ----

def say(msg: str) -> None:
    print(f"tools/dev: {msg}", file=sys.stderr, flush=True)


def run(cmd: list[str], dry_run: bool = False) -> None:
    if dry_run:
        say("would run: " + " ".join(cmd))
        return
    rc = subprocess.call(cmd, stdout=sys.stderr)  # tools/dev env's stdout is the venv alone
    if rc:
        raise EnvError(f"`{' '.join(cmd)}` failed (exit {rc}); see its output above")


_CHILD_PROBE = r"""
import importlib.util, json, sys, sysconfig
mods = {}
for name in sys.argv[1].split(","):
    try:
        mods[name] = importlib.util.find_spec(name) is not None
    except Exception:
        mods[name] = False
print(json.dumps({"path": sys.path, "purelib": sysconfig.get_paths()["purelib"],
                  "modules": mods}))
"""


def child_probe(py: Path, modules=DEPS) -> dict:
    try:
        out = subprocess.run([str(py), "-c", _CHILD_PROBE, ",".join(modules)],
                             capture_output=True, text=True)
        err = out.stderr.strip() if out.returncode else ""
    except OSError as e:
        err = str(e)
    if err:
        raise EnvError(f"{py} does not run ({err}); remove {py.parent.parent} and run again")
    return json.loads(out.stdout)


def child_torch(py: Path) -> tuple[str, str] | None:
    """(version, realpath of the torch package) that the venv imports, or None."""
    try:
        out = subprocess.run(
            [str(py), "-c", "import os, torch; print(torch.__version__); "
                            "print(os.path.realpath(os.path.dirname(torch.__file__)))"],
            capture_output=True, text=True)
    except OSError:
        return None
    if out.returncode:
        return None
    version, where = out.stdout.strip().splitlines()[-2:]
    return version, where


def pth_text(dirs: list[str]) -> str:
    lines = ["# tools/dev: the parent interpreter's site directories (diagfuzz's .venv reuses"
             " its torch)"]
    lines += [f"import site; site.addsitedir({d!r})" for d in dirs]
    return "\n".join(lines) + "\n"


def make_venv(venv: Path, plan: Plan, dry_run: bool) -> None:
    run([sys.executable, "-m", "venv", *(["--without-pip"] if dry_run else []), str(venv)])
    py = venv / "bin" / "python"
    if plan.mode != "reuse":
        return
    child = child_probe(py, ())
    seen = {os.path.normcase(os.path.abspath(p)) for p in child["path"] if p}
    add = [d for d in plan.site_dirs if os.path.normcase(d) not in seen]
    if add:
        (Path(child["purelib"]) / PTH).write_text(pth_text(add))
    own = Path(child["purelib"]) / "setuptools"
    if own.is_dir() and any(Path(d, "setuptools").is_dir() for d in plan.site_dirs):
        # Python < 3.12 seeds a venv with an old setuptools that would shadow the parent's
        # (--no-build-isolation builds with it; 65.x lacks bdist_wheel without `wheel`).
        run([str(py), "-m", "pip", "uninstall", "--quiet", "--yes", "setuptools"])
    assert plan.torch is not None
    want = os.path.realpath(os.path.join(plan.torch.entry, "torch"))
    got = child_torch(py)
    if got is None or got[1] != want:
        raise EnvError(
            f"{venv} was made to reuse the torch in {plan.torch.entry}, but it "
            + ("cannot import torch" if got is None else f"imports torch from {got[1]}")
            + f". Run `{py} -c 'import torch'` to see why; remove {venv} and run again, or "
            f"set DIAGFUZZ_TORCH to install a torch into an isolated .venv.")


def adoptable(venv: Path, plan: Plan) -> bool:
    """Whether a venv without a marker (made by an older tools/dev) already fits the plan."""
    got = child_torch(venv / "bin" / "python")
    if got is None:
        return False
    if plan.mode == "reuse":
        assert plan.torch is not None
        return got[1] == os.path.realpath(os.path.join(plan.torch.entry, "torch"))
    return (is_inside(Path(got[1]), venv) and plan.torch_spec == DEFAULT_TORCH
            and supported(got[0]))


def ensure_venv(venv: Path, plan: Plan, python: str, dry_run: bool) -> bool:
    """Make venv for the plan unless it already fits; True when it was made."""
    key = plan.key(python, dry_run)
    marker = venv / MARKER
    if venv.exists() and not (venv / "pyvenv.cfg").is_file():
        raise EnvError(f"{venv} exists and is not a virtual environment; move it away or "
                       f"set DIAGFUZZ_VENV to another directory")
    if (venv / "bin" / "python").exists():
        if marker.is_file():
            try:
                old = json.loads(marker.read_text())
            except ValueError:
                old = {}
            if old == key:
                return False
            changed = ", ".join(k for k in key if old.get(k) != key[k])
            why = f"its {changed} differ from this run's"
        elif not dry_run and adoptable(venv, plan):
            marker.write_text(json.dumps(key, indent=1) + "\n")
            return False
        else:
            why = "it does not hold the torch planned"
        say(f"making {venv} again: {why}")
    if venv.exists():
        shutil.rmtree(venv)
    make_venv(venv, plan, dry_run)
    marker.write_text(json.dumps(key, indent=1) + "\n")
    return True


def drop_stale_metadata(project: Path) -> None:
    """Remove the build's ``*.egg-info`` from the project root before reinstalling.

    A build leaves it there (git ignores it), and a run started from the project root finds
    it on ``sys.path`` before the venv's own metadata: one left from an older checkout
    registers entry points whose modules have moved (pytest then fails loading the plugin).
    """
    for stale in project.glob("*.egg-info"):
        if stale.is_dir():
            shutil.rmtree(stale, ignore_errors=True)


def write_reused_scripts(venv: Path) -> None:
    """REUSED_SCRIPTS in ``venv/bin`` where missing, as pip writes console scripts."""
    py = venv / "bin" / "python"
    for name, (module, function) in REUSED_SCRIPTS.items():
        script = venv / "bin" / name
        if script.exists():
            continue
        script.write_text(f"#!{py}\nimport sys\nfrom {module} import {function}\n\n"
                          f"if __name__ == '__main__':\n    sys.exit({function}())\n")
        script.chmod(0o755)


def install(venv: Path, project: Path, plan: Plan, dry_run: bool) -> None:
    py = venv / "bin" / "python"
    if plan.mode == "reuse":
        write_reused_scripts(venv)
    pip = [str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    if plan.mode == "install" and not child_probe(py, ("torch",))["modules"]["torch"]:
        if plan.torch_spec == DEFAULT_TORCH:
            say(f"installing the CPU build of torch ({plan.torch_spec})")
        else:
            say(f"installing torch (DIAGFUZZ_TORCH={plan.torch_spec})")
        run([*pip, plan.torch_spec or DEFAULT_TORCH], dry_run)
    stamp = venv / STAMP
    pyproject = project / "pyproject.toml"
    if stamp.is_file() and stamp.stat().st_mtime >= pyproject.stat().st_mtime:
        return
    if not dry_run:
        drop_stale_metadata(project)
    have = child_probe(py)["modules"]
    mode = install_mode(all(have.values()), stamp.read_text().strip() if stamp.is_file() else "")
    if mode == "no-deps":
        run([*pip, "--no-deps", "--no-build-isolation", "-e", str(project)], dry_run)
        soft = [m for m, ok in child_probe(py, SOFT_DEPS)["modules"].items() if not ok]
        if soft:
            say(f"{venv} lacks {', '.join(soft)}: the gate's OpInfo stage will not run "
                f"(`{py} -m pip install {' '.join(soft)}` adds it)")
        lacking = [m for m, ok in child_probe(py, DEV_MODULES)["modules"].items() if not ok]
        if lacking:
            say(f"{venv} lacks the dev extras' {', '.join(lacking)}: the tests that need them "
                f"skip (`{py} -m pip install -e '{project}[dev]'` adds them)")
    else:
        extra: list[str] = []
        if plan.mode == "reuse":
            assert plan.torch is not None
            constraints = venv / CONSTRAINTS
            constraints.write_text(f"torch=={plan.torch.version}\n")
            extra = ["-c", str(constraints)]
            missing = ", ".join(m for m, ok in have.items() if not ok)
            say(f"installing what {plan.torch.entry} lacks ({missing}); torch stays "
                f"{plan.torch.version}")
        run([*pip, *extra, "-e", f"{project}[dev]"], dry_run)
    if plan.mode == "reuse" and not dry_run:  # pip kept the parent's torch (the constraint)
        assert plan.torch is not None
        got = child_torch(py)
        want = os.path.realpath(os.path.join(plan.torch.entry, "torch"))
        if got is None or got[1] != want:
            raise EnvError(f"after installing, {venv} imports torch from "
                           f"{got[1] if got else 'nowhere'}, not {want}; remove {venv} and "
                           f"run again (and report it)")
    if not dry_run:
        stamp.write_text(mode + "\n")


def install_mode(deps_present: bool, last: str) -> str:
    """``"no-deps"`` (install diagfuzz alone: every dependency is there, and pip may have no
    index to reach) or ``"dev"`` (``pip install -e .[dev]``). ``last`` is the mode of this
    venv's previous install ("" where its stamp names none): a venv once
    installed with its extras keeps getting them, so an extra added to pyproject.toml later
    is installed too."""
    return "no-deps" if deps_present and last != "dev" else "dev"


def maker_of(venv: Path) -> str:
    """The interpreter ``venv`` was planned with (its marker's), else the one its pyvenv.cfg
    names: where to plan from when the running interpreter is the venv's own."""
    try:
        named = json.loads((venv / MARKER).read_text()).get("python")
    except (OSError, ValueError):
        named = None
    cfg: dict[str, str] = {}
    try:
        for line in (venv / "pyvenv.cfg").read_text().splitlines():
            key, _, value = line.partition("=")
            cfg[key.strip()] = value.strip()
    except OSError:
        pass
    for exe in (named, cfg.get("executable"),
                cfg.get("home") and os.path.join(cfg["home"], "python3")):
        if exe and os.access(exe, os.X_OK) and not is_inside(Path(exe), venv):
            return exe
    raise EnvError(f"{sys.executable} is {venv}'s own interpreter (the venv is activated), "
                   f"and the interpreter it was made from is not found; run `deactivate`, "
                   f"or set PYTHON=/path/to/python3")


def is_inside(path: Path, directory: Path) -> bool:
    return os.path.realpath(path).startswith(os.path.realpath(directory) + os.sep)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--venv", required=True, type=Path)
    ap.add_argument("--project", required=True, type=Path)
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--explain", action="store_true", help="print the plan and stop")
    args = ap.parse_args(argv)
    try:
        if sys.version_info < (3, 10):  # noqa: UP036 (PYTHON may name any interpreter)
            raise EnvError(f"{sys.executable} is Python {sys.version.split()[0]}; diagfuzz "
                           f"needs 3.10+ (set PYTHON=/path/to/python3.10+)")
        venv = args.venv.absolute()
        if os.path.realpath(sys.prefix) == os.path.realpath(venv):
            # An activated venv: planning from its own interpreter would remake it, and
            # remove the interpreter running the remake.
            maker = maker_of(venv)
            say(f"{sys.executable} is {venv}'s own interpreter: planning with {maker}, "
                f"which made it")
            os.execv(maker, [maker, str(Path(__file__).resolve()),
                             *(sys.argv[1:] if argv is None else argv)])
        facts = probe()
        plan = decide(facts)
        if args.explain:
            print(json.dumps(plan.key(facts.python, args.dry_run), indent=1))
            return 0
        project = args.project.absolute()
        if ensure_venv(venv, plan, facts.python, args.dry_run):
            say(f"made {venv}: {plan.note}")
        install(venv, project, plan, args.dry_run)
    except EnvError as e:
        say(f"error: {e}")
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
