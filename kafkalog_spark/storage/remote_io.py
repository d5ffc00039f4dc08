"""Object-store I/O helpers (storage layer): listing entries that answer like ``os.DirEntry``,
request accounting, and the coalescing of byte ranges into ranged GETs."""

from __future__ import annotations

import fnmatch
import stat as stat_module
import threading
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class RemoteStat:
    """What a listing says about an object (the ``os.stat_result`` fields callers read)."""

    st_size: int
    st_mtime: float
    st_mode: int


class RemoteEntry:
    """One listing entry, answering like ``os.DirEntry`` (``path`` is the URI string)."""

    __slots__ = ("name", "path", "_dir", "_stat")

    def __init__(self, name: str, path: str, is_dir: bool, stat: RemoteStat) -> None:
        self.name, self.path, self._dir, self._stat = name, path, is_dir, stat

    def is_file(self) -> bool:
        return not self._dir

    def is_dir(self) -> bool:
        return self._dir

    def is_symlink(self) -> bool:
        return False

    def stat(self) -> RemoteStat:
        return self._stat


class RequestCounter:
    """The requests this process sent to one store (``head``, ``get``, ``list``, ``put``) and
    the bytes its GETs fetched, also by file suffix (``.log``, ``.index``...): what the
    object-storage benchmark reports."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts: dict[str, int] = {}
        self.bytes = 0
        self.by_suffix: dict[str, int] = {}

    def count(self, kind: str, nbytes: int = 0, suffix: str = "") -> None:
        with self._lock:
            self.counts[kind] = self.counts.get(kind, 0) + 1
            self.bytes += nbytes
            if nbytes:
                self.by_suffix[suffix] = self.by_suffix.get(suffix, 0) + nbytes

    def reset(self) -> dict[str, int]:
        """The counts so far (``bytes`` and ``bytes<suffix>`` included), from zero again."""
        with self._lock:
            out = {**self.counts, "bytes": self.bytes,
                   **{f"bytes{k}": v for k, v in self.by_suffix.items()}}
            self.counts, self.bytes, self.by_suffix = {}, 0, {}
            return out


class FetchProgress:
    """How far a background fetch of an object into one array has come: parts complete in any
    order, :meth:`wait` blocks until a prefix of the object is all there (or the fetch
    failed, then it raises that error)."""

    def __init__(self, parts: Sequence[tuple[int, int]]) -> None:
        self._parts = list(parts)
        self._done = [False] * len(self._parts)
        self._next = 0  # first part not done
        self._error: BaseException | None = None
        self._cond = threading.Condition()

    @property
    def available(self) -> int:
        """The end of the fetched prefix."""
        with self._cond:
            return self._parts[self._next - 1][1] if self._next else \
                (self._parts[0][0] if self._parts else 0)

    def done(self, i: int, error: BaseException | None = None) -> None:
        with self._cond:
            if error is not None and self._error is None:
                self._error = error
            self._done[i] = True
            while self._next < len(self._done) and self._done[self._next]:
                self._next += 1
            self._cond.notify_all()

    def wait(self, position: int) -> int:
        """Block until every byte before ``position`` is fetched; the fetched prefix's end."""
        with self._cond:
            while True:
                if self._error is not None:
                    raise self._error
                end = self._parts[self._next - 1][1] if self._next else 0
                if end >= position or self._next == len(self._parts):
                    return end
                self._cond.wait()


COALESCE_BYTES = 1 << 20
"""Byte ranges of one object closer than this are fetched with one GET (a GET costs about as
much as transferring this many bytes on a cloud link)."""


def coalesce(ranges: Sequence[tuple[int, int]], size: int) -> list[tuple[int, int]]:
    """``ranges`` clipped to ``[0, size)``, sorted, with overlapping or near ones joined."""
    out: list[tuple[int, int]] = []
    for start, end in sorted((max(0, s), min(size, e)) for s, e in ranges):
        if end <= start:
            continue
        if out and start - out[-1][1] < COALESCE_BYTES:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


# --- building the client ----------------------------------------------------------------------


def remote_stat(info) -> RemoteStat:
    from pyarrow.fs import FileType

    mtime = info.mtime.timestamp() if info.mtime is not None else 0.0
    mode = stat_module.S_IFDIR if info.type == FileType.Directory else stat_module.S_IFREG
    return RemoteStat(st_size=int(info.size or 0), st_mtime=mtime, st_mode=mode)


def match_parts(rel: str, pattern: str, any_depth: bool = False) -> bool:
    parts, pats = rel.strip("/").split("/"), pattern.strip("/").split("/")
    if any_depth:
        parts = parts[-len(pats):]
    return len(parts) == len(pats) and all(fnmatch.fnmatchcase(a, b)
                                           for a, b in zip(parts, pats))
