"""benchmarks/tree_cpu.py: a process tree's CPU time, children and reaped grandchildren
included, counted once."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("tree_cpu", REPO / "benchmarks" / "tree_cpu.py")
C = importlib.util.module_from_spec(spec)
spec.loader.exec_module(C)

# a child that starts a grandchild burning CPU and waits for it (reaped: counted in the
# child's children's time), then burns CPU itself and reports its own and its children's
# CPU seconds; then waits to be told to exit, so that it is still alive when counted
BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\n"
CHILD = f"""
import os, subprocess, sys
subprocess.run([sys.executable, "-c", {BURN!r}], check=True)
{BURN}
t = os.times()
print(t.user + t.system, t.children_user + t.children_system, flush=True)
sys.stdin.readline()
"""


def test_a_tree_counts_its_running_and_its_reaped_processes_once() -> None:
    before = C.tree_cpu_seconds(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        own, reaped = map(float, child.stdout.readline().split())
        with C.TreeCpuSampler(interval_s=0.02) as sampler:
            time.sleep(0.1)
        counted = C.tree_cpu_seconds(os.getpid()) - before
        child_alone = C.cpu_seconds(child.pid, True)
    finally:
        child.stdin.write("\n")
        child.stdin.close()
        child.wait()
    assert own >= 0.3 and reaped >= 0.3
    assert child_alone >= own + reaped - 0.05
    # the child (alive) counts itself and its reaped grandchild: at least both burns
    assert counted >= own + reaped - 0.05
    # and not twice: this test process adds far less than another 0.6 s
    assert counted < 2 * (own + reaped)
    times = [t for t, _ in sampler.samples]
    assert len(times) >= 2 and times == sorted(times) and sampler.samples[0][1] == 0.0
    assert C.cpu_seconds(2**22 + 12345, True) == 0.0  # a process that is gone: nothing
