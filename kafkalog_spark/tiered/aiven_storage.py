"""An Aiven remote segment as plain segment files (tier layer): the ``.log`` restored from its
chunks and the indexes cut from the ``.indexes`` object, read through the storage seam like any
other segment file.

A segment of the ``aiven`` layout is a folder of its own to the readers (:class:`AivenFolder`):
``<offset>-<segment id>.log``, ``.index``, ``.timeindex``, ``.txnindex``, ``.snapshot`` and
``.leader_epoch_checkpoint`` in it (each index a range of ``.indexes``, or in the layout from
before 2023-10 an object of its own) are :class:`AivenPath` s, served by :class:`AivenStorage`
(registered with :func:`kafkalog_spark.storage.seam.register_storage`). A read of byte ranges of
the ``.log`` fetches only the stored chunks holding them (ranged GETs through the object's own
storage), decrypts and decompresses each, and places it at its original position; bytes not
asked for read as zeros, as object-store reads of ranges do. Chunks stored untransformed (no
compression, no encryption: the object is the segment byte for byte) are not fetched whole: the
byte ranges asked for are fetched as they are. The manifest and the unwrapped data key are kept
per process (a few hundred segments). :meth:`AivenStorage.read_unit` tells a planner what a
ranged read of the ``.log`` rounds out to.

Neither path class is ``os.PathLike``: no code can open the stored (transformed) object as the
segment by mistake.
"""

from __future__ import annotations

import io
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np

from ..errors import Location, RemoteTierError
from ..storage import storage_for
from ..storage.paths import VirtualPath
from ..storage.remote_io import FetchProgress, coalesce
from ..storage.seam import register_storage
from .aiven_manifest import INDEX_OBJECTS, ChunkIndex, SegmentManifest, parse_manifest
from .aiven_transform import IV_BYTES, TAG_BYTES, detransform, unwrap_data_key

Folder = Any  # a local Path or an ObjectPath
STATS = {"object_bytes": 0, "chunks": 0}
"""Stored bytes fetched and chunks read (restored whole, or untransformed ones read in part) in
this process (for measurements and tests)."""


@dataclass(frozen=True)
class AivenSegment:
    """One remote segment's objects: ``base`` + ``.log`` / ``.indexes`` / ``.rsm-manifest``,
    and the private key files that may unwrap its data key (never shown)."""

    base: Folder
    private_keys: tuple[str, ...] = field(default=(), repr=False)

    def object(self, suffix: str) -> Folder:
        return self.base.parent / f"{self.base.name}.{suffix}"


class AivenFolder(VirtualPath):
    """A remote segment as a folder of segment files (see the module docstring)."""

    __slots__ = ("segment",)

    def __init__(self, segment: AivenSegment) -> None:
        self.segment = segment

    def __truediv__(self, name: str) -> AivenPath:
        return AivenPath(self.segment, name)

    @property
    def name(self) -> str:
        return self.segment.base.name

    @property
    def parent(self) -> Folder:
        return self.segment.base.parent

    def __str__(self) -> str:
        return str(self.segment.base)

    def __repr__(self) -> str:
        return f"AivenFolder({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AivenFolder) and other.segment.base == self.segment.base

    def __hash__(self) -> int:
        return hash(("aiven", str(self)))

    def __reduce__(self) -> tuple:
        return (AivenFolder, (self.segment,))


class AivenPath(VirtualPath):
    """One segment file of a remote segment: ``<offset>-<segment id>.<suffix>``."""

    __slots__ = ("segment", "name")

    def __init__(self, segment: AivenSegment, name: str) -> None:
        self.segment, self.name = segment, name

    @property
    def parent(self) -> AivenFolder:
        return AivenFolder(self.segment)

    @property
    def suffix(self) -> str:
        return "." + self.name.rsplit(".", 1)[-1]

    @property
    def stem(self) -> str:
        return self.name.rsplit(".", 1)[0]

    def with_suffix(self, suffix: str) -> AivenPath:
        return AivenPath(self.segment, self.stem + suffix)

    def with_name(self, name: str) -> AivenPath:
        return AivenPath(self.segment, name)

    def __str__(self) -> str:
        return str(self.segment.base.parent / self.name)

    def __repr__(self) -> str:
        return f"AivenPath({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AivenPath) and (other.segment.base, other.name) == \
            (self.segment.base, self.name)

    def __hash__(self) -> int:
        return hash(("aiven", str(self)))

    def __lt__(self, other: AivenPath) -> bool:
        return str(self) < str(other)

    def __reduce__(self) -> tuple:
        return (AivenPath, (self.segment, self.name))


_CACHE: OrderedDict[Any, tuple[SegmentManifest, bytes | None]] = OrderedDict()
_CACHE_SIZE = 512
_LOCK = threading.Lock()


def segment_manifest(seg: AivenSegment) -> tuple[SegmentManifest, bytes | None]:
    """The segment's manifest and its data key (``None``: not encrypted), cached."""
    with _LOCK:
        if seg.base in _CACHE:
            _CACHE.move_to_end(seg.base)
            return _CACHE[seg.base]
    path = seg.object("rsm-manifest")
    try:
        raw = storage_for(path).read_bytes(path)
    except FileNotFoundError:
        raise RemoteTierError("the segment's .rsm-manifest is missing",
                              Location(str(path))) from None
    manifest = parse_manifest(raw, str(path))
    key = None
    if manifest.encryption is not None:
        pems = [storage_for(p).read_bytes(p) for p in seg.private_keys]
        key = unwrap_data_key(manifest.encryption, pems, Location(str(path)))
    with _LOCK:
        _CACHE[seg.base] = (manifest, key)
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return manifest, key


class AivenStorage:
    """The read methods of the storage seam over one remote segment's files."""

    def __init__(self, segment: AivenSegment) -> None:
        self.segment = segment

    def _kind(self, path: AivenPath) -> str:
        return path.name.rsplit(".", 1)[-1]

    def size(self, path: AivenPath) -> int:
        manifest, key = segment_manifest(self.segment)
        kind = self._kind(path)
        if kind == "log":
            return manifest.chunk_index.original_file_size
        stored = self._stored(manifest, kind, path)[2]
        return stored - (IV_BYTES + TAG_BYTES if key is not None and stored else 0)

    def _stored(self, manifest: SegmentManifest, kind: str, path: AivenPath
                ) -> tuple[Folder, int, int]:
        """Where index ``kind`` is stored: its object, position and stored size (a range of
        ``.indexes``, or before 2023-10 an object of its own)."""
        if manifest.indexes is None:
            obj = self.segment.object(INDEX_OBJECTS.get(kind, kind))
            try:
                if kind in INDEX_OBJECTS:
                    return obj, 0, storage_for(obj).size(obj)
            except FileNotFoundError:
                pass
            raise FileNotFoundError(2, "no such index object in the tier", str(obj))
        entry = manifest.indexes.get(kind)
        if entry is None:
            raise FileNotFoundError(2, "no such index in the segment's manifest", str(path))
        return self.segment.object("indexes"), entry[0], entry[1]

    def stat(self, path: AivenPath) -> SimpleNamespace:
        return SimpleNamespace(st_size=self.size(path), st_mtime=0.0)

    def exists(self, path: AivenPath) -> bool:
        try:
            self.size(path)
        except FileNotFoundError:
            return False
        return True

    is_file = exists

    def is_dir(self, path: Any) -> bool:
        return isinstance(path, AivenFolder)

    def missing_reason(self, path: AivenPath) -> str:
        return "no such file in the remote segment"

    def open_read(self, path: AivenPath) -> io.BytesIO:
        with self.mapped(path) as buf:
            return io.BytesIO(bytes(buf))

    def read_bytes(self, path: AivenPath, limit: int | None = None) -> bytes:
        with self.mapped(path) as buf:
            return bytes(buf[:limit])

    @contextmanager
    def mapped(self, path: AivenPath) -> Iterator[np.ndarray]:
        with self.mapped_ranges(path, [(0, 1 << 62)]) as buf:
            yield buf

    @contextmanager
    def mapped_streaming(self, path: AivenPath, size: int
                         ) -> Iterator[tuple[np.ndarray, FetchProgress]]:
        progress = FetchProgress([(0, size)])
        with self.mapped(path) as buf:
            progress.done(0)
            yield buf, progress

    def read_unit(self, path: AivenPath) -> int:
        """The bytes a ranged read of ``path`` rounds out to: the original chunk size when the
        ``.log``'s chunks are transformed (each is one zstd frame or one AES-GCM message,
        fetched whole), else 1 (byte ranges fetched as asked; an index is read whole anyway)."""
        manifest, _ = segment_manifest(self.segment)
        if self._kind(path) != "log" or _untransformed(manifest):
            return 1
        return manifest.chunk_index.original_chunk_size

    @contextmanager
    def mapped_ranges(self, path: AivenPath, ranges: Sequence[tuple[int, int]],
                      size: int | None = None) -> Iterator[np.ndarray]:
        manifest, key = segment_manifest(self.segment)
        kind = self._kind(path)
        if kind == "log" and _untransformed(manifest):
            with self._exact_ranges(manifest.chunk_index, ranges, Location(str(path))) as buf:
                yield buf
            return
        if kind == "log":
            buf = self._chunks(manifest, key, ranges, Location(str(path)))
        else:
            buf = np.frombuffer(self._index(manifest, key, kind, path), np.uint8)
        buf.flags.writeable = False
        yield buf

    @contextmanager
    def _exact_ranges(self, index: ChunkIndex, ranges: Sequence[tuple[int, int]],
                      where: Location) -> Iterator[np.ndarray]:
        """Untransformed chunks: the ``.log`` object is the segment, so the byte ranges asked
        for are fetched as they are, not rounded out to whole chunks."""
        obj = self.segment.object("log")
        wanted = coalesce(ranges, index.original_file_size)
        with storage_for(obj).mapped_ranges(obj, wanted, index.object_size) as buf:
            if len(buf) != index.original_file_size:
                raise RemoteTierError(f"the .log object holds {len(buf)} bytes; the manifest "
                                      f"says {index.original_file_size}", where)
            STATS["object_bytes"] += sum(hi - lo for lo, hi in wanted)
            STATS["chunks"] += len({c for lo, hi in wanted for c in index.chunks(lo, hi)})
            yield buf

    def _chunks(self, manifest: SegmentManifest, key: bytes | None,
                ranges: Sequence[tuple[int, int]], where: Location) -> np.ndarray:
        """The ``.log`` with the whole chunks holding ``ranges`` restored (decrypted,
        decompressed) at their original positions; zeros elsewhere."""
        aad = manifest.encryption.aad if manifest.encryption is not None else None
        index = manifest.chunk_index
        buf = np.zeros(index.original_file_size, np.uint8)
        chunks = sorted({c for lo, hi in coalesce(ranges, index.original_file_size)
                         for c in index.chunks(lo, hi)})
        obj = self.segment.object("log")
        with storage_for(obj).mapped_ranges(obj, [(c[2], c[3]) for c in chunks],
                                            index.object_size) as stored:
            for o_lo, o_hi, t_lo, t_hi in chunks:
                STATS["object_bytes"] += t_hi - t_lo
                STATS["chunks"] += 1
                plain = detransform(bytes(stored[t_lo:t_hi]), key=key, aad=aad,
                                    compressed=manifest.compression,
                                    where=Location(str(obj), t_lo))
                if len(plain) != o_hi - o_lo:
                    raise RemoteTierError(f"chunk at stored byte {t_lo} restores to "
                                          f"{len(plain)} bytes, not {o_hi - o_lo}", where)
                buf[o_lo:o_hi] = np.frombuffer(plain, np.uint8)
        return buf

    def _index(self, manifest: SegmentManifest, key: bytes | None, kind: str,
               path: AivenPath) -> bytes:
        aad = manifest.encryption.aad if manifest.encryption is not None else None
        obj, position, stored = self._stored(manifest, kind, path)
        if not stored:
            return b""
        with storage_for(obj).mapped_ranges(obj, [(position, position + stored)]) as raw:
            data = bytes(raw[position:position + stored])
        STATS["object_bytes"] += len(data)
        if len(data) != stored:
            raise RemoteTierError(f"the {obj.name} object ends before the {kind} index "
                                  f"({position}+{stored})", Location(str(obj), position))
        return detransform(data, key=key, aad=aad, compressed=False,
                           where=Location(str(obj), position))


def _untransformed(manifest: SegmentManifest) -> bool:
    """Whether the ``.log`` object is the segment byte for byte: chunks neither compressed nor
    encrypted, and stored at their original sizes."""
    index = manifest.chunk_index
    return (not manifest.compression and manifest.encryption is None
            and index.object_size == index.original_file_size)


def _storage(path: Any) -> AivenStorage:
    return AivenStorage(path.segment)


register_storage(AivenPath, _storage)
register_storage(AivenFolder, _storage)
