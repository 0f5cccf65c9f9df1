"""The bench's meter reads a service's CPU from /proc as psutil would: the process, its live
descendants and the children it has reaped."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from bench.measure import Meter, proc_tree_cpu

# A parent that runs one child to its end (reaped) and keeps a second one, which has burnt CPU,
# alive until its stdin closes.
_TREE = """
import subprocess, sys
subprocess.run([sys.executable, "-c", "sum(range(3_000_000))"])
live = subprocess.Popen(
    [sys.executable, "-c", "import sys; sum(range(3_000_000)); print('burnt', flush=True); sys.stdin.read()"],
    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
)
live.stdout.readline()
print("ready", flush=True)
sys.stdin.read()
live.stdin.close()
live.wait()
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads Linux's /proc")
def test_a_process_trees_cpu_read_from_proc_is_what_psutil_reads() -> None:
    tree = subprocess.Popen(
        [sys.executable, "-c", _TREE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert tree.stdout is not None and tree.stdout.readline().strip() == "ready"
        time.sleep(0.05)  # the idle tree's counters settle
        from_proc = proc_tree_cpu(tree.pid)
        by_psutil = Meter()._psutil_tree_cpu(tree.pid)
        assert from_proc is not None
        assert from_proc > 0.05  # three interpreters started, two sums
        assert from_proc == pytest.approx(by_psutil, abs=0.03)
    finally:
        assert tree.stdin is not None
        tree.stdin.close()
        tree.wait(timeout=30)
    assert proc_tree_cpu(tree.pid) is None  # gone: /proc cannot tell
