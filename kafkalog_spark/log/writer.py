"""Local, Spark-free writing (log layer): ``write_log`` turns an Arrow table into partition dirs.

What a broker would load: v2 segments rolled at ``segment.bytes`` (Kafka's roll rule), their
``.index``/``.timeindex`` built with recovery's entry rule, a producer snapshot at the new log
end offset, ``leader-epoch-checkpoint``, ``partition.metadata``, and the log dir's
recovery-point / replication / log-start checkpoints.

Crash safety: every new segment file is first written and fsynced as ``<name>.cleaned`` (a
broker and ``kafkalog recover`` delete ``.cleaned`` files at load), then renamed into place
index files first and ``.log`` last, oldest segment first, so a crash leaves the partition at
its old end or at a complete, valid longer prefix. Checkpoints follow with the atomic text
protocol. Existing segment bytes are never modified: appending starts a new segment at the
current log end offset (like a roll). The log dir's ``.lock`` is held for the whole write, so a
running broker makes this fail instead of both writing.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..codec import checkpoints as C
from ..codec import layout as L
from ..codec.encode import EncodedBatches, encode_record_batches
from ..codec.index import DEFAULT_INDEX_INTERVAL_BYTES, build_indexes
from ..codec.snapshot import ProducerStateTracker, read_snapshot
from ..errors import InvalidOptionError, Location, LogDirError
from . import naming as N
from .atomic import atomic_write_bytes, fsync_dir, read_checkpoint_file, write_checkpoint_file
from .discovery import PartitionDir, _scan_partition_dir, describe_segment
from .lock import hold_lock
from .mapped import mapped_file

DEFAULT_SEGMENT_BYTES = 1 << 30  # segment.bytes (log.segment.bytes default, 1 GiB)
DEFAULT_MAX_BATCH_BYTES = 1 << 20
MAX_TOPIC_LENGTH = 249
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
_MODES = ("append", "error")


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


def write_log(table: pa.Table | pa.RecordBatch, log_dir: str | os.PathLike[str], *,
              topic: str | None = None, partition: int | None = None,
              codec: int | str = "none", mode: str = "append",
              segment_bytes: int = DEFAULT_SEGMENT_BYTES,
              index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
              max_batch_records: int = 10_000, max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
              leader_epoch: int = 0, topic_ids: dict[str, str] | None = None,
              compression_level: int | None = None) -> dict:
    """Write records as Kafka partition dirs under ``log_dir`` (created if missing).

    Parameters
    ----------
    table : pyarrow.Table or RecordBatch
        ``value`` (and optionally ``key``, ``timestamp``, ``headers``) as in
        :mod:`kafkalog_spark.codec.schema`; ``topic`` / ``partition`` columns unless given as
        arguments; an optional ``offset`` column keeps the records' offsets (they must increase
        within a partition and start at or after its current end).
    log_dir : path
        The Kafka log dir (``log.dirs`` entry).
    topic, partition : optional
        Used for every row when the table has no such column (partition defaults to 0).
    codec : {"none", "gzip", "snappy", "lz4", "zstd"} or int
        Compression of every batch.
    mode : {"append", "error"}
        ``append`` continues each partition from its current log end offset; ``error`` refuses
        a partition that already has segments.
    segment_bytes, index_interval_bytes : int
        Kafka's ``segment.bytes`` and ``index.interval.bytes``.
    max_batch_records, max_batch_bytes : int
        Batch size limits (records, uncompressed bytes).
    leader_epoch : int
        Partition leader epoch stamped on the batches and recorded in
        ``leader-epoch-checkpoint`` (``-1``: none).
    topic_ids : dict, optional
        ``{topic: base64url topic id}`` for new ``partition.metadata`` files; a topic that has
        none gets the id already used in this log dir, else a random one.

    Returns
    -------
    dict
        Metrics: ``partitions``, ``records``, ``batches``, ``segments``, ``bytes`` and a
        ``written`` list with one entry per partition.

    Raises
    ------
    InvalidOptionError
        Bad options, topic names or columns.
    LogDirLockedError
        A running broker holds the log dir's ``.lock``.
    """
    if mode not in _MODES:
        raise InvalidOptionError(f"mode must be one of {', '.join(_MODES)}; got {mode!r}")
    if segment_bytes < L.RECORD_BATCH_OVERHEAD:
        raise InvalidOptionError(f"segment_bytes must be at least {L.RECORD_BATCH_OVERHEAD}")
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    written: list[PartitionWrite] = []
    with hold_lock(log_dir):
        for (t, p), rows in _groups(table, topic, partition):
            written.append(_write_partition(
                rows, log_dir, t, p, mode=mode, codec=codec, segment_bytes=segment_bytes,
                index_interval_bytes=index_interval_bytes, max_batch_records=max_batch_records,
                max_batch_bytes=max_batch_bytes, leader_epoch=leader_epoch,
                topic_id=(topic_ids or {}).get(t), compression_level=compression_level))
        _update_log_dir_checkpoints(log_dir, written)
    return {
        "partitions": len(written),
        "records": sum(w.records for w in written),
        "batches": sum(w.batches for w in written),
        "segments": sum(len(w.segments) for w in written),
        "bytes": sum(w.bytes for w in written),
        "written": [vars(w) for w in written],
    }


# --- grouping -----------------------------------------------------------------------------


def _groups(table: pa.Table, topic: str | None,
            partition: int | None) -> Iterator[tuple[tuple[str, int], pa.Table]]:
    """Rows per (topic, partition), sorted by topic then partition, input order kept inside."""
    n = table.num_rows
    topics = _key_column(table, "topic", topic, pa.string(), n)
    parts = _key_column(table, "partition", 0 if partition is None else partition, pa.int32(), n)
    if parts.null_count or topics.null_count:
        raise InvalidOptionError("topic and partition must not be null")
    keyed = pa.table({"t": topics, "p": parts, "i": pa.array(np.arange(n, dtype=np.int64))})
    for group in keyed.group_by(["t", "p"]).aggregate([]).sort_by([("t", "ascending"),
                                                                    ("p", "ascending")]).to_pylist():
        t, p = group["t"], group["p"]
        _check_topic(t)
        if p < 0:
            raise InvalidOptionError(f"partition must be >= 0, got {p}")
        mask = pc.and_(pc.equal(keyed["t"], t), pc.equal(keyed["p"], p))
        yield (t, p), table.filter(mask)


def _key_column(table: pa.Table, name: str, given, typ: pa.DataType, n: int) -> pa.ChunkedArray:
    if name in table.column_names:
        if given is not None and name == "topic":
            raise InvalidOptionError("the table has a topic column; do not also pass topic=")
        return table[name].cast(typ)
    if given is None:
        raise InvalidOptionError(f"no {name!r} column and no {name}= argument")
    return pa.chunked_array([pa.array([given] * n, typ)])


def _check_topic(topic: str) -> None:
    if (not topic or len(topic) > MAX_TOPIC_LENGTH or topic in (".", "..")
            or not _LEGAL_TOPIC.match(topic)):
        raise InvalidOptionError(
            f"illegal topic name {topic!r}: 1-{MAX_TOPIC_LENGTH} characters of [a-zA-Z0-9._-], "
            "not '.' or '..'")


# --- one partition --------------------------------------------------------------------------


def _write_partition(rows: pa.Table, log_dir: Path, topic: str, partition: int, *, mode: str,
                     codec, segment_bytes: int, index_interval_bytes: int,
                     max_batch_records: int, max_batch_bytes: int, leader_epoch: int,
                     topic_id: str | None, compression_level: int | None) -> PartitionWrite:
    pdir = log_dir / N.partition_dir_name(topic, partition)
    existing = _existing(pdir)
    if existing is not None and existing.segments and mode == "error":
        raise LogDirError("partition already has segments (mode='error')", Location(str(pdir)))
    leo = _log_end_offset(existing)
    if "offset" in rows.column_names and rows.num_rows:
        first = pc.min(rows["offset"]).as_py()
        if first < leo:
            raise InvalidOptionError(
                f"{topic}-{partition}: offset column starts at {first}, below the log end "
                f"offset {leo}")
    encoded = encode_record_batches(
        rows, codec=codec, max_batch_records=max_batch_records, max_batch_bytes=max_batch_bytes,
        base_offset=leo, partition_leader_epoch=leader_epoch,
        compression_level=compression_level)
    pdir.mkdir(exist_ok=True)
    result = PartitionWrite(topic, partition, leo, leo, rows.num_rows, len(encoded))
    for start, stop in _segment_ranges(encoded, segment_bytes):
        base = int(encoded.base_offset[start])
        lo, hi = int(encoded.position[start]), int(encoded.position[stop - 1] + encoded.size[stop - 1])
        _publish_segment(pdir, base, encoded.data[lo:hi], index_interval_bytes)
        result.segments.append(base)
        result.bytes += hi - lo
    if len(encoded):
        result.first_offset = int(encoded.base_offset[0])
        result.next_offset = int(encoded.last_offset[-1]) + 1
    _write_partition_files(pdir, existing, result, leader_epoch, topic_id, log_dir)
    return result


def _existing(pdir: Path) -> PartitionDir | None:
    if not pdir.exists():
        return None
    found = _scan_partition_dir(pdir, N.parse_partition_dir_name(pdir.name), root=pdir)
    if found.leftovers:
        names = ", ".join(sorted(p.name for p in found.leftovers))
        raise LogDirError(f"partition dir has leftovers of an interrupted operation ({names}); "
                          "run `kafkalog recover` first", Location(str(pdir)))
    return found


def _log_end_offset(existing: PartitionDir | None) -> int:
    if existing is None or not existing.segments:
        return 0
    info = describe_segment(existing.segments[-1])
    if not info.clean:
        raise LogDirError(f"last segment does not end cleanly ({info.stop_reason}); run "
                          "`kafkalog recover` first",
                          Location(str(info.path), info.valid_bytes, info.base_offset))
    return info.next_offset


def _segment_ranges(encoded: EncodedBatches, segment_bytes: int) -> list[tuple[int, int]]:
    """Batch index ranges per segment, with ``LogSegment.shouldRoll``'s size and offset rules:
    roll when ``size > segment.bytes − incoming`` or the batch's last offset would not fit
    relative to the segment base."""
    ranges = []
    start, size = 0, 0
    for i in range(len(encoded)):
        incoming = int(encoded.size[i])
        overflow = int(encoded.last_offset[i]) - int(encoded.base_offset[start]) > L.INT32_MAX
        if i > start and (size > segment_bytes - incoming or overflow):
            ranges.append((start, i))
            start, size = i, 0
        size += incoming
    if len(encoded):
        ranges.append((start, len(encoded)))
    return ranges


def _publish_segment(pdir: Path, base: int, data: np.ndarray, index_interval_bytes: int) -> None:
    """Write one segment as ``.cleaned`` files, then rename them into place, ``.log`` last."""
    indexes = build_indexes(data, base, index_interval_bytes=index_interval_bytes)
    files = [("index", indexes.offset_index.to_bytes()),
             ("timeindex", indexes.time_index.to_bytes()),
             ("log", data)]
    staged = []
    for kind, content in files:
        final = pdir / N.segment_file_name(base, kind)
        if kind == "log" and final.exists() and final.stat().st_size:
            raise LogDirError("a non-empty segment already exists at this base offset",
                              Location(str(final), 0, base))
        tmp = final.with_name(final.name + "." + N.CLEANED)
        with open(tmp, "wb") as f:
            f.write(memoryview(content))
            f.flush()
            os.fsync(f.fileno())
        staged.append((tmp, final))
    fsync_dir(pdir)
    for tmp, final in staged:
        os.replace(tmp, final)
    fsync_dir(pdir)


def _write_partition_files(pdir: Path, existing: PartitionDir | None, result: PartitionWrite,
                           leader_epoch: int, topic_id: str | None, log_dir: Path) -> None:
    """``leader-epoch-checkpoint``, ``partition.metadata`` and a producer snapshot at the new
    log end offset (what a broker leaves at a clean shutdown)."""
    epoch_file = pdir / N.LEADER_EPOCH_CHECKPOINT
    epochs = read_checkpoint_file(epoch_file, C.parse_leader_epoch_checkpoint)
    if leader_epoch >= 0 and result.records:
        epochs = C.assign_leader_epoch(epochs, leader_epoch, result.first_offset)
    write_checkpoint_file(epoch_file, C.format_leader_epoch_checkpoint(epochs))

    meta = pdir / N.PARTITION_METADATA
    if not meta.exists():
        tid = topic_id or _topic_id_in(log_dir, result.topic) or _random_topic_id()
        write_checkpoint_file(meta, C.format_partition_metadata(tid))

    if result.segments:
        _write_snapshot(pdir, existing, result)


def _write_snapshot(pdir: Path, existing: PartitionDir | None, result: PartitionWrite) -> None:
    tracker = ProducerStateTracker()
    snapshots = sorted(existing.snapshots) if existing is not None else []
    if snapshots:
        latest = snapshots[-1]
        if N.offset_from_file_name(latest.name) == result.first_offset:
            tracker.load_snapshot(read_snapshot(latest.read_bytes(), file=str(latest)))
    for base in result.segments:
        with mapped_file(pdir / N.segment_file_name(base, "log")) as buf:
            tracker.apply(buf, file=str(pdir / N.segment_file_name(base, "log")))
    path = pdir / N.segment_file_name(result.next_offset, "snapshot")
    atomic_write_bytes(path, tracker.snapshot().to_bytes())


def _topic_id_in(log_dir: Path, topic: str) -> str | None:
    for entry in sorted(log_dir.glob(f"{topic}-*/{N.PARTITION_METADATA}")):
        try:
            parsed = N.parse_partition_dir_name(entry.parent.name)
        except LogDirError:
            continue
        if parsed.topic == topic and parsed.kind is None:
            meta = read_checkpoint_file(entry, C.parse_partition_metadata)
            return C.uuid_to_string(meta.topic_id)
    return None


def _random_topic_id() -> str:
    raw = uuid.uuid4().bytes
    return C.uuid_to_string(raw)


def _update_log_dir_checkpoints(log_dir: Path, written: list[PartitionWrite]) -> None:
    """Recovery point and high watermark move to the new log end offset (everything written is
    flushed and, offline, fully replicated); ``log-start-offset-checkpoint`` is created empty
    if missing (Kafka lists only partitions whose log start is above their first segment)."""
    for name in (N.RECOVERY_POINT_CHECKPOINT, N.REPLICATION_OFFSET_CHECKPOINT):
        path = log_dir / name
        offsets = read_checkpoint_file(path, C.parse_offset_checkpoint)
        for w in written:
            offsets[(w.topic, w.partition)] = w.next_offset
        write_checkpoint_file(path, C.format_offset_checkpoint(offsets))
    start = log_dir / N.LOG_START_OFFSET_CHECKPOINT
    if not start.exists():
        write_checkpoint_file(start, C.format_offset_checkpoint({}))
