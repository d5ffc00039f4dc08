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
own new partition's files, and ``recover`` reads only what no task could). With Spark a big
partition is restored in offset ranges: each range's batches go into a ``.piece.tmp`` file of
the task attempt, and a last task writes the segments from the pieces, in order, by the same rule
(:mod:`.restore_spark`); a killed run's pieces are removed by the next run. The writing itself,
batches to segments or pieces, is :mod:`.restore_write`.

Transactions: a table migrated without ``include_control`` has no commit/abort markers; its
transactional batches would come back as transactions that never end (a hanging transaction
blocks every read_committed consumer), so such a table is refused unless
``allow_open_transactions``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..codec.files import checkpoints as C
from ..codec.files import naming as N
from ..errors import InvalidOptionError, KafkaLogError
from ..log.discovery import discover
from ..log.partition_files import topic_id_for
from ..log.selection import check_selected, require_kafka_data
from ..log.staging import DEFAULT_SEGMENT_BYTES
from ..storage import storage_for
from ..storage.atomic import read_checkpoint_file, write_checkpoint_file
from ..storage.lock import ensure_local, ensure_not_locked, hold_lock
from .commit import delta_table, table_exists
from .history import RUN_ID_KEY, has_app_transactions, run_id_of
from .options import MigrateOptions
from .restore_read import NEEDED, Survey, Tp, feed, survey_tables
from .restore_spark import restore_spark
from .restore_write import PartitionRestore, Plan, Step, Writer, log_end, partition_dir

APP_ID_PREFIX = MigrateOptions.app_id_prefix  # migrate's default
_LOOKBACK = 1000  # commits searched for a sign of migrate


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
        writing its derived files; a partition holding more than a slot's share of the
        restore in offset ranges, joined by a task of its own) as Spark tasks; every executor
        must see the tables and ``dest`` at the same paths. The driver writes the checkpoints,
        recovers the rest.

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
    start_of = lambda tp: log_end(partition_dir(dest, tp))  # noqa: E731
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
               for sink in feed(t, {tp: Plan(tp, s.start) for tp, s in parts.items()},
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
            done = restore_spark(spark, found, dest, segment_bytes, ids)
            out = [p for p, _ in done]
            recovered = {partition_dir(dest, (p.topic, p.partition)): ends
                         for p, ends in done if ends}
        else:
            out = [sink.close(ids[sink.tp[0]], step) for t, parts in found.items()
                   for sink in feed(t, {tp: Writer.segments(dest, tp, segment_bytes, step)
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


def _check_transactions(table: Path, tp: Tp, found: Survey, allow_open: bool) -> None:
    """Refuse transactional batches without any transaction marker (module docstring)."""
    if found.transactional and not found.control and not allow_open:
        raise InvalidOptionError(f"{table}: {tp[0]}-{tp[1]} has transactional batches but no "
                                 "transaction markers (migrated without include_control): "
                                 "restored, those transactions would never end; migrate again "
                                 "with --control, or pass allow_open_transactions")


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
