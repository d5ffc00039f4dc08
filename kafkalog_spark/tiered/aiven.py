"""Aiven's tiered-storage-for-apache-kafka layout, ``segment.format=kafka`` (tier layer): where a
partition's remote segments are and what each holds, from listings and manifests.

Layout (TIERED_STORAGE.md §2.1; ``ObjectKeyFactory``)::

    <key.prefix><topic>-<topic id>/<partition>/<20-digit start offset>-<segment id>.log
                                                                              .indexes
                                                                              .rsm-manifest

and before 2023-10 (Aiven commit 107d1653, "concat indexes in the same object"), instead of
``.indexes``, one object per index: ``.index``, ``.timeindex``, ``.snapshot``, ``.txnindex``
(only when the segment has one) and ``.leader-epoch-checkpoint``, each the broker's file whole
(encrypted as one chunk when the segment is); its manifest has no ``segmentIndexes``.

The tier given is the bucket (or folder, for the filesystem backend) with the key prefix: a
prefix is a folder here, so it must end in ``/`` (Aiven adds no separator). When the broker
stored the object key in the segment's custom metadata (field 2, ``object_key``, in the
COPY_SEGMENT_FINISHED record), that key is used. Segments are read through
:mod:`.aiven_storage`. Not read: the Iceberg format.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..errors import Location, RemoteTierError
from ..storage import storage_for
from .aiven_storage import AivenFolder, AivenSegment, segment_manifest
from .metadata import RemoteSegmentMetadata
from .tier import Listing, RemoteSegment, RemoteTier, listing

_UUID = r"[A-Za-z0-9_-]{22}"
OBJECT_RE = re.compile(rf"(\d{{20}})-({_UUID})\.(log|indexes|rsm-manifest|index|timeindex"
                       r"|snapshot|txnindex|leader-epoch-checkpoint)")
_REQUIRED = ("log", "indexes", "rsm-manifest")
_INDEX_OBJECTS = ("index", "timeindex", "snapshot", "leader-epoch-checkpoint")  # before 2023-10
OBJECT_KEY_TAG = 2  # SegmentCustomMetadataField.OBJECT_KEY


def partition_folders(tier: RemoteTier, topic: str, partition: int) -> dict[str, object]:
    """The tier's folders of ``topic``-``partition`` by topic id (``<topic>-<id>/<partition>``)."""
    fs = storage_for(tier.root)
    out: dict[str, object] = {}
    for name in fs.listdir(tier.root):
        m = re.fullmatch(rf"(.+)-({_UUID})", name)
        if m and m.group(1) == topic:
            folder = tier.root / name / str(partition)  # type: ignore[operator]
            if fs.is_dir(folder):
                out[m.group(2)] = folder
    return out


def listed_segments(tier: RemoteTier, folder) -> Listing:
    """Every segment of a partition folder with its three objects, in start-offset order."""
    found: dict[tuple[int, str], set[str]] = {}
    for name in storage_for(folder).listdir(folder):
        m = OBJECT_RE.fullmatch(name)
        if m:
            found.setdefault((int(m.group(1)), m.group(2)), set()).add(m.group(3))
    return listing(found, _required, lambda start, seg_id, kinds: _segment(
        tier, folder / f"{start:020d}-{seg_id}", seg_id, start, None, "listed"))


def _required(kinds: set[str]) -> tuple[str, ...]:
    """The objects a listed segment needs: with objects of single indexes (the layout from
    before 2023-10) and no ``.indexes``, those instead."""
    if "indexes" not in kinds and kinds.intersection(_INDEX_OBJECTS):
        return ("log", "rsm-manifest", *_INDEX_OBJECTS)
    return _REQUIRED


def metadata_segments(tier: RemoteTier, folder, metas: Iterable[RemoteSegmentMetadata]
                      ) -> list[RemoteSegment]:
    """The segments the metadata lists as copied, at their object keys, checked against their
    manifests.

    Raises
    ------
    RemoteTierError
        A manifest missing, or a ``.log`` of another size than the metadata recorded.
    """
    out = []
    for m in sorted(metas, key=lambda m: (m.start_offset, m.segment_id)):
        key = custom_object_key(m.custom_metadata)
        if key is not None:
            base = tier.root / key  # type: ignore[operator]
        elif folder is None:
            raise RemoteTierError(f"{m.topic}-{m.partition} (topic id {m.topic_id}) has copied "
                                  "remote segments in __remote_log_metadata but no folder in "
                                  "the tier", m.where)
        else:
            base = folder / f"{m.start_offset:020d}-{m.segment_id}"
        seg = _segment(tier, base, m.segment_id, m.start_offset, m.end_offset, m.state_name)
        if seg.log_size != m.size:
            raise RemoteTierError(f"remote segment {base} holds {seg.log_size} bytes of .log; "
                                  f"__remote_log_metadata recorded {m.size}",
                                  Location(str(base), None, m.start_offset))
        out.append(seg)
    return out


def custom_object_key(custom: bytes | None) -> str | None:
    """Field 2 (``object_key``) of Aiven's custom metadata: ``uvarint count``, then per field
    ``uvarint tag, uvarint size, value`` (a compact string: ``uvarint len + 1``, UTF-8)."""
    if not custom:
        return None
    pos = 0

    def uvarint() -> int:
        nonlocal pos
        value = shift = 0
        while True:
            byte = custom[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7

    try:
        for _ in range(uvarint()):
            tag, size = uvarint(), uvarint()
            end = pos + size
            if tag == OBJECT_KEY_TAG:
                n = uvarint() - 1
                return custom[pos:pos + n].decode("utf-8")
            pos = end
    except (IndexError, UnicodeDecodeError):
        return None
    return None


def _segment(tier: RemoteTier, base, seg_id: str, start: int, end: int | None,
             state: str) -> RemoteSegment:
    seg = AivenSegment(base, tier.private_keys)
    manifest, key = segment_manifest(seg)
    folder = AivenFolder(seg)
    fs = storage_for(folder)

    def size(kind: str) -> int | None:
        path = folder / f"{start:020d}-{seg_id}.{kind}"
        return fs.size(path) if fs.exists(path) else None

    return RemoteSegment(segment_id=seg_id, start_offset=start, end_offset=end, folder=folder,
                         log_name=f"{start:020d}-{seg_id}.log",
                         log_size=manifest.chunk_index.original_file_size, mtime=0.0,
                         index_size=size("index"), timeindex_size=size("timeindex"),
                         txnindex_size=size("txnindex"), state=state)
