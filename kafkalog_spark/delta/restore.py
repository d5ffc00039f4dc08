"""Restore (Delta layer): ``kafkalog restore TABLE DEST_LOG_DIR`` — the way back from a table
written by ``migrate`` to partition dirs a broker loads, with the original offsets.

A table (``layout="single"``) or a folder of per-topic tables is read back file after file, each
file once (:mod:`.restore_read`: memory bounded by a scan batch and one carried batch per
partition, not by the table), every row routed to its topic-partition's writer. Rows are
grouped back into their batches by ``batchBaseOffset`` and each batch is encoded as a v2 batch
with the header the columns recorded: base offset, ``batchLastOffset`` (a compacted batch keeps
its last offset), leader epoch, codec, timestamp type (LogAppendTime: the recorded batch time),
producer id/epoch, base sequence (``sequence`` of the first record minus its offset delta),
transactional and control flags — so an uncompressed v2 batch a producer wrote comes back byte
for byte. Batches of v0/v1 messages come back as v2 batches with the same records. A compacted
batch whose first record was removed had a base timestamp nothing recorded, and an empty batch
has no rows at all: those differ (records equal; the empty batch is an offset gap).

Batches go into segments of ``segment_bytes`` (a new segment also where an offset would not fit
a 32-bit delta from its base); each segment is streamed to ``<base>.log.tmp`` and renamed to
``<base>.log`` when whole, so a run killed anywhere leaves whole segments, and the next run,
like an incremental one into a dir that already holds a prefix, continues from each partition's
log end offset. Then ``partition.metadata`` and the offset checkpoints are written, and
:func:`~kafkalog_spark.recovery.recover.recover` rebuilds indexes, transaction indexes,
producer snapshots and leader epochs from the batches (with Spark, each task first derives its
own new partition's files, and ``recover`` reads only what no task could).

Transactions: a table migrated without ``include_control`` has no commit/abort markers; its
transactional batches would come back as transactions that never end (a hanging transaction
blocks every read_committed consumer), so such a table is refused unless
``allow_open_transactions``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..codec import layout as L
from ..codec.files import checkpoints as C
from ..codec.files import naming as N
from ..codec.files import properties as M
from ..codec.records.encode import BatchSpec, encode_batches
from ..errors import InvalidOptionError, KafkaLogError, Location, LogDirError
from ..log.discovery import discover
from ..log.partition_files import topic_id_for
from ..log.partition_state import segment_next_offset
from ..log.selection import check_selected, require_kafka_data
from ..log.staging import DEFAULT_SEGMENT_BYTES
from ..storage import storage_for
from ..storage.atomic import read_checkpoint_file, write_checkpoint_file
from ..storage.lock import ensure_local, ensure_not_locked, hold_lock
from .commit import delta_table, table_exists
from .history import RUN_ID_KEY, has_app_transactions, run_id_of
from .options import MigrateOptions
from .restore_read import NEEDED, Survey, Tp, stream, survey_tables, windows

Step = Callable[[str], None]
APP_ID_PREFIX = MigrateOptions.app_id_prefix  # migrate's default
_LOOKBACK = 1000  # commits searched for a sign of migrate


@dataclass
class PartitionRestore:
    """What restore did (or would do) to one partition."""

    topic: str
    partition: int
    start: int  # the partition's log end offset before the run (0: new)
    end: int = 0  # after
    batches: int = 0
    records: int = 0
    bytes: int = 0
    segments: list[int] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"topic": self.topic, "partition": self.partition, "from_offset": self.start,
                "log_end_offset": self.end, "batches": self.batches, "records": self.records,
                "bytes": self.bytes, "segments": self.segments}


def restore(table: str | os.PathLike[str], dest: str | os.PathLike[str], *,
            topics: Sequence[str] | None = None, execute_plan: bool = True,
            segment_bytes: int = DEFAULT_SEGMENT_BYTES,
            topic_ids: Mapping[str, str] | None = None, allow_open_transactions: bool = False,
            step: Step | None = None, spark=None) -> dict:
    """Write (or with ``execute_plan=False`` plan) the partitions of a migrated table into the
    log dir ``dest`` (created if missing; an existing partition is continued from its end).

    Parameters
    ----------
    table : path
        A table written by ``migrate`` (single layout), or the folder of its per-topic tables.
    dest : path
        The log dir to write.
    topics : sequence of str, optional
        Restore only these topics.
    segment_bytes : int
        Largest segment written (Kafka's ``segment.bytes``).
    topic_ids : mapping, optional
        ``{topic: base64url id}`` for new ``partition.metadata`` files (to match the cluster's
        metadata); default: the id other partitions of the topic in ``dest`` have, else random.
    allow_open_transactions : bool
        Restore transactional batches of a table that holds no transaction markers.
    step : callable, optional
        Called with a label before every durable operation (not in Spark tasks).
    spark : SparkSession, optional
        Survey the tables (one task each) and restore the partitions (one task each, also
        writing its derived files) as Spark tasks; every executor must see the tables and
        ``dest`` at the same paths. The driver writes the checkpoints, recovers the rest.

    Returns
    -------
    dict
        ``{"executed", "partitions": [...]}`` (per partition: offsets, batches, records,
        bytes and segments written).

    Raises
    ------
    InvalidOptionError
        Not a table written by ``migrate``, a column restore needs is missing (named), or
        transactional batches without markers.
    LogDirLockedError
        A live broker holds ``dest``.
    """
    from ..recovery.recover import recover

    dest = Path(dest)
    ensure_local(dest)
    tables = migrate_tables(Path(table))
    if storage_for(dest).exists(dest):
        ensure_not_locked(dest)
    start_of = lambda tp: _log_end(dest / f"{tp[0]}-{tp[1]}")  # noqa: E731
    found = survey_tables(tables, start_of, spark)
    # a topic that is not there is an error listing those that are, as in read_log
    check_selected({tp for parts in found.values() for tp in parts}, [table], topics=topics)
    found = {t: {tp: s for tp, s in parts.items() if topics is None or tp[0] in topics}
             for t, parts in found.items()}
    for t, parts in found.items():
        for tp, s in sorted(parts.items()):
            _check_transactions(t, tp, s, allow_open_transactions)
    if not execute_plan:
        out = [sink.result for t, parts in found.items()
               for sink in _read_table(t, {tp: _Plan(tp, s.start) for tp, s in parts.items()},
                                       parts)]
        return {"executed": False, "partitions": [p.to_dict() for p in _ordered(out)]}
    fs = storage_for(dest)
    fs.make_dirs(dest, exist_ok=True)
    # the topic ids are settled on the driver: tasks writing two partitions of a new topic
    # at once must not pick two random ids
    ids = {tp[0]: topic_id_for(dest, tp[0], (topic_ids or {}).get(tp[0]))
           for parts in found.values() for tp in parts}
    with hold_lock(dest):
        if spark is not None:
            work = [(t, tp, s) for t, parts in found.items() for tp, s in parts.items()]
            task = partial(_restore_task, dest=dest, segment_bytes=segment_bytes, topic_ids=ids)
            done = (spark.sparkContext.parallelize(work, len(work)).map(task).collect()
                    if work else [])
            out = [p for p, _ in done]
            recovered = {dest / f"{p.topic}-{p.partition}": ends for p, ends in done if ends}
        else:
            out = [sink.close() for t, parts in found.items() for sink in _read_table(
                t, {tp: _Writer(dest, tp, segment_bytes, ids[tp[0]], step)
                    for tp in parts}, parts)]
            recovered = {}
        out = _ordered(out)
        _checkpoints(dest, out, step)
    recover([dest], execute_plan=True, step=step, recovered=recovered, repair_trusted=True)
    return {"executed": True, "partitions": [p.to_dict() for p in out]}


def _ordered(done: list[PartitionRestore]) -> list[PartitionRestore]:
    return sorted(done, key=lambda p: (p.topic, p.partition))


def migrate_tables(path: Path, needed: Sequence[str] = NEEDED, what: str = "restore"
                   ) -> list[Path]:
    """The tables ``migrate`` wrote at ``path``: itself, or each per-topic table under it;
    refuses other tables and tables without the ``needed`` columns (``what`` needs them)."""
    fs = storage_for(path)
    if table_exists(path):
        found = [path]
    elif fs.is_dir(path):  # delta-rs fails on a file (a log dir's checkpoints): folders only
        found = sorted(path / n for n in fs.listdir(path)
                       if fs.is_dir(path / n) and table_exists(path / n))
    else:
        found = []
    if not found:
        raise InvalidOptionError(f"{path}: not a Delta table written by kafkalog migrate (nor "
                                 f"a folder of per-topic tables){_kafka_hint(path)}")
    for t in found:
        dt = delta_table(t)
        names = set(dt.schema().to_arrow().names)
        missing = [c for c in needed if c not in names]
        if missing:
            raise InvalidOptionError(f"{t}: the table lacks the columns {what} needs: "
                                     f"{', '.join(missing)} (migrate with headers and metadata)")
        if not (any(run_id_of(h) for h in dt.history(_LOOKBACK))
                or has_app_transactions(t, APP_ID_PREFIX, _LOOKBACK)):
            raise InvalidOptionError(f"{t}: not a table written by kafkalog migrate (no commit "
                                     f"carries {RUN_ID_KEY}, none records a "
                                     f"{APP_ID_PREFIX}:<topic>:<partition> transaction)")
    return found


def _kafka_hint(path: Path) -> str:
    """Says so when ``path`` holds Kafka log data (a log dir named where a table belongs)."""
    try:
        require_kafka_data(discover([path]))
    except KafkaLogError:
        return ""
    return "; it holds Kafka log data (a log dir or partition dir): migrate it into a table first"


def _log_end(pdir: Path) -> int:
    """The log end offset of an existing partition dir (0 when new)."""
    if not storage_for(pdir).is_dir(pdir):
        return 0
    segs = discover([pdir]).partitions[0].segments
    return segment_next_offset(segs[-1]) if segs else 0


def _batches(rows: pa.Table, where: str) -> Iterator[tuple[int, int, memoryview]]:
    """``(base offset, last offset, bytes)`` of each batch of ``rows`` (whole batches, in
    offset order), encoded from the recorded header fields (module docstring)."""
    base = rows["batchBaseOffset"].to_numpy()
    starts = np.flatnonzero(np.diff(base, prepend=base[0] - 1) != 0)
    bounds = np.append(starts, rows.num_rows).tolist()
    firsts = rows.take(pa.array(starts)).to_pydict()  # each batch's header fields, once
    codecs = [L.CODEC_IDS.get(c) for c in firsts["compression"]]
    ts_ms = rows["timestamp"].cast(pa.int64()).fill_null(-1000).to_numpy() // 1000
    off = rows["offset"].to_numpy()
    keys, values, headers = rows["key"], rows["value"], rows["headers"]
    if headers.null_count:  # v0/v1 records have none
        headers = pa.array([h or [] for h in headers.to_pylist()], headers.type)
    specs, lasts = [], []
    for i, a in enumerate(bounds[:-1]):
        b0, last = firsts["batchBaseOffset"][i], firsts["batchLastOffset"][i]
        if codecs[i] is None:
            raise LogDirError(f"unknown compression {firsts['compression'][i]!r} in the table",
                              Location(where, None, b0))
        ts_type = max(int(firsts["timestampType"][i]), 0)
        seq = firsts["sequence"][i]
        base_seq = -1 if seq is None or seq < 0 else (seq - (int(off[a]) - b0)) % (L.INT32_MAX + 1)
        specs.append(BatchSpec(
            base_offset=b0, partition_leader_epoch=firsts["leaderEpoch"][i], codec=codecs[i],
            timestamp_type=ts_type,
            log_append_time=int(ts_ms[a]) if ts_type == L.LOG_APPEND_TIME else None,
            producer_id=firsts["producerId"][i], producer_epoch=firsts["producerEpoch"][i],
            base_sequence=base_seq, is_transactional=bool(firsts["isTransactional"][i]),
            is_control=bool(firsts["isControl"][i]), last_offset_delta=last - b0))
        lasts.append(last)
    encoded = encode_batches(keys, values, ts_ms, off, specs=specs, counts=np.diff(bounds),
                             headers=headers)
    for i, (spec, last) in enumerate(zip(specs, lasts)):
        yield spec.base_offset, last, encoded.batch(i)


def _check_transactions(table: Path, tp: Tp, found: Survey, allow_open: bool) -> None:
    """Refuse transactional batches without any transaction marker (module docstring)."""
    if found.transactional and not found.control and not allow_open:
        raise InvalidOptionError(f"{table}: {tp[0]}-{tp[1]} has transactional batches but no "
                                 "transaction markers (migrated without include_control): "
                                 "restored, those transactions would never end; migrate again "
                                 "with --control, or pass allow_open_transactions")


class _Plan:
    """A dry run's sink: counts what would be written."""

    def __init__(self, tp: Tp, start: int) -> None:
        self.result = PartitionRestore(tp[0], tp[1], start, start)

    def take(self, rows: pa.Table) -> None:
        self.result.records += rows.num_rows
        self.result.batches += len(np.unique(rows["batchBaseOffset"].to_numpy()))
        self.result.end = int(rows["batchLastOffset"][-1].as_py()) + 1


class _Writer:
    """A partition's sink: its batches encoded into segments (a killed run's unfinished
    segment removed first), then ``partition.metadata``."""

    def __init__(self, dest: Path, tp: Tp, segment_bytes: int, topic_id: str,
                 step: Step | None) -> None:
        self.pdir, self.topic_id, self.step = dest / f"{tp[0]}-{tp[1]}", topic_id, step
        fs = storage_for(self.pdir)
        fs.make_dirs(self.pdir, exist_ok=True)
        for name in fs.listdir(self.pdir):
            if name.endswith(f".{N.LOG}.tmp"):
                fs.remove(self.pdir / name)
        start = _log_end(self.pdir)
        self.result = PartitionRestore(tp[0], tp[1], start, start)
        self.segments = _SegmentWriter(self.pdir, segment_bytes, step)

    def take(self, rows: pa.Table) -> None:
        out, start = self.result, self.result.start
        if int(rows["batchBaseOffset"][0].as_py()) < start:
            raise LogDirError(f"{self.pdir} ends at offset {start}, inside a batch of the table "
                              f"(base offset {rows['batchBaseOffset'][0].as_py()})",
                              Location(str(self.pdir), None, start))
        out.records += rows.num_rows
        for b0, last, data in _batches(rows, str(self.pdir)):
            self.segments.add(b0, last, data)
            out.batches += 1
            out.bytes += len(data)
            out.end = last + 1

    def close(self) -> PartitionRestore:
        self.result.segments = self.segments.close()
        meta = self.pdir / N.PARTITION_METADATA
        if not storage_for(meta).exists(meta):
            if self.step is not None:
                self.step(f"write {meta}")
            write_checkpoint_file(meta, M.format_partition_metadata(self.topic_id))
        return self.result


def _read_table(table: Path, sinks: dict, found: Mapping[Tp, Survey],
                where: pc.Expression | None = None) -> list:
    """Feed each partition's rows of ``table`` (``where``: an integer condition that keeps
    them) to its sink: the partitions whose rows are in file order in one pass over the table,
    the others window by window."""
    ordered = {tp: found[tp].start for tp in sinks if found[tp].ordered}
    for tp, rows in stream(table, ordered, where):
        sinks[tp].take(rows)
    for tp in sinks:
        if not found[tp].ordered:
            for rows in windows(table, tp, found[tp]):
                sinks[tp].take(rows)
    return list(sinks.values())


def _restore_task(work: tuple[Path, Tp, Survey], *, dest: Path, segment_bytes: int,
                  topic_ids: Mapping[str, str]
                  ) -> tuple[PartitionRestore, tuple[int, int] | None]:
    """One partition as a Spark task restores it: its rows only (pushed down by partition),
    then its derived files as ``recover`` would write them after :func:`_checkpoints` (the
    driver does not read every restored segment again alone); with ``(first base, log end)``."""
    from ..recovery.recover import recover_written_partition

    table, tp, found = work
    sink = _Writer(dest, tp, segment_bytes, topic_ids[tp[0]], None)
    _read_table(table, {tp: sink}, {tp: found}, pc.field("partition") == tp[1])
    done = sink.close()
    return done, (recover_written_partition(sink.pdir, done.end) if done.segments else None)


class _SegmentWriter:
    """Batches into segment files: ``<base>.log.tmp`` streamed, renamed whole."""

    def __init__(self, pdir: Path, segment_bytes: int, step: Step | None) -> None:
        self.pdir, self.limit, self.step = pdir, segment_bytes, step
        self.fs = storage_for(pdir)
        self.file = None
        self.base = self.size = 0
        self.written: list[int] = []

    def add(self, base: int, last: int, data: bytes | memoryview) -> None:
        if self.file is not None and (self.size + len(data) > self.limit
                                      or last - self.base > L.INT32_MAX):
            self._finish()
        if self.file is None:
            self.base, self.size = base, 0
            tmp = self.pdir / f"{N.segment_file_name(base, N.LOG)}.tmp"
            if self.step is not None:
                self.step(f"write {tmp}")
            self.file = self.fs.open_write(tmp)
        self.file.write(data)
        self.size += len(data)

    def _finish(self) -> None:
        self.fs.close_durably(self.file)
        self.file = None
        final = self.pdir / N.segment_file_name(self.base, N.LOG)
        if self.step is not None:
            self.step(f"rename {final.name}.tmp -> {final.name}")
        self.fs.rename(final.with_name(final.name + ".tmp"), final)
        self.fs.fsync_dir(self.pdir)
        self.written.append(self.base)

    def close(self) -> list[int]:
        if self.file is not None:
            self._finish()
        return self.written


def _checkpoints(dest: Path, done: list[PartitionRestore], step: Step | None) -> None:
    """Recovery point and high watermark at each restored log end; the log start of a new
    partition at its first restored offset."""
    for name in (N.RECOVERY_POINT_CHECKPOINT, N.REPLICATION_OFFSET_CHECKPOINT,
                 N.LOG_START_OFFSET_CHECKPOINT):
        path = dest / name
        offsets = read_checkpoint_file(path, C.parse_offset_checkpoint)
        for p in done:
            tp = (p.topic, p.partition)
            if name == N.LOG_START_OFFSET_CHECKPOINT:
                if tp not in offsets and p.start == 0 and p.segments:
                    offsets[tp] = p.segments[0]
            else:
                offsets[tp] = p.end
        if step is not None:
            step(f"write {name}")
        write_checkpoint_file(path, C.format_offset_checkpoint(offsets))
