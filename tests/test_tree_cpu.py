"""benchmarks/tree_cpu.py: a process tree's CPU time sampled over time — children, reaped
grandchildren and orphans re-parented out of the tree all counted, each once."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("tree_cpu", REPO / "benchmarks" / "tree_cpu.py")
C = importlib.util.module_from_spec(spec)
spec.loader.exec_module(C)

BURN = ("import os, sys, time\ntime.sleep(float(sys.argv[1]))\nt = time.process_time()\n"
        "while time.process_time() - t < 0.3: pass\n"
        "open(sys.argv[2], 'w').write(str(sum(os.times()[:2])))\n")
# a child that runs one grandchild to its end (reaped), burns CPU itself, starts a second
# grandchild that burns only after the child has exited (an orphan, re-parented to init: out
# of the tree) and exits without waiting for it
CHILD = f"""
import os, subprocess, sys
burn = {BURN!r}
subprocess.run([sys.executable, "-c", burn, "0", sys.argv[1] + "/reaped"], check=True)
exec(burn.replace("sys.argv[1]", "'0'").replace("sys.argv[2]", "sys.argv[1] + '/child'"))
subprocess.Popen([sys.executable, "-c", burn, "0.5", sys.argv[1] + "/orphan"])
"""


def test_a_tree_counts_its_running_reaped_and_orphaned_processes_once(tmp_path: Path) -> None:
    with C.TreeCpuSampler(interval_s=0.02) as sampler:
        child = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path)], check=True)
        deadline = time.monotonic() + 60
        while not (tmp_path / "orphan").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.1)
    assert child.returncode == 0
    used = sum(float((tmp_path / name).read_text()) for name in ("reaped", "child", "orphan"))
    counted = sampler.samples[-1][1] / 1000
    assert used >= 0.9
    # each process's last ~20 ms between two samples may be missed; this process (the sampler
    # thread, a few ms per sample) and the interpreters' start-up add a little
    assert used - 0.2 <= counted <= used + 1.0
    times = [t for t, _ in sampler.samples]
    assert times == sorted(times) and sampler.samples[0][1] == 0.0
    assert C.cpu_seconds(2**22 + 12345, True) == 0.0  # a process that is gone: nothing
    assert C.descendants(2**22 + 12345) == []
