"""A stopped gate leaves no process behind: a grandchild whose parent died (inductor's
compile worker when its executor is killed) is adopted (``adopt_orphans``) and killed with
the rest (``kill_descendants``). In a subprocess: adopting changes the process it runs in."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")
def test_an_orphaned_grandchild_is_adopted_and_killed() -> None:
    script = textwrap.dedent("""
        import os, subprocess, sys, time
        from diagfuzz.execution.stopbound import adopt_orphans, descendants, kill_descendants

        assert adopt_orphans()
        parent = subprocess.Popen([sys.executable, "-c",
            "import subprocess, sys; "
            "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
            "print(p.pid, flush=True)"], stdout=subprocess.PIPE, text=True)
        grandchild = int(parent.stdout.readline())
        parent.wait()  # the grandchild's parent is gone: it is an orphan now
        time.sleep(0.2)
        assert grandchild in descendants(), "the orphan was not adopted"
        assert grandchild in kill_descendants()
        os.waitpid(grandchild, 0)  # reaped here: it was this process's child
        print("killed", grandchild)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("killed")
