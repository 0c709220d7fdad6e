"""A process's end without the interpreter's finalisation (``diagfuzz.core.exits``).

Tearing down torch's and Triton's modules takes a second or more of a process whose work
is done; what a normal exit does before it must still happen: non-daemon threads end,
every ``atexit`` function runs (those registered before the arrangement too), buffered
output is written.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

_SCRIPT = '''
import atexit, os, sys, threading, time
from pathlib import Path

log = Path(sys.argv[1])
atexit.register(lambda: log.open("a").write("atexit before\\n"))
if sys.argv[2] == "pool":
    import concurrent.futures  # registers threading's exit hook of its own first
    concurrent.futures.ThreadPoolExecutor(1).submit(time.sleep, 0.1)
from diagfuzz.core.exits import exit_now_at_shutdown

arranged = exit_now_at_shutdown(3, lambda: sys.argv[2] == "yes")
atexit.register(lambda: log.open("a").write("atexit after\\n"))


class Finalised:
    """Written to only by the interpreter's finalisation (clearing this module)."""

    def __del__(self, write=os.write, fd=os.open(str(log), os.O_WRONLY | os.O_APPEND)):
        write(fd, b"finalised\\n")


kept = Finalised()
threading.Thread(target=lambda: (time.sleep(0.3), log.open("a").write("thread\\n"))).start()
print(f"arranged {arranged}", end="")
sys.exit(5)
'''


def _run(tmp_path: Path, mode: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    log = tmp_path / "log"
    log.touch()
    proc = subprocess.run([sys.executable, "-c", _SCRIPT, str(log), mode], cwd=REPO,
                          capture_output=True, text=True, timeout=120, check=False)
    return proc, log.read_text().splitlines()


def test_a_process_arranged_to_exit_now_ends_as_a_normal_exit_less_its_finalisation(
        tmp_path: Path) -> None:
    proc, log = _run(tmp_path, "yes")
    assert proc.returncode == 3, proc.stderr  # the arranged code
    assert proc.stdout == "arranged True"
    assert log == ["thread", "atexit after", "atexit before"]  # no "finalised"


@pytest.mark.parametrize("mode", ["no", "pool"])
def test_a_process_exits_as_usual_where_the_condition_fails_or_another_hook_came_first(
        tmp_path: Path, mode: str) -> None:
    # "pool": concurrent.futures' hook must run before the threads are joined; one
    # registered before this one would run after it, so nothing is arranged.
    proc, log = _run(tmp_path, mode)
    assert proc.returncode == 5, proc.stderr
    assert proc.stdout == f"arranged {mode == 'no'}"
    assert log == ["thread", "atexit after", "atexit before", "finalised"]
