"""Quarantine (recovery layer): where every byte that recovery removes from a log dir goes, with
a manifest saying what it was, where it came from, why it was removed and its SHA-256.

Layout (outside the log dir — a broker takes every sub-directory of a log dir for a partition,
and a name it cannot parse takes the whole dir offline)::

    <log dir>.kafkalog-quarantine/            default root, a sibling of the log dir
        <UTC timestamp>/                      one run of `kafkalog recover --execute`
            manifest.json                     {"version", "log_dir", "started", "complete",
                                               "entries": [{file, start, end, reason, sha256,
                                                            stored, kind}]}
            <partition dir>/<file name>       a whole file moved here (kind "file")
            <partition dir>/<file>.bytes-<start>-<end>   a cut byte range (kind "range")
            <partition dir>/<file>.replaced-<sha8>       a file's old content before a rewrite

Crash safety: the manifest entry is written (atomically) *before* the file leaves the log dir,
a copied range is written to a temporary name and renamed, and a run whose manifest says
``"complete": false`` is resumed by the next run instead of starting a new folder, skipping
entries already recorded. So a process killed anywhere leaves every removed byte either still in
the log dir or in the quarantine with its manifest entry.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from ..errors import InvalidOptionError, Location, LogDirError
from ..storage import storage_for
from ..storage.atomic import atomic_write_bytes

QUARANTINE_SUFFIX = ".kafkalog-quarantine"
MANIFEST = "manifest.json"
MANIFEST_VERSION = 1
_CHUNK = 1 << 20

Step = Callable[[str], None]


def default_root(log_dir: str | os.PathLike[str]) -> Path:
    """``<log dir>.kafkalog-quarantine`` next to the log dir."""
    p = storage_for(log_dir).resolve(log_dir)
    return p.with_name(p.name + QUARANTINE_SUFFIX)


def sha256_of(path: Path, start: int = 0, end: int | None = None) -> str:
    """SHA-256 (hex) of ``path[start:end]``, read in chunks."""
    h = hashlib.sha256()
    with storage_for(path).open_read(path) as f:
        f.seek(start)
        left = None if end is None else end - start
        while left is None or left > 0:
            chunk = f.read(_CHUNK if left is None else min(_CHUNK, left))
            if not chunk:
                break
            h.update(chunk)
            if left is not None:
                left -= len(chunk)
    return h.hexdigest()


class Quarantine:
    """The quarantine of one log dir for one recovery run (created on first use).

    Parameters
    ----------
    log_dir : path
        The log dir whose files are quarantined (names are stored relative to it).
    root : path, optional
        Quarantine root; default :func:`default_root`. Must not lie inside the log dir.
    step : callable, optional
        Called with a label before each durable operation.
    """

    def __init__(self, log_dir: str | os.PathLike[str], root: str | os.PathLike[str] | None = None,
                 step: Step | None = None) -> None:
        self.log_dir = storage_for(log_dir).resolve(log_dir)
        self.root = (storage_for(root).resolve(root) if root is not None
                     else default_root(self.log_dir))
        if self.root == self.log_dir or self.root.is_relative_to(self.log_dir):
            raise InvalidOptionError(f"the quarantine {self.root} must not be inside the log dir "
                                     f"{self.log_dir} (a broker would load it as a partition)")
        self._step = step
        self.run: Path | None = None
        self._manifest: dict | None = None

    # --- manifest -------------------------------------------------------------------------
    def _say(self, label: str) -> None:
        if self._step is not None:
            self._step(label)

    def _open_run(self) -> dict:
        if self._manifest is not None:
            return self._manifest
        if self.resume():
            assert self._manifest is not None
            return self._manifest
        fs = storage_for(self.root)
        fs.make_dirs(self.root, exist_ok=True)
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        run = self.root / stamp
        n = 1
        while fs.exists(run):
            n += 1
            run = self.root / f"{stamp}-{n}"
        fs.make_dir(run)
        self.run = run
        self._manifest = {"version": MANIFEST_VERSION, "log_dir": str(self.log_dir),
                          "started": stamp, "complete": False, "entries": []}
        self._save()
        return self._manifest

    def resume(self) -> bool:
        """Continue the newest run of this log dir that a killed process left incomplete;
        whether there was one (:meth:`finish` then marks it complete even if nothing is left)."""
        if self._manifest is not None:
            return True
        fs = storage_for(self.root)
        if not fs.is_dir(self.root):
            return False
        for run in sorted((self.root / name for name in fs.listdir(self.root)), reverse=True):
            doc = _load_manifest(run / MANIFEST)
            if doc is not None and not doc.get("complete") and doc.get("log_dir") == str(self.log_dir):
                self.run, self._manifest = run, doc
                return True
        return False

    def _save(self) -> None:
        assert self.run is not None and self._manifest is not None
        atomic_write_bytes(self.run / MANIFEST, json.dumps(self._manifest, indent=1).encode())

    def _record(self, entry: dict) -> dict:
        doc = self._open_run()
        for old in doc["entries"]:
            if all(old[k] == entry[k] for k in ("file", "start", "end", "sha256", "kind")):
                return old
        self._say(f"manifest: {entry['kind']} {entry['file']} [{entry['start']}, {entry['end']})")
        doc["entries"].append(entry)
        self._save()
        return entry

    @property
    def entries(self) -> list[dict]:
        """Manifest entries of this run so far."""
        return list(self._manifest["entries"]) if self._manifest else []

    def finish(self) -> None:
        """Mark the run complete (nothing to do when nothing was quarantined)."""
        if self._manifest is not None and not self._manifest["complete"]:
            self._say("manifest: complete")
            self._manifest["complete"] = True
            self._save()

    def _stored_path(self, path: Path, suffix: str) -> tuple[Path, str]:
        assert self.run is not None
        try:
            rel = storage_for(path).resolve(path).relative_to(self.log_dir)
        except ValueError:
            rel = Path(path.parent.name) / path.name
        stored = self.run / rel.parent / (rel.name + suffix)
        return stored, str(stored.relative_to(self.run))

    # --- operations -----------------------------------------------------------------------
    def move_file(self, path: str | os.PathLike[str], reason: str) -> dict:
        """Move a whole file out of the log dir; returns its manifest entry."""
        path = Path(path)
        fs = storage_for(path)
        size = fs.stat(path).st_size
        digest = sha256_of(path)
        self._open_run()
        stored, rel = self._stored_path(path, "")
        entry = self._record({"kind": "file", "file": str(path), "start": 0, "end": size,
                              "reason": reason, "sha256": digest, "stored": rel})
        stored = self.run / entry["stored"]  # type: ignore[operator]
        storage = storage_for(stored)
        storage.make_dirs(stored.parent, exist_ok=True)
        self._say(f"move {path} -> {stored}")
        if storage.exists(stored) and sha256_of(stored) == digest:
            fs.remove(path)  # an earlier run copied it and died before removing the original
        else:
            _move(path, stored)
        fs.fsync_dir(path.parent)
        storage.fsync_dir(stored.parent)
        return entry

    def save_range(self, path: str | os.PathLike[str], start: int, end: int, reason: str) -> dict:
        """Copy ``path[start:end]`` into the quarantine (the caller then cuts it)."""
        path = Path(path)
        digest = sha256_of(path, start, end)
        self._open_run()
        stored, rel = self._stored_path(path, f".bytes-{start}-{end}")
        entry = self._record({"kind": "range", "file": str(path), "start": start, "end": end,
                              "reason": reason, "sha256": digest, "stored": rel})
        self._copy_range(path, start, end, self.run / entry["stored"], digest)  # type: ignore[operator]
        return entry

    def save_copy(self, path: str | os.PathLike[str], reason: str) -> dict:
        """Keep a copy of a file's current content before it is rewritten."""
        path = Path(path)
        size = storage_for(path).stat(path).st_size
        digest = sha256_of(path)
        self._open_run()
        stored, rel = self._stored_path(path, f".replaced-{digest[:8]}")
        entry = self._record({"kind": "replaced", "file": str(path), "start": 0, "end": size,
                              "reason": reason, "sha256": digest, "stored": rel})
        self._copy_range(path, 0, size, self.run / entry["stored"], digest)  # type: ignore[operator]
        return entry

    def _copy_range(self, path: Path, start: int, end: int, stored: Path, digest: str) -> None:
        storage = storage_for(stored)
        if storage.exists(stored) and sha256_of(stored) == digest:
            return
        storage.make_dirs(stored.parent, exist_ok=True)
        tmp = stored.with_name(stored.name + ".tmp")
        self._say(f"copy {path} [{start}, {end}) -> {stored}")
        dst = storage.open_write(tmp)
        try:
            copy_ranges(path, [(start, end)], dst)
        except BaseException:
            dst.close()
            raise
        storage.close_durably(dst)
        storage.rename(tmp, stored)
        storage.fsync_dir(stored.parent)


def copy_ranges(path: Path, ranges: list[tuple[int, int]], out: BinaryIO) -> int:
    """Write the byte ranges ``[start, end)`` of the file ``path``, in order, to ``out``;
    returns the bytes written (fewer when the file ends before a range does)."""
    written = 0
    with storage_for(path).open_read(path) as src:
        for start, end in ranges:
            src.seek(start)
            left = end - start
            while left > 0:
                chunk = src.read(min(_CHUNK, left))
                if not chunk:
                    break
                out.write(chunk)
                left -= len(chunk)
                written += len(chunk)
    return written


def write_ranges(src: Path, ranges: list[tuple[int, int]], dest: Path, step=None) -> None:
    """Write the byte ``ranges`` of ``src``, in order, durably into the new file ``dest`` (a
    rewrite's ``<base>.log.cleaned``: salvage, the overflow split); a short read means the
    source changed while it was read — an error, nothing is swapped in."""
    if step is not None:
        step(f"write {dest.name}")
    fs = storage_for(dest)
    out = fs.open_write(dest)
    try:
        written = copy_ranges(src, ranges, out)
    except BaseException:
        out.close()
        raise
    fs.close_durably(out)
    wanted = sum(e - s for s, e in ranges)
    if written != wanted:
        raise LogDirError(f"the segment changed while it was rewritten: {written} of {wanted} "
                          "bytes read", Location(str(src), ranges[0][0] if ranges else None))


def _load_manifest(path: Path) -> dict | None:
    try:
        return json.loads(storage_for(path).read_text(path))
    except (OSError, ValueError):
        return None


def _move(src: Path, dst: Path) -> None:
    fs, storage = storage_for(src), storage_for(dst)
    try:
        fs.rename(src, dst)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        tmp = dst.with_name(dst.name + ".tmp")
        storage.copy_file(src, tmp, durable=True)
        storage.rename(tmp, dst)
        storage.fsync_dir(dst.parent)
        fs.remove(src)


def read_manifests(root: str | os.PathLike[str]) -> list[dict]:
    """Every run manifest under a quarantine root, oldest first."""
    root = Path(root)
    fs = storage_for(root)
    if not fs.is_dir(root):
        return []
    out = []
    for run in sorted(root / name for name in fs.listdir(root)):
        doc = _load_manifest(run / MANIFEST)
        if doc is not None:
            doc["run"] = str(run)
            out.append(doc)
    return out
