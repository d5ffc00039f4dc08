"""CPU time of processes from ``/proc`` (benchmarks): one process's, or a whole process tree's
sampled over time.

A Spark job's CPU is spread over the driver's Python, the JVM (driver and, in local mode, the
executor), pyspark's daemon and its forked workers, and the Python processes the JVM starts to
plan a Python data source. :class:`TreeCpuSampler` adds them up: at every sample it finds the
processes below a root and reads each one's own user + system time; a process that exits keeps
the last time read (its final tens of milliseconds are missed), and one that leaves the tree
alive (a worker whose daemon was killed, re-parented to init) goes on being read. Children's
times (``cutime``) are not used: a worker orphaned that way is never reaped into the tree, and
they would count a reaped process twice. Linux only.
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


def descendants(root: int, stats: dict[int, list[str]] | None = None) -> list[int]:
    """Every process below ``root`` now (children, their children, ...); ``stats``: every
    process's :func:`_stat` fields, read here when not given."""
    children: dict[int, list[int]] = {}
    for pid, fields in (stats if stats is not None else all_stats()).items():
        children.setdefault(int(fields[1]), []).append(pid)
    out, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def all_stats() -> dict[int, list[str]]:
    """The :func:`_stat` fields of every process, by pid."""
    out = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            fields = _stat(int(name))
            if fields is not None:
                out[int(name)] = fields
    return out


def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command name (field 3 on: state, ppid, ...)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


class TreeCpuSampler:
    """A thread reading the CPU time of ``root``'s process tree every ``interval_s``:
    ``samples`` holds ``(epoch ms, CPU ms)`` pairs, the CPU used since the sampler started by
    the processes seen in the tree (module doc)."""

    def __init__(self, root: int | None = None, interval_s: float = 0.1) -> None:
        self.root = os.getpid() if root is None else root
        self.interval_s = interval_s
        self.samples: list[tuple[float, float]] = []
        self._seen: dict[tuple[int, str], float] = {}  # (pid, start time) -> CPU s read last
        self._start: dict[tuple[int, str], float] = {}  # the same at the first reading
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tree-cpu", daemon=True)

    def __enter__(self) -> "TreeCpuSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def read(self) -> float:
        """CPU seconds used since the first reading by the processes seen so far."""
        first = not self._seen
        stats = all_stats()  # /proc read once per sample: the tree and the times from it
        tree = {self.root, *descendants(self.root, stats)}
        for pid in tree | {pid for pid, _ in self._seen}:
            fields = stats.get(pid)
            if fields is None:
                continue  # gone: its last reading stays
            key = (pid, fields[19])  # field 22, the start time: a reused pid is another process
            if pid not in tree and key not in self._seen:
                continue
            self._seen[key] = (int(fields[11]) + int(fields[12])) / TICK
            # a process already running at the first reading counts from there; later ones whole
            self._start.setdefault(key, self._seen[key] if first else 0.0)
        return sum(cpu - self._start[key] for key, cpu in self._seen.items())

    def _run(self) -> None:
        while True:
            self.samples.append((time.time() * 1000, self.read() * 1000))
            if self._stop.wait(self.interval_s):
                return
