"""Progress lines for long CLI jobs (entry-point layer): one line on stderr, never on stdout.

A command shows progress when stderr is a terminal, or when ``--progress`` is given (then
also into a file or pipe); ``--no-progress`` turns it off. Stdout — the report or the JSON —
is never touched, so ``kafkalog verify --json --progress DIR > report.json`` stays valid JSON.

The library functions the commands call (``verify``, ``recover``, ``rebuild_indexes``,
``migrate``, ``dump_files``, ``compact``) take no progress callback, so the progress is *observed*: the
command lists the segment files it is about to read (:func:`segment_files`, from discovery's
``stat`` only), and a sampler thread looks at which of them this process has open
(``/proc/self/fd``) every half second. Files are read in discovery order, so the files before
the furthest one seen open are done. Where ``/proc`` does not exist the line shows the elapsed
time only. A command with its own loop calls :meth:`Progress.advance` instead.

Usage from a command module::

    from .progress import Progress, progress_option, segment_files

    @click.command("compact")
    @progress_option
    def command(..., progress: bool | None) -> None:
        with Progress("compact", enabled=progress, files=lambda: segment_files(log_dirs)):
            result = compact(...)
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

import click

from ..errors import KafkaLogError
from ..storage import LOCAL, storage_for

_PROC_FD = Path("/proc/self/fd")


def progress_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--progress/--no-progress`` as the keyword argument ``progress`` (``None``: only when
    stderr is a terminal)."""
    return click.option(
        "--progress/--no-progress", "progress", default=None,
        help="Show a progress line on stderr (default: only when stderr is a terminal); "
             "stdout is never affected.")(fn)


def segment_files(paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]
                  ) -> list[tuple[Path, int]]:
    """The ``.log`` files under ``paths`` with their sizes, in the order the library reads them
    (discovery order). Empty when discovery fails: the command itself then reports why."""
    from ..log.discovery import discover

    try:
        found = discover(paths)
    except (KafkaLogError, OSError):
        return []
    return [(seg.log, seg.log_size) for part in found.all_partition_dirs()
            for seg in part.segments]


def plain_files(paths: Sequence[str | os.PathLike[str]]) -> list[tuple[Path, int]]:
    """Named files with their sizes (missing ones skipped), e.g. ``kafkalog dump``'s inputs."""
    out = []
    for p in paths:
        fs = storage_for(p)
        try:
            out.append((fs.resolve(p), fs.stat(p).st_size))
        except OSError:
            continue
    return out


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover - loop always returns


class Progress:
    """One progress line on stderr for a job over a known list of files.

    Parameters
    ----------
    label : str
        The command name, printed at the start of the line.
    enabled : bool or None
        ``None``: only when ``stream`` is a terminal.
    files : sequence of (path, size), or a callable returning one, optional
        What the job reads, in order; a sampler thread then follows the job by the files this
        process has open. A callable is called only when the line is enabled (listing a big
        log dir costs seconds). Without it, call :meth:`advance`.
    unit : str
        What one file is called in the line (``"segments"``, ``"files"``).
    stream : file, optional
        Default: stderr.
    interval : float
        Seconds between updates on a terminal (a file or pipe gets a line every 4x as long).
    """

    def __init__(self, label: str, *, enabled: bool | None = None,
                 files: Sequence[tuple[Path, int]] | Callable[[], Sequence[tuple[Path, int]]] = (),
                 unit: str = "segments",
                 stream: IO[str] | None = None, interval: float = 0.5) -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.enabled = tty if enabled is None else bool(enabled)
        self.tty = tty
        self.unit = unit
        self.interval = interval if tty else interval * 4
        if callable(files):
            files = files() if self.enabled else ()
        self.files = [(str(p), int(s)) for p, s in files]
        self._index = {p: i for i, (p, _) in enumerate(self.files)}
        self._prefix = [0]
        for _, size in self.files:
            self._prefix.append(self._prefix[-1] + size)
        self.total_items = len(self.files)
        self.total_bytes = self._prefix[-1]
        self.done_items = 0
        self.done_bytes = 0
        self.current: str | None = None
        self._start = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._width = 0

    # --- explicit updates ------------------------------------------------------------------

    def advance(self, items: int = 1, nbytes: int = 0, current: str | None = None) -> None:
        """Count ``items`` more done (and ``nbytes``); ``current`` names what runs now."""
        with self._lock:
            self.done_items += items
            self.done_bytes += nbytes
            if current is not None:
                self.current = current

    # --- sampling ----------------------------------------------------------------------------

    def sample(self) -> None:
        """Move forward to the furthest listed file this process has open right now."""
        if not self.files or not LOCAL.is_dir(_PROC_FD):
            return
        furthest = -1
        try:
            fds = LOCAL.listdir(_PROC_FD)
        except OSError:
            return
        for fd in fds:
            try:
                target = LOCAL.readlink(_PROC_FD / fd)
            except OSError:
                continue
            i = self._index.get(target)
            if i is not None and i > furthest:
                furthest = i
        with self._lock:
            if furthest >= self.done_items:  # files before the open one are done
                self.done_items = furthest
                self.done_bytes = self._prefix[furthest]
                self.current = self.files[furthest][0]

    def line(self) -> str:
        """The progress line as it would be printed now."""
        elapsed = time.monotonic() - self._start
        with self._lock:
            done, nbytes, current = self.done_items, self.done_bytes, self.current
        parts = [f"{self.label}:"]
        if self.total_items:
            pct = 100.0 * nbytes / self.total_bytes if self.total_bytes else \
                100.0 * done / self.total_items
            parts.append(f"{done}/{self.total_items} {self.unit}, {_human(nbytes)} of "
                         f"{_human(self.total_bytes)} ({pct:.0f}%)")
        elif done:
            parts.append(f"{done} {self.unit}")
        parts.append(f"{elapsed:.0f} s")
        if current is not None and self.tty:
            parts.append(f"- {Path(current).parent.name}/{Path(current).name}")
        return " ".join(parts)

    def _emit(self, text: str, final: bool = False) -> None:
        if self.tty:
            pad = max(0, self._width - len(text))
            self.stream.write("\r" + text + " " * pad + ("\n" if final else ""))
            self._width = len(text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()
            self._emit(self.line())

    # --- context -----------------------------------------------------------------------------

    def __enter__(self) -> "Progress":
        self._start = time.monotonic()
        if self.enabled:
            self._thread = threading.Thread(target=self._run, name="kafkalog-progress",
                                            daemon=True)
            self._thread.start()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        if exc_type is None:
            with self._lock:
                self.done_items = max(self.done_items, self.total_items)
                self.done_bytes = max(self.done_bytes, self.total_bytes)
                self.current = None
            self._emit(self.line() + " done", final=True)
        elif self.tty and self._width:
            self._emit("", final=True)  # leave the terminal on a fresh line for the error
