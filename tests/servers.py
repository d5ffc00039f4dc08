"""A server process for the tests (SeaweedFS, fake-gcs-server, Azurite): started in a session of
its own with its output in a file, waited for until it answers *and* is seen listening on its
port, and stopped by its own pid — its process group — never by name.

Ports are picked free and then given to the server, so another process (the plain-Python test
pass runs beside the JIT pass) can take one in between: the server then fails to bind — its
start is retried on fresh ports (:meth:`ManagedServer.start_on_free_ports`) — and until it
exits, the other process's server answers on that port, which is why readiness also checks that
the port's listening socket is this server's (:func:`listens`)."""

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
    """A TCP port on loopback that nothing listens on right now (another process may take it
    before the server binds it: see the module docstring)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PortInUse(RuntimeError):
    """The server exited because a port it was given was taken first by another process."""


# what a server prints when its port is taken (Go and Java: "address already in use"; Node.js)
_IN_USE = ("address already in use", "eaddrinuse")


def children(pid: int) -> list[int]:
    """Direct children of ``pid`` (Linux ``/proc``)."""
    out: list[int] = []
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return out
    for task in tasks:
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return out


def descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        for c in children(todo.pop()):
            out.append(c)
            todo.append(c)
    return out


def _listening_sockets(port: int) -> set[str]:
    """``socket:[inode]`` names of the TCP sockets listening on ``port`` (any address)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            # local_address is ADDR:PORT in hex; state 0A is LISTEN
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "0A":
                found.add(f"socket:[{fields[9]}]")
    return found


def listens(pid: int, port: int) -> bool:
    """Whether ``pid`` or one of its descendants holds the socket listening on ``port``."""
    sockets = _listening_sockets(port)
    for p in (pid, *descendants(pid)):
        try:
            fds = list(Path(f"/proc/{p}/fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(fd) in sockets:
                    return True
            except OSError:
                continue
    return False


@dataclass
class ServerProcess:
    """One server: ``name`` for messages, its output in ``log``."""

    name: str
    log: Path
    proc: subprocess.Popen | None = None

    def start(self, argv: Sequence[str], ready: Callable[[], bool], timeout: float,
              port: int | None = None) -> None:
        """Start ``argv`` and wait until ``ready()`` says it answers and, given ``port``, until
        this server is the one listening there; a server that exits or does not answer in
        ``timeout`` seconds is stopped and raises with its output's tail (:class:`PortInUse`
        when it says its port was taken)."""
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(list(argv), stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.proc = None
                tail = self.output()[-3000:]
                if any(s in tail.lower() for s in _IN_USE):
                    raise PortInUse(f"{self.name} found a port taken:\n{tail}")
                raise RuntimeError(f"{self.name} exited:\n{tail}")
            if ready() and (port is None or listens(self.proc.pid, port)):
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

    @staticmethod
    def start_on_free_ports(launch: Callable[[], None], attempts: int = 5) -> None:
        """``launch()`` — pick fresh free ports, then start the server on them — again while
        the server finds one of them taken (:class:`PortInUse`), up to ``attempts`` times."""
        for attempt in range(attempts):
            try:
                launch()
                return
            except PortInUse:
                if attempt == attempts - 1:
                    raise

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop(term_first=self.term_first)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
