"""Kafka's LocalTieredStorage layout (tier layer): the test RemoteStorageManager of
``kafka-storage``'s test jar, which copies each segment's files byte for byte into a folder.

Layout (TIERED_STORAGE.md §1; ``RemoteTopicPartitionDirectory``, ``RemoteLogSegmentFileset``)::

    <rsm.config.dir>/kafka-tiered-storage/
        <topic>-<partition>-<topic id, 22 chars>/
            <20-digit start offset>-<segment id, 22 chars>.log        the segment, as is
                                                          .index      its offset index
                                                          .timeindex  its time index
                                                          .txnindex   only when not empty
                                                          .snapshot   producer state at its end
                                                          .leader_epoch_checkpoint

No manifest: which copies finished is known only from ``__remote_log_metadata``; a listing
takes every segment with its ``.log``, ``.index`` and ``.timeindex`` (the files the broker hands
over first), reporting the others as incomplete.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

from ..codec.files import naming as N
from ..errors import Location, RemoteTierError
from ..storage import ObjectPath, storage_for
from .metadata import RemoteSegmentMetadata
from .tier import Listing, RemoteSegment, RemoteTier, listing

_UUID = r"[A-Za-z0-9_-]{22}"
FOLDER_RE = re.compile(rf"(.+)-(\d+)-({_UUID})")
FILE_RE = re.compile(rf"(\d{{20}})-({_UUID})\.([a-z_]+)")
SUFFIXES = (N.LOG, N.INDEX, N.TIME_INDEX, N.TXN_INDEX, N.SNAPSHOT, "leader_epoch_checkpoint")
_REQUIRED = (N.LOG, N.INDEX, N.TIME_INDEX)

Folder = os.PathLike[str] | ObjectPath


def remote_file_name(name: str) -> tuple[int, str, str] | None:
    """``(start offset, segment id, suffix)`` of a file name of this layout, else ``None``."""
    m = FILE_RE.fullmatch(name)
    if m is None or m.group(3) not in SUFFIXES:
        return None
    return int(m.group(1)), m.group(2), m.group(3)


def partition_folders(tier: RemoteTier, topic: str, partition: int) -> dict[str, Folder]:
    """The tier's folders of ``topic``-``partition``, by topic id (more than one: the topic was
    deleted and created again)."""
    fs = storage_for(tier.root)
    out: dict[str, Folder] = {}
    for name in fs.listdir(tier.root):
        m = FOLDER_RE.fullmatch(name)
        if m and m.group(1) == topic and int(m.group(2)) == partition:
            out[m.group(3)] = tier.root / name  # type: ignore[operator]
    return out


def listed_segments(folder: Folder) -> Listing:
    """Every segment of a partition folder with its ``.log``, ``.index`` and ``.timeindex``,
    in start-offset order (:func:`.tier.listing`)."""
    return listing(_files(folder), _REQUIRED,
                   lambda start, seg_id, kinds: _segment(folder, seg_id, start, None, kinds,
                                                         "listed"))


def metadata_segments(folder: Folder | None, metas: Iterable[RemoteSegmentMetadata]
                      ) -> list[RemoteSegment]:
    """The files of the segments the metadata lists as copied, checked against it.

    Raises
    ------
    RemoteTierError
        The partition's folder, a segment's ``.log`` or one of its indexes is missing, or the
        ``.log`` is not the size the metadata recorded.
    """
    metas = sorted(metas, key=lambda m: (m.start_offset, m.segment_id))
    if not metas:
        return []
    if folder is None:
        m = metas[0]
        raise RemoteTierError(f"{m.topic}-{m.partition} (topic id {m.topic_id}) has "
                              f"{len(metas)} copied remote segment(s) in __remote_log_metadata "
                              "but no folder in the tier", m.where)
    files = _files(folder)
    out = []
    for m in metas:
        kinds = files.get((m.start_offset, m.segment_id), {})
        missing = [k for k in _REQUIRED if k not in kinds]
        name = f"{m.start_offset:020d}-{m.segment_id}"
        if missing:
            raise RemoteTierError(
                f"remote segment {name} (offsets {m.start_offset}..{m.end_offset}, "
                f"{m.state_name} in __remote_log_metadata) has no "
                f"{', '.join('.' + k for k in missing)} in the tier",
                Location(str(folder), None, m.start_offset))
        seg = _segment(folder, m.segment_id, m.start_offset, m.end_offset, kinds, m.state_name)
        if seg.log_size != m.size:
            raise RemoteTierError(
                f"remote segment {name}.log is {seg.log_size} bytes; __remote_log_metadata "
                f"recorded {m.size}", Location(str(seg.log), None, m.start_offset))
        out.append(seg)
    return out


def _files(folder: Folder) -> dict[tuple[int, str], dict[str, os.stat_result]]:
    """``(start offset, segment id) -> {suffix: stat}`` of the folder's segment files."""
    out: dict[tuple[int, str], dict[str, os.stat_result]] = {}
    with storage_for(folder).scandir(folder) as it:
        for entry in it:
            parsed = remote_file_name(entry.name)
            if parsed is not None and entry.is_file():
                out.setdefault(parsed[:2], {})[parsed[2]] = entry.stat()
    return out


def _segment(folder: Folder, seg_id: str, start: int, end: int | None,
             kinds: dict[str, os.stat_result], state: str) -> RemoteSegment:
    def size(kind: str) -> int | None:
        st = kinds.get(kind)
        return None if st is None else st.st_size

    log = kinds[N.LOG]
    return RemoteSegment(segment_id=seg_id, start_offset=start, end_offset=end, folder=folder,
                         log_name=f"{start:020d}-{seg_id}.{N.LOG}", log_size=log.st_size,
                         mtime=log.st_mtime, index_size=size(N.INDEX),
                         timeindex_size=size(N.TIME_INDEX), txnindex_size=size(N.TXN_INDEX),
                         state=state)
