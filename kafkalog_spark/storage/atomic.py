"""Crash-safe checkpoint file I/O and OS-error mapping (storage layer), KAFKA_FORMATS §11.1.

Kafka writes checkpoint files, ``partition.metadata`` and ``meta.properties`` as: write
``<path>.tmp`` → flush → fsync → atomic rename over the target → fsync the parent directory.
A crash leaves either the old file or the new one, plus possibly a stray ``.tmp`` that the
next write overwrites. The text formats themselves live in
:mod:`kafkalog_spark.codec.files.checkpoints`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Callable, TypeVar

from ..errors import CorruptCheckpointError, KafkaLogError, Location, LogDirError
from .paths import as_path
from .seam import storage_for

T = TypeVar("T")


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """fsync a directory so that renames/creations inside it are durable (a no-op where the
    platform cannot open directories, as Kafka's ``Utils.flushDir`` is on Windows)."""
    storage_for(path).fsync_dir(path)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically and durably (tmp file, fsync, rename, fsync dir).

    Raises
    ------
    KafkaLogError
        The write or rename failed; the message names the file. The target is untouched and
        the ``.tmp`` file removed.
    """
    target = as_path(path).absolute()
    try:
        storage_for(target).replace_whole(target, data)
    except OSError as exc:
        # a partial .tmp would be quarantined by the next recover; a full disk needs the room
        raise KafkaLogError(f"atomic write failed: {exc.strerror or exc}", Location(str(target))) from exc


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """:func:`atomic_write_bytes` of ``text`` encoded as UTF-8 (lines already ``\\n``-terminated
    by the formatter — Kafka uses the platform separator, ``\\n`` on Linux)."""
    atomic_write_bytes(path, text.encode("utf-8"))


def read_checkpoint_file(path: str | os.PathLike[str], parse: Callable[..., T], *,
                         missing_ok: bool = True) -> T:
    """Read a checkpoint/metadata text file and parse it with a ``parse(text, file=...)``
    function from :mod:`kafkalog_spark.codec.files.checkpoints`.

    A missing file reads as empty text when ``missing_ok`` (``CheckpointFile`` creates the file
    empty if absent, so "missing" and "empty" mean the same to Kafka); otherwise it is a
    :class:`CorruptCheckpointError`, as is text that is not UTF-8.
    """
    p = as_path(path)
    try:
        raw = storage_for(p).read_bytes(p)
    except FileNotFoundError as exc:
        if not missing_ok:
            raise CorruptCheckpointError("file does not exist", Location(str(p))) from exc
        raw = b""
    except OSError as exc:
        raise CorruptCheckpointError(f"cannot read: {exc.strerror or exc}", Location(str(p))) from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptCheckpointError("not UTF-8 text", Location(str(p), exc.start)) from exc
    return parse(text, file=str(p))


def write_checkpoint_file(path: str | os.PathLike[str], text: str) -> None:
    """Write formatted checkpoint/metadata text with the atomic protocol of §11.1."""
    atomic_write_text(path, text)


@contextmanager
def disk_errors(what: str, path: str | os.PathLike[str] | None = None) -> Iterator[None]:
    """Turn an ``OSError`` (full disk, file size limit, a file removed by someone else) into a
    :class:`LogDirError` naming the file: the one the OS names, else ``path``."""
    try:
        yield
    except OSError as exc:
        name = exc.filename if exc.filename is not None else path
        raise LogDirError(f"{what} failed: {exc.strerror or exc}",
                          Location(None if name is None else str(name))) from exc
