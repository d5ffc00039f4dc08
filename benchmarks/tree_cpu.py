"""CPU time of processes from ``/proc`` (benchmarks): one process's, or a whole process tree's
sampled over time.

A Spark job's CPU is spread over the driver's Python, the JVM (driver and, in local mode, the
executor), pyspark's daemon and its forked workers, and the Python processes the JVM starts to
plan a Python data source. :class:`TreeCpuSampler` adds them up: every process below a root
counts its own user + system time, plus what its reaped children used (a worker that exited
and was waited for is in its parent's count; one still running only in its own, so nothing is
counted twice). Linux only.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int, with_reaped_children: bool) -> float:
    """utime + stime of ``pid`` (plus its reaped children's), seconds; 0 if it is gone."""
    fields = _stat(pid)
    if fields is None:
        return 0.0
    ticks = int(fields[11]) + int(fields[12])
    if with_reaped_children:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / TICK


def tree_cpu_seconds(root: int) -> float:
    """CPU seconds used so far by ``root`` and every process below it, reaped ones included."""
    parents: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            fields = _stat(int(name))
            if fields is not None:
                parents[int(name)] = int(fields[1])
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        total += cpu_seconds(pid, True)
        todo += children.get(pid, [])
    return total


def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command name (field 3 on: state, ppid, ...)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


class TreeCpuSampler:
    """A thread reading :func:`tree_cpu_seconds` of ``root`` every ``interval_s``:
    ``samples`` holds ``(epoch ms, CPU ms)`` pairs, the CPU cumulative since the first."""

    def __init__(self, root: int | None = None, interval_s: float = 0.1) -> None:
        self.root = os.getpid() if root is None else root
        self.interval_s = interval_s
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tree-cpu", daemon=True)

    def __enter__(self) -> "TreeCpuSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        first = None
        while True:
            cpu = tree_cpu_seconds(self.root) * 1000
            first = cpu if first is None else first
            self.samples.append((time.time() * 1000, cpu - first))
            if self._stop.wait(self.interval_s):
                return
