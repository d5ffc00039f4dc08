"""Fault injection for tests: run one operation in a child process and kill it with SIGKILL at
its N-th named step or after a delay, cap the size of the files it may write
(``RLIMIT_FSIZE``, writes fail with ``EFBIG``), or give it a small tmpfs (real ``ENOSPC``).

The child reports each ``step(label)`` of the operation through a pipe; when the parent wants to
kill it at a step, the child blocks after reporting until the parent acknowledges, so the kill
lands exactly before that step's disk change. A child is either forked from the test process
(fast: imports and JIT-compiled kernels are inherited) or, for libraries that keep runtime
threads a fork would not carry over (``deltalake``), a fresh interpreter (:func:`run_script`).
"""

from __future__ import annotations

import json
import os
import resource
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parents[1]


@dataclass
class Outcome:
    """What became of one child run."""

    steps: list[str] = field(default_factory=list)
    killed: bool = False
    finished: bool = False
    error: dict | None = None  # {"type", "message", "kafkalog", "file", "traceback"}
    returncode: int | None = None


def child_body(fn: Callable[..., object], kwargs: dict, report_fd: int, ack_fd: int,
               blocking: bool, fsize: int | None) -> int:
    """Run ``fn(step, **kwargs)`` reporting steps, the result or the error on ``report_fd``;
    returns the exit status (0 done, 1 error)."""
    from kafkalog_spark.errors import KafkaLogError

    def send(kind: str, payload: object) -> None:
        os.write(report_fd, (kind + " " + json.dumps(payload) + "\n").encode())

    def step(label: object, *_: object) -> None:
        send("step", str(label))
        if blocking and os.read(ack_fd, 1) != b"y":
            os._exit(3)  # the parent went away

    if fsize is not None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes fail with EFBIG, no signal
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    try:
        fn(step, **kwargs)
    except BaseException as exc:  # the parent judges every error; none may escape the child
        import traceback

        send("error", {"type": type(exc).__name__, "message": str(exc),
                       "kafkalog": isinstance(exc, KafkaLogError),
                       "file": getattr(exc, "file", None) or getattr(exc, "filename", None),
                       "traceback": traceback.format_exc()})
        return 1
    send("done", None)
    return 0


class _Reports:
    """Lines from the child's report pipe, with a deadline (a hung child fails the test)."""

    def __init__(self, fd: int, pid: int, timeout: float) -> None:
        self.fd, self.pid, self.deadline, self.buf = fd, pid, time.monotonic() + timeout, b""

    def next(self) -> tuple[str, object] | None:
        while b"\n" not in self.buf:
            left = self.deadline - time.monotonic()
            ready, _, _ = select.select([self.fd], [], [], max(left, 0))
            if not ready:
                os.kill(self.pid, signal.SIGKILL)
                raise TimeoutError(f"child {self.pid} ran past its deadline")
            chunk = os.read(self.fd, 65536)
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        kind, _, payload = line.decode().partition(" ")
        return kind, json.loads(payload)


def _collect(pid: int, wait: Callable[[], int], reports: _Reports, ack_w: int,
             kill_at: int | None, kill_after: float | None, out: Outcome) -> Outcome:
    if kill_after is not None:
        time.sleep(kill_after)
        os.kill(pid, signal.SIGKILL)
    while (item := reports.next()) is not None:
        kind, value = item
        if kind == "step":
            out.steps.append(str(value))
            if kill_at is not None and len(out.steps) == kill_at:
                os.kill(pid, signal.SIGKILL)
                break
            if kill_at is not None:
                os.write(ack_w, b"y")
        elif kind == "error":
            out.error = value  # type: ignore[assignment]
        elif kind == "done":
            out.finished = True
    os.close(ack_w)
    os.close(reports.fd)
    out.returncode = wait()
    out.killed = out.returncode == -signal.SIGKILL
    return out


def _waitpid(pid: int) -> Callable[[], int]:
    def wait() -> int:
        _, status = os.waitpid(pid, 0)
        return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    return wait


def run_forked(fn: Callable[..., object], *, kill_at: int | None = None,
               kill_after: float | None = None, fsize: int | None = None,
               timeout: float = 60, **kwargs: object) -> Outcome:
    """Fork, run ``fn(step, **kwargs)`` in the child and kill it at its ``kill_at``-th step
    (1-based) or ``kill_after`` seconds after the fork; ``fsize`` caps the child's file sizes."""
    report_r, report_w = os.pipe()
    ack_r, ack_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never return into pytest
        status = 2
        try:
            os.close(report_r)
            os.close(ack_w)
            status = child_body(fn, kwargs, report_w, ack_r, kill_at is not None, fsize)
        finally:
            os._exit(status)
    os.close(report_w)
    os.close(ack_r)
    return _collect(pid, _waitpid(pid), _Reports(report_r, pid, timeout), ack_w, kill_at,
                    kill_after, Outcome())


def run_script(target: str, *, kill_at: int | None = None, kill_after: float | None = None,
               fsize: int | None = None, timeout: float = 120, **kwargs: object) -> Outcome:
    """Like :func:`run_forked` in a fresh interpreter; ``target`` is ``"module:function"``
    importable with ``tests/`` on the path, ``kwargs`` JSON-serialisable.  ``kill_after``
    counts from the first step report (interpreter start-up is not part of the operation)."""
    report_r, report_w = os.pipe()
    ack_r, ack_w = os.pipe()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(TESTS_DIR)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    popen = subprocess.Popen(
        [sys.executable, "-m", "faults.child", target, json.dumps(kwargs), str(report_w),
         str(ack_r), "1" if kill_at is not None else "0", "" if fsize is None else str(fsize)],
        pass_fds=(report_w, ack_r), env=env)
    os.close(report_w)
    os.close(ack_r)
    reports = _Reports(report_r, popen.pid, timeout)
    out = Outcome()
    if kill_after is not None:  # time the kill from the first step (imports done)
        first = reports.next()
        if first is not None and first[0] == "step":
            out.steps.append(str(first[1]))
        elif first is not None and first[0] == "error":
            out.error = first[1]  # type: ignore[assignment]
    return _collect(popen.pid, lambda: popen.wait(timeout=timeout), reports, ack_w, kill_at,
                    kill_after, out)


@contextmanager
def tmpfs(path: Path, size: str = "2m") -> Iterator[Path]:
    """Mount a tmpfs of ``size`` at ``path`` for the block (root only); raises ``OSError`` with
    the reason when it cannot be mounted, so callers can skip."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        raise PermissionError("mounting a tmpfs needs root")
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                          capture_output=True, text=True)
    if proc.returncode:
        raise OSError(f"mount -t tmpfs failed: {proc.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=True)


def fill(directory: Path, leave: int) -> Path:
    """Fill the filesystem of ``directory`` with one file until only ``leave`` bytes are free."""
    st = os.statvfs(directory)
    free = st.f_bavail * st.f_frsize
    filler = directory / "filler.bin"
    with open(filler, "wb") as f:
        remaining = max(free - leave, 0)
        chunk = bytes(1 << 16)
        while remaining > 0:
            n = min(remaining, len(chunk))
            try:
                f.write(chunk[:n])
                f.flush()
            except OSError:
                break
            remaining -= n
    return filler
