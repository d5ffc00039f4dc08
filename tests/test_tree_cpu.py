"""benchmarks/tree_cpu.py: a process tree's CPU time sampled over time — children, reaped
grandchildren and orphans re-parented out of the tree all counted, each once."""

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

# sleeps argv[1] s, burns argv[3] s of CPU, writes its CPU seconds to argv[2], then idles
# 0.3 s before exiting, so that a sampler late by less than that reads its final CPU
BURN = ("import os, sys, time\ntime.sleep(float(sys.argv[1]))\nt = time.process_time()\n"
        "while time.process_time() - t < float(sys.argv[3]): pass\n"
        "open(sys.argv[2], 'w').write(str(sum(os.times()[:2])))\ntime.sleep(0.3)\n")
# a child that runs one grandchild to its end (reaped), burns CPU itself, starts a second
# grandchild that burns only after the child has exited (an orphan, re-parented to init: out
# of the tree) and exits 0.2 s later without waiting for it
CHILD = f"""
import os, subprocess, sys, time
burn = {BURN!r}
subprocess.run([sys.executable, "-c", burn, "0", sys.argv[1] + "/reaped", "0.3"], check=True)
exec(burn.replace("sys.argv[1]", "'0'").replace("sys.argv[2]", "sys.argv[1] + '/child'")
     .replace("sys.argv[3]", "'0.3'"))
subprocess.Popen([sys.executable, "-c", burn, "0.5", sys.argv[1] + "/orphan", "1.0"])
time.sleep(0.2)  # the orphan is seen in the tree, as a worker is long before its daemon dies
"""


def test_a_tree_counts_its_running_reaped_and_orphaned_processes_once(tmp_path: Path) -> None:
    own = sum(os.times()[:2])  # this process: the sampler's thread is in the tree too
    with C.TreeCpuSampler(interval_s=0.02) as sampler:
        child = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path)], check=True)
        deadline = time.monotonic() + 60
        while not (tmp_path / "orphan").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)  # the orphan idles 0.3 s after writing: read while it is alive
    assert child.returncode == 0
    own = sum(os.times()[:2]) - own
    used = sum(float((tmp_path / name).read_text()) for name in ("reaped", "child", "orphan"))
    counted = sampler.samples[-1][1] / 1000 - own
    assert used >= 1.6
    # each once, the orphan's 1.0 s included (lost when CPU is taken from reaped children's
    # times: the orphan is never reaped into the tree)
    assert used - 0.25 <= counted <= used + 0.25
    times = [t for t, _ in sampler.samples]
    assert times == sorted(times) and sampler.samples[0][1] == 0.0
    assert C.cpu_seconds(2**22 + 12345, True) == 0.0  # a process that is gone: nothing
    assert C.descendants(2**22 + 12345) == []
