"""``__remote_log_metadata`` replayed (tier layer): per topic-id partition, every remote segment
the broker started to copy, with its latest state, and whether the partition's remote data was
deleted — what Kafka's RemoteLogMetadataCache holds after consuming the topic.

Rules (TIERED_STORAGE.md §3): a RemoteLogSegmentMetadataRecord (api key 0) adds a segment in
state COPY_SEGMENT_STARTED with its offsets, size and leader epochs; an update record (1) moves
it to a later state (its custom metadata, an RSM's, comes with the COPY_SEGMENT_FINISHED
update); a partition delete record (2) ends the partition's remote data. A segment is readable
when its latest state is COPY_SEGMENT_FINISHED and its partition was not deleted. Partitions are
keyed by topic *id* and partition (a topic deleted and created again has a new id).
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from ..codec.internal import remote_log_metadata as rlm
from ..errors import Location


@dataclass(frozen=True)
class RemoteSegmentMetadata:
    """One remote segment as the metadata describes it, at its latest state."""

    segment_id: str
    topic_id: str
    topic: str
    partition: int
    start_offset: int
    end_offset: int
    size: int
    max_timestamp_ms: int
    leader_epochs: tuple[tuple[int, int], ...]
    txn_index_empty: bool
    state: int
    custom_metadata: bytes | None
    where: Location  # the record that set the latest state

    @property
    def state_name(self) -> str:
        return rlm.SEGMENT_STATES.get(self.state, f"UNKNOWN({self.state})")

    @property
    def copied(self) -> bool:
        return self.state == rlm.COPY_SEGMENT_FINISHED


@dataclass
class RemotePartitionLog:
    """What the metadata says about one topic-id partition."""

    topic_id: str
    topic: str
    partition: int
    segments: dict[str, RemoteSegmentMetadata] = field(default_factory=dict)
    delete_state: int | None = None  # a RemotePartitionDeleteMetadataRecord's latest state
    orphan_updates: list[Location] = field(default_factory=list)  # updates of unknown segments

    @property
    def deleted(self) -> bool:
        return self.delete_state is not None

    @property
    def delete_state_name(self) -> str | None:
        if self.delete_state is None:
            return None
        return rlm.PARTITION_DELETE_STATES.get(self.delete_state, f"UNKNOWN({self.delete_state})")


RemoteLogMetadata = dict[tuple[str, int], RemotePartitionLog]
"""Replayed metadata keyed by ``(topic id, partition)``."""


def replay(records: Iterable[tuple[bytes | None, Location]]) -> RemoteLogMetadata:
    """Replay record values in log order (value, where it sits).

    Raises
    ------
    CorruptRecordError
        A value that does not decode (naming file and offset): which partition it was about is
        unknown, so no partition's remote segments can be trusted to be complete.
    """
    out: RemoteLogMetadata = {}
    for value, where in records:
        rec = rlm.decode_remote_log_metadata(value, location=where)
        tip = rlm.topic_id_partition_of(rec)
        if tip is None:
            continue  # a snapshot record: only in the broker's snapshot files
        key = (tip[0], tip[2])
        part = out.get(key)
        if part is None:
            part = out[key] = RemotePartitionLog(tip[0], tip[1], tip[2])
        d = rec["data"]
        if rec["type"] == rlm.SEGMENT:
            part.segments[str(rlm.segment_id_of(rec))] = _segment(tip, rec, where)
        elif rec["type"] == rlm.SEGMENT_UPDATE:
            seg = part.segments.get(str(rlm.segment_id_of(rec)))
            if seg is None:
                part.orphan_updates.append(where)
                continue
            custom = d["customMetadata"]
            part.segments[seg.segment_id] = replace(
                seg, state=d["remoteLogSegmentState"], where=where,
                custom_metadata=seg.custom_metadata if custom is None
                else base64.b64decode(custom))
        else:
            part.delete_state = d["remotePartitionDeleteState"]
    return out


def _segment(tip: tuple[str, str, int], rec: dict, where: Location) -> RemoteSegmentMetadata:
    d = rec["data"]
    custom = d["customMetadata"]
    return RemoteSegmentMetadata(
        segment_id=str(rlm.segment_id_of(rec)), topic_id=tip[0], topic=tip[1],
        partition=tip[2], start_offset=d["startOffset"], end_offset=d["endOffset"],
        size=d["segmentSizeInBytes"], max_timestamp_ms=d["maxTimestampMs"],
        leader_epochs=tuple((e["leaderEpoch"], e["offset"]) for e in d["segmentLeaderEpochs"]),
        txn_index_empty=bool(d["txnIndexEmpty"]), state=d["remoteLogSegmentState"],
        custom_metadata=None if custom is None else base64.b64decode(custom), where=where)
