"""A server process for the tests (SeaweedFS, fake-gcs-server, Azurite): started in a session of
its own with its output in a file, waited for until it answers, and stopped by its own pid —
its process group — never by name."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class ServerProcess:
    """One server: ``name`` for messages, its output in ``log``."""

    name: str
    log: Path
    proc: subprocess.Popen | None = None

    def start(self, argv: Sequence[str], ready: Callable[[], bool], timeout: float) -> None:
        """Start ``argv`` and wait until ``ready()`` says it answers; a server that exits or
        does not answer in ``timeout`` seconds is stopped and raises with its output's tail."""
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(list(argv), stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.proc = None
                raise RuntimeError(f"{self.name} exited:\n{self.output()[-3000:]}")
            if ready():
                return
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"{self.name} did not answer within {timeout}s; its output:\n"
                           f"{self.output()[-3000:]}")

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self, *, term_first: bool = True) -> None:
        """End the server's process group: SIGTERM and then, after 10 s, SIGKILL (or SIGKILL
        at once when ``term_first`` is false, for servers that ignore SIGTERM)."""
        if self.proc is not None and self.proc.poll() is None:
            if term_first:
                os.killpg(self.proc.pid, signal.SIGTERM)
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)
        self.proc = None


def answers(url: str) -> bool:
    """Whether an HTTP server answers at ``url`` (with any status: an error status is an
    answer too)."""
    import urllib.error
    import urllib.request

    try:
        urllib.request.urlopen(url, timeout=1).close()
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False
    return True


class ManagedServer:
    """What the server fixtures share (each defines ``start()``, which sets ``server``):
    ``output()``, ``stop()`` and use as a context manager (start on enter, stop on exit)."""

    server: ServerProcess | None = None
    term_first = True  # False: SIGKILL at once (a server that ignores SIGTERM)

    def output(self) -> str:
        return self.server.output() if self.server else ""

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop(term_first=self.term_first)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
