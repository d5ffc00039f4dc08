"""A partition's whole history with tiered storage (log layer): the remote segments of a tier
(:mod:`kafkalog_spark.tiered`) before the local ones, each offset read once.

:func:`with_remote_tier` gives each live partition dir its remote segments as :class:`Segment`
objects in front of its local ones (``remote_id`` set), and a :class:`RemoteHistory` saying how
they join:

* a remote segment the local log holds too (it starts at or after the first local offset: a
  copy the broker has not deleted locally yet) is read from the local log;
* a remote segment running into the local log (it starts before the first local offset and
  ends at or after it) is read up to the offset before it (``last_offset``), and reported;
* remote segments overlapping each other (divergent copies) and offsets in no segment between
  the log start offset and the log end (a gap) are reported; a read that would cross one is
  refused (:func:`check_history`), never merged or skipped silently.

The ``__remote_log_metadata`` records come from the log dirs read (or, for a partition dir
named directly, the log dir it sits in): :func:`remote_log_metadata`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from ..codec.files import properties as M
from ..codec.files.naming import PARTITION_METADATA
from ..codec.records.decode import DecodeOptions, decode_to_table
from ..errors import Location, RemoteTierError
from ..codec.records.scan import scan_entries
from ..storage import as_path, is_local, mapped_file, storage_for
from ..storage.atomic import read_checkpoint_file
from ..tiered.metadata import RemoteLogMetadata, replay
from ..tiered.segments import tier_segments
from ..tiered.tier import RemoteSegment, RemoteTier
from .lookup import offset_index
from .model import LogDirs, PartitionDir, RemoteHistory, Segment
from .partition_state import checkpointed_log_starts, segment_next_offset

METADATA_TOPIC = "__remote_log_metadata"
UNREAD = object()  # with_remote_tier reads the metadata itself


def with_remote_tier(parts: Sequence[PartitionDir], tier: RemoteTier | None,
                     found: LogDirs, metadata: RemoteLogMetadata | None | object = UNREAD
                     ) -> list[PartitionDir]:
    """``parts`` with their remote segments first (module docstring); unchanged without a
    tier. Loose segments (no topic-partition) have no remote tier. ``metadata``: the replayed
    ``__remote_log_metadata`` when already read (else read here)."""
    if tier is None:
        return list(parts)
    if metadata is UNREAD:
        metadata = remote_log_metadata(found, parts)
    log_starts = checkpointed_log_starts(parts)
    out = []
    for part in parts:
        if part.topic is None or part.partition is None or part.kind is not None:
            out.append(part)
            continue
        out.append(_joined(part, tier, metadata, log_starts.get(part.path)))  # type: ignore
    return out


def found_with_remote_tier(found: LogDirs, tier: RemoteTier | None) -> LogDirs:
    """Everything discovery found, the live partition dirs with their remote segments first
    (:func:`with_remote_tier`); unchanged without a tier."""
    if tier is None:
        return found
    metadata = remote_log_metadata(found, found.partitions)
    log_dirs = tuple(replace(d, partitions=tuple(with_remote_tier(d.partitions, tier, found,
                                                                  metadata)))
                     for d in found.log_dirs)
    return LogDirs(log_dirs, tuple(with_remote_tier(found.partitions, tier, found, metadata)),
                   found.duplicates)


def check_history(part: PartitionDir, lo: int | None, hi: int | None) -> None:
    """Refuse a read of offsets ``[lo, hi]`` (``None``: unbounded) of ``part`` that crosses
    overlapping remote segments or a gap.

    Raises
    ------
    RemoteTierError
        Naming the partition, the offsets and the segments concerned.
    """
    h = part.remote
    if h is None:
        return
    if h.conflicts:
        raise RemoteTierError(f"{part.name}: remote segments overlap each other, which one "
                              f"holds these offsets is unknown: {'; '.join(h.conflicts)}",
                              Location(str(part.path)))
    for first, last in h.gaps:
        if (hi is None or first <= hi) and (lo is None or last >= lo):
            raise RemoteTierError(
                f"{part.name}: offsets {first}..{last} are in no segment, neither in "
                f"{h.tier} nor in the log dir (not copied, or deleted); read from {last + 1} "
                f"(startingOffsets / start_offset) or up to {first} to leave them out",
                Location(str(part.path), None, first))


def segment_max_offset(seg: Segment, max_offset: int | None) -> int | None:
    """A read's inclusive end in ``seg``: ``max_offset`` lowered to the segment's
    ``last_offset`` (a remote segment whose later offsets the local log holds)."""
    if seg.last_offset is None:
        return max_offset
    return seg.last_offset if max_offset is None else min(max_offset, seg.last_offset)


def topic_id(part: PartitionDir) -> str | None:
    """The topic id in the partition dir's ``partition.metadata`` (``None``: no such file)."""
    if not part.partition_metadata:
        return None
    meta = read_checkpoint_file(part.path / PARTITION_METADATA, M.parse_partition_metadata)
    return M.uuid_to_string(meta.topic_id)


def remote_log_metadata(found: LogDirs, parts: Sequence[PartitionDir] = ()
                        ) -> RemoteLogMetadata | None:
    """The replayed ``__remote_log_metadata`` of the log dirs found (and of the log dirs the
    partition dirs ``parts`` sit in); ``None`` when none holds that topic."""
    dirs: dict[str, Path] = {}
    for d in found.log_dirs:
        for p in d.partitions:
            if p.topic == METADATA_TOPIC:
                dirs[str(p.path)] = p.path
    for part in parts:
        if part in found.partitions and part.topic is not None:
            parent = as_path(part.path).parent
            for p in storage_for(parent).glob(parent, f"{METADATA_TOPIC}-*"):
                dirs.setdefault(str(p), p)
    if not dirs:
        return None
    from .discovery import discover

    records: list[tuple[bytes | None, Location]] = []
    for path in sorted(dirs):
        for part in discover(dirs[path]).partitions:
            for seg in part.segments:
                records += _values(seg)
    return replay(records)


def _values(seg: Segment) -> list[tuple[bytes | None, Location]]:
    with mapped_file(seg.log) as buf:
        table = decode_to_table(buf, topic=METADATA_TOPIC, partition=0, file=str(seg.log),
                                options=DecodeOptions(columns=("offset", "value")))
    return [(v, Location(str(seg.log), None, o)) for o, v in
            zip(table.column("offset").to_pylist(), table.column("value").to_pylist())]


def _joined(part: PartitionDir, tier: RemoteTier, metadata: RemoteLogMetadata | None,
            log_start: int | None) -> PartitionDir:
    found = tier_segments(tier, part.topic or "", part.partition or 0, topic_id(part), metadata)
    local_base = part.segments[0].base_offset if part.segments else None
    remote: list[Segment] = []
    spans: list[tuple[int, int]] = []  # offsets each remote segment read holds
    held, overlaps, conflicts = [], [], []
    for r in found.segments:
        end = _end_offset(r)
        name = f"{r.log_name} (offsets {r.start_offset}..{end})"
        if local_base is not None and r.start_offset >= local_base:
            held.append(name)
            continue
        if spans and r.start_offset <= spans[-1][1]:
            conflicts.append(f"{name} starts at or before {spans[-1][1]}, the end of "
                             f"{remote[-1].name}")
        last = None
        if local_base is not None and end >= local_base:
            last = local_base - 1
            overlaps.append(f"{name} runs into the local log, which starts at {local_base}: "
                            f"offsets {local_base}..{end} read from the local log")
        remote.append(_as_segment(r, last))
        spans.append((r.start_offset, max(end if last is None else last,
                                          spans[-1][1] if spans else -1)))
    history = RemoteHistory(
        tier=tier.describe(), source=found.source, topic_id=found.topic_id,
        remote_segments=len(remote), not_read=found.not_read, held_locally=tuple(held),
        overlaps=tuple(overlaps), conflicts=tuple(conflicts),
        gaps=_gaps(spans, local_base, log_start))
    return replace(part, segments=tuple(remote) + part.segments, remote=history)


def _end_offset(r: RemoteSegment) -> int:
    """The segment's last offset: the metadata's, or (a listing's last segment) from its
    batches — on an object store only those from its offset index's last entry on, so that
    planning a read does not fetch the whole segment."""
    if r.end_offset is not None:
        return r.end_offset
    seg = _as_segment(r, None)
    fs = storage_for(seg.log)
    index = None if is_local(fs) else offset_index(seg)
    if index is not None and len(index.positions):
        pos = int(index.positions[-1])
        with fs.mapped_ranges(seg.log, [(pos, seg.log_size)], seg.log_size) as buf:
            tail = scan_entries(buf, start=pos)
            if tail.clean and len(tail):
                return int(tail.last_offset[-1])
    return segment_next_offset(seg) - 1


def _as_segment(r: RemoteSegment, last_offset: int | None) -> Segment:
    return Segment(base_offset=r.start_offset, dir=r.folder, name=r.log_name,  # type: ignore
                   log_size=r.log_size, mtime=r.mtime, index_size=r.index_size,
                   timeindex_size=r.timeindex_size, txnindex_size=r.txnindex_size,
                   remote_id=r.segment_id, last_offset=last_offset)


def _gaps(spans: list[tuple[int, int]], local_base: int | None,
          log_start: int | None) -> tuple[tuple[int, int], ...]:
    """Offsets from the log start to the first local offset that no remote segment holds
    (``spans``: the offsets each remote segment read holds, in order)."""
    expected = log_start if log_start is not None else spans[0][0] if spans else None
    if expected is None:
        return ()
    gaps = []
    for start, end in spans:
        if start > expected:
            gaps.append((expected, start - 1))
        expected = max(expected, end + 1)
    if local_base is not None and local_base > expected:
        gaps.append((expected, local_base - 1))
    return tuple(gaps)
