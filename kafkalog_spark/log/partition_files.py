"""A published partition's own files and the log dir's checkpoints (log layer): what a write
leaves besides segments — ``leader-epoch-checkpoint``, ``partition.metadata``, a producer
snapshot at the new log end offset, and the recovery-point / replication / log-start files."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..codec.files import checkpoints as C
from ..codec.files import naming as N
from ..codec.files import properties as M
from ..codec.files.snapshot import ProducerStateTracker, read_snapshot
from ..errors import LogDirError
from ..storage import storage_for
from ..storage.atomic import atomic_write_bytes, read_checkpoint_file, write_checkpoint_file
from .model import PartitionDir

Step = Callable[[str], None]


@dataclass
class PartitionWrite:
    """What one partition received."""

    topic: str
    partition: int
    first_offset: int
    next_offset: int
    records: int
    batches: int
    segments: list[int] = field(default_factory=list)  # base offsets of the new segments
    bytes: int = 0
    replaced: bool = False


def say(step: Step | None, label: str) -> None:
    """Tell ``step`` (progress, crash tests) what is about to change."""
    if step is not None:
        step(label)


def write_partition_files(pdir: Path, existing: PartitionDir | None, result: PartitionWrite,
                           leader_epoch: int, topic_id: str | None, log_dir: Path,
                           step: Step | None = None, *, unpublished: bool = False) -> None:
    """``leader-epoch-checkpoint``, ``partition.metadata`` and a producer snapshot at the new
    log end offset (what a broker leaves at a clean shutdown).

    In a published dir each file is replaced atomically (tmp, rename, folder fsync); in an
    ``unpublished`` one (assembled before it is renamed into the log dir) each is written whole
    and fsynced, and the caller fsyncs the folder once before publishing it."""
    write = _write_new if unpublished else atomic_write_bytes
    epoch_file = pdir / N.LEADER_EPOCH_CHECKPOINT
    epochs = read_checkpoint_file(epoch_file, C.parse_leader_epoch_checkpoint)
    if leader_epoch >= 0 and result.records:
        epochs = C.assign_leader_epoch(epochs, leader_epoch, result.first_offset)
    say(step, f"write {pdir.name}/{N.LEADER_EPOCH_CHECKPOINT}")
    write(epoch_file, C.format_leader_epoch_checkpoint(epochs).encode("utf-8"))

    meta = pdir / N.PARTITION_METADATA
    if not storage_for(meta).exists(meta):  # an existing partition keeps its topic id
        tid = topic_id_for(log_dir, result.topic, topic_id)
        say(step, f"write {pdir.name}/{N.PARTITION_METADATA}")
        write(meta, M.format_partition_metadata(tid).encode("utf-8"))

    if result.segments:
        say(step, f"write {pdir.name} producer snapshot")
        write(pdir / N.segment_file_name(result.next_offset, N.SNAPSHOT),
              _snapshot(existing, result))


def _write_new(path: Path, data: bytes) -> None:
    storage_for(path).write_whole(path, data, exclusive=True)


def _snapshot(existing: PartitionDir | None, result: PartitionWrite) -> bytes:
    # written batches carry no producer id (staging.StagedSegment), so the state at the new log
    # end is the one at the old log end: the new segments need not be replayed
    tracker = ProducerStateTracker()
    snapshots = sorted(existing.snapshots) if existing is not None else []
    if snapshots:
        latest = snapshots[-1]
        if N.offset_from_file_name(latest.name) == result.first_offset:
            raw = storage_for(latest).read_bytes(latest)
            tracker.load_snapshot(read_snapshot(raw, file=str(latest)))
    # in the order a broker's HashMap of producers, filled from that snapshot, writes them
    return tracker.snapshot(order="java_hashmap").to_bytes()


def topic_id_for(log_dir: Path, topic: str, given: str | None = None) -> str:
    """The topic id for a new partition dir of ``topic``: ``given``, else the one its other
    partitions in ``log_dir`` have, else a new random one."""
    return given or _topic_id_in(log_dir, topic) or M.random_uuid()


def _topic_id_in(log_dir: Path, topic: str) -> str | None:
    for entry in storage_for(log_dir).glob(log_dir, f"{topic}-*/{N.PARTITION_METADATA}"):
        try:
            parsed = N.parse_partition_dir_name(entry.parent.name)
        except LogDirError:
            continue
        if parsed.topic == topic and parsed.kind is None:
            meta = read_checkpoint_file(entry, M.parse_partition_metadata)
            return M.uuid_to_string(meta.topic_id)
    return None


def update_log_dir_checkpoints(log_dir: Path, written: list[PartitionWrite],
                                step: Step | None = None) -> None:
    """Recovery point and high watermark move to the new log end offset (everything written is
    flushed and, offline, fully replicated); ``log-start-offset-checkpoint`` is created empty
    if missing (Kafka lists only partitions whose log start is above their first segment).
    A replaced partition loses its log-start and cleaner entries: its new log starts at its
    first segment and has never been cleaned."""
    for name in (N.RECOVERY_POINT_CHECKPOINT, N.REPLICATION_OFFSET_CHECKPOINT):
        path = log_dir / name
        offsets = read_checkpoint_file(path, C.parse_offset_checkpoint)
        for w in written:
            offsets[(w.topic, w.partition)] = w.next_offset
        say(step, f"write {name}")
        write_checkpoint_file(path, C.format_offset_checkpoint(offsets))
    replaced = {(w.topic, w.partition) for w in written if w.replaced}
    for name in (N.LOG_START_OFFSET_CHECKPOINT, N.CLEANER_OFFSET_CHECKPOINT):
        path = log_dir / name
        if not storage_for(path).exists(path):
            if name == N.LOG_START_OFFSET_CHECKPOINT:
                say(step, f"write {name}")
                write_checkpoint_file(path, C.format_offset_checkpoint({}))
            continue
        offsets = read_checkpoint_file(path, C.parse_offset_checkpoint)
        if replaced & offsets.keys():
            kept = {tp: o for tp, o in offsets.items() if tp not in replaced}
            say(step, f"write {name}")
            write_checkpoint_file(path, C.format_offset_checkpoint(kept))

