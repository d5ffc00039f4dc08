"""The log dir's ``.lock`` (storage layer): who holds it, and taking it the way a broker does.

A broker keeps ``<log dir>/.lock`` locked for its lifetime with ``FileChannel.tryLock()``
(KAFKA_FORMATS §11.6), which the JVM implements on Linux/macOS as a POSIX ``fcntl`` record lock
over the whole file. So:

* to *test* the lock, ask the kernel with ``F_GETLK`` — it names the holder's pid without taking
  the lock, works on a read-only descriptor, and neither creates nor changes the file;
* to *take* it (our own mutating commands), use ``fcntl.lockf(LOCK_EX | LOCK_NB)`` on a
  read-write descriptor, creating an empty ``.lock`` like ``LogManager.lockLogDirs``.

POSIX record locks belong to the process and are dropped when the process closes *any*
descriptor of the file; this module therefore never opens a ``.lock`` that this process holds.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from ..codec.files.naming import LOCK_FILE
from ..errors import Location, LogDirError, LogDirLockedError
from .options import refuse
from .paths import as_path
from .seam import is_local, storage_for, user_paths

# .lock files this process holds through hold_lock(): resolved path -> descriptor
_HELD: dict[str, int] = {}


def _lock_path(log_dir: str | os.PathLike[str]) -> Path:
    return as_path(log_dir) / LOCK_FILE


def lock_holder(log_dir: str | os.PathLike[str]) -> int | None:
    """The pid of the process holding ``<log_dir>/.lock``, or ``None``.

    The check changes nothing: the file is opened read-only (never created) and only asked
    about with ``F_GETLK``; a stale ``.lock`` left by a dead broker reports ``None``.

    Parameters
    ----------
    log_dir : path
        A Kafka log directory.

    Returns
    -------
    int or None
        The holder's pid (this process's own pid while it holds the lock via
        :func:`hold_lock`), or ``None`` when no file or no holder. A pid of ``-1`` means the
        kernel reported an open-file-description lock, which has no owning pid.

    Raises
    ------
    LogDirError
        When ``.lock`` exists but cannot be opened (permissions, a symlink, not a file).
    """
    path = _lock_path(log_dir)
    fs = storage_for(path)
    if str(fs.resolve(path)) in _HELD:
        return os.getpid()
    try:
        return fs.lock_owner(path)
    except OSError as exc:
        raise LogDirError(f"cannot open the lock file to test it: {exc.strerror}",
                          Location(file=str(path))) from exc


def ensure_local(paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> None:
    """Refuse (:class:`~kafkalog_spark.errors.RemoteStorageError`) an object-store path where
    a log dir is to be changed: object stores have no atomic rename and no lock. Called before
    anything is read, so the refusal needs no credentials."""
    for path in user_paths(paths):
        if not is_local(storage_for(path)):
            raise refuse(path, "change a log dir in place")


def ensure_not_locked(log_dir: str | os.PathLike[str]) -> None:
    """Raise :class:`~kafkalog_spark.errors.LogDirLockedError` if another process (a running
    broker) holds ``<log_dir>/.lock``; a lock this process holds is fine.

    Parameters
    ----------
    log_dir : path
        A Kafka log directory.
    """
    ensure_local(log_dir)
    pid = lock_holder(log_dir)
    if pid is not None and pid != os.getpid():
        raise LogDirLockedError(
            f"log dir is locked by process {pid} (a running broker?); stop it first",
            Location(file=str(_lock_path(log_dir))))


@contextmanager
def hold_lock(log_dir: str | os.PathLike[str]) -> Iterator[Path]:
    """Hold ``<log_dir>/.lock`` like a broker does, for the duration of a ``with`` block.

    Creates an empty ``.lock`` if missing (``LogManager.lockLogDirs``) and takes an exclusive
    non-blocking ``lockf`` lock, so a broker started meanwhile refuses the dir, and a running
    broker makes this fail instead of both writing. The file is left in place on exit, as Kafka
    leaves it.

    Yields
    ------
    Path
        The ``.lock`` path.

    Raises
    ------
    LogDirLockedError
        When another process holds the lock (the message names its pid).
    LogDirError
        When the log dir is missing or the lock file cannot be created/opened, or when this
        process already holds it (POSIX locks do not nest).
    """
    path = _lock_path(log_dir)
    fs = storage_for(path)
    if not fs.is_dir(path.parent):
        raise LogDirError("log dir does not exist", Location(file=str(path.parent)))
    key = str(fs.resolve(path))
    if key in _HELD:
        raise LogDirError("this process already holds the lock", Location(file=str(path)))
    try:
        fd = fs.lock(path)
    except OSError as exc:
        raise LogDirError(f"cannot open the lock file: {exc.strerror}",
                          Location(file=str(path))) from exc
    if fd is None:
        pid = lock_holder(log_dir)
        who = f"process {pid}" if pid is not None else "another process"
        raise LogDirLockedError(f"log dir is locked by {who} (a running broker?)",
                                Location(file=str(path)))
    _HELD[key] = fd
    try:
        yield path
    finally:
        del _HELD[key]
        fs.unlock(fd)  # closing the descriptor releases the record lock
