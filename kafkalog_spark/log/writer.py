"""Writing partition dirs (log layer): stage segments, then publish them — shared by
``write_log`` and the Spark writer.

Two steps, usable by one process or split across a Spark job:

1. **Stage** (:class:`PartitionStager`, one per partition per writer task): rows are encoded
   into v2 batches and written as complete segments — ``.log`` plus ``.index``/``.timeindex``
   built by recovery's entry rule, rolled by Kafka's ``segment.bytes`` rule — into a *staging
   folder*. Offsets are provisional (task-local, from 0) unless the input has an ``offset``
   column, whose offsets are kept as given.
2. **Publish** (:func:`publish`, with the log dir's ``.lock`` held): each partition's staged
   outputs, in a fixed order, get their final offsets by *shifting whole segments* — a v2
   batch's baseOffset (bytes 0-8) is outside its CRC and index entries are relative to the
   segment base, so a shift rewrites 8 bytes per batch, at the positions the stager recorded,
   and renames the files; nothing is re-encoded or walked again. Then
   ``leader-epoch-checkpoint``, ``partition.metadata``, a producer snapshot at the new log end
   offset (the state at the old end: written batches carry no producer id), and the log dir's
   recovery-point / replication / log-start checkpoints are written.

Staging lives in :mod:`.staging`, publishing in :mod:`.publish`, the partition's other files
and the log dir's checkpoints in :mod:`.partition_files`.

What publishing does to a partition, and what a crash in the middle leaves:

* **new partition** (no dir yet): the complete dir is assembled in the staging folder and
  renamed into the log dir in one step — a crash leaves no dir or the complete one;
* **append** to an existing partition: segment files are renamed in oldest first, each
  segment's indexes before its ``.log``, fsynced. Existing segment bytes are never modified;
  the first new segment starts at the current log end offset (like a roll). A crash leaves the
  old segments plus a prefix of complete new segments (an index without its ``.log`` is an
  orphan a broker deletes at load); checkpoints and the snapshot may then lag, which a broker's
  recovery (or ``kafkalog recover``) rebuilds from the segments;
* **overwrite** of an existing partition: the replacement dir is assembled in the staging
  folder (new segments from offset 0 or the given offsets, the old ``partition.metadata``
  topic id kept) and swapped with the old dir by one ``renameat2(RENAME_EXCHANGE)`` on Linux;
  the old dir is deleted only after the swap. Where the exchange is unavailable, the old dir is
  first renamed into the staging folder, then the new one in — a crash between the two leaves
  the partition dir absent and the old one intact in the staging folder.

Overwrite replaces exactly the partitions that receive rows; other partitions, even of the
same topic, are untouched. Their entries in ``log-start-offset-checkpoint`` and
``cleaner-offset-checkpoint`` are dropped (the new log starts at its first segment).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..codec.files.index import DEFAULT_INDEX_INTERVAL_BYTES
from ..codec.files.naming import check_topic
from ..codec.records.encode import DEFAULT_MAX_BATCH_BYTES
from ..errors import InvalidOptionError
from ..storage import as_path, storage_for
from ..storage.lock import hold_lock
from ..storage.paths import is_remote
from .partition_files import PartitionWrite, Step
from .publish import WRITE_MODES, publish
from .staging import (DEFAULT_SEGMENT_BYTES, PartitionStager, WriteSettings, create_staging_dir,
                      remove_staging_dir)


def write_log(table: pa.Table | pa.RecordBatch, log_dir: str | os.PathLike[str], *,
              topic: str | None = None, partition: int | None = None,
              codec: int | str = "none", mode: str = "append",
              segment_bytes: int = DEFAULT_SEGMENT_BYTES,
              index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
              max_batch_records: int = 10_000, max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
              leader_epoch: int = 0, topic_ids: dict[str, str] | None = None,
              compression_level: int | None = None, step: Step | None = None,
              storage_options: Mapping[str, str] | None = None) -> dict:
    """Write records as Kafka partition dirs under ``log_dir`` (created if missing).

    Parameters
    ----------
    table : pyarrow.Table or RecordBatch
        ``value`` (and optionally ``key``, ``timestamp``, ``headers``) as in
        :mod:`kafkalog_spark.codec.records.schema`; ``topic`` / ``partition`` columns unless given as
        arguments; an optional ``offset`` column keeps the records' offsets (they must increase
        within a partition and start at or after its current end).
    log_dir : path
        The Kafka log dir (``log.dirs`` entry). An object-store URI (``s3://...``) must be a
        new prefix: the log dir is written locally, then uploaded (:mod:`kafkalog_spark.storage.upload`).
    topic, partition : optional
        Used for every row when the table has no such column (partition defaults to 0).
    codec : {"none", "gzip", "snappy", "lz4", "zstd"} or int
        Compression of every batch.
    mode : {"append", "error", "overwrite"}
        ``append`` continues each partition from its current log end offset; ``error`` refuses
        a partition that already has segments; ``overwrite`` replaces each partition written
        (see the module docstring).
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
    step : callable, optional
        ``step(label)`` is called before each change to the log dir while publishing (progress;
        tests kill the process there).
    storage_options : mapping, optional
        Endpoint, region, credentials for an object-store ``log_dir``
        (:mod:`kafkalog_spark.storage.options`).

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
    LogDirError
        A file could not be written (full disk, file size limit, a file removed under us); the
        message names the file. Nothing is published when staging fails.
    """
    if mode not in WRITE_MODES:
        raise InvalidOptionError(f"mode must be one of {', '.join(WRITE_MODES)}; got {mode!r}")
    settings = WriteSettings(codec=codec, compression_level=compression_level,
                             segment_bytes=segment_bytes, index_interval_bytes=index_interval_bytes,
                             max_batch_records=max_batch_records, max_batch_bytes=max_batch_bytes,
                             leader_epoch=leader_epoch)
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    if is_remote(log_dir):
        from ..storage.upload import write_remote

        return write_remote(as_path(log_dir, storage_options), lambda local: write_log(
            table, local, topic=topic, partition=partition, codec=codec, mode=mode,
            segment_bytes=segment_bytes, index_interval_bytes=index_interval_bytes,
            max_batch_records=max_batch_records, max_batch_bytes=max_batch_bytes,
            leader_epoch=leader_epoch, topic_ids=topic_ids,
            compression_level=compression_level, step=step))
    log_dir = Path(log_dir)
    storage_for(log_dir).make_dirs(log_dir, exist_ok=True)
    staging = create_staging_dir(log_dir)
    try:
        with hold_lock(log_dir):
            staged = []
            for i, ((t, p), rows) in enumerate(_groups(table, topic, partition)):
                stager = PartitionStager(staging / f"w{i}", t, p, order=0, settings=settings,
                                         staging=staging)
                stager.add(rows)
                staged.append(stager.finish())
            written = publish(log_dir, staged, mode=mode, leader_epoch=leader_epoch,
                              topic_ids=topic_ids, staging=staging, step=step)
    finally:
        remove_staging_dir(staging)
    return metrics(written)


def metrics(written: list[PartitionWrite]) -> dict:
    """The metrics dict a write returns (see :func:`write_log`)."""
    return {
        "partitions": len(written),
        "records": sum(w.records for w in written),
        "batches": sum(w.batches for w in written),
        "segments": sum(len(w.segments) for w in written),
        "bytes": sum(w.bytes for w in written),
        "written": [vars(w) for w in written],
    }


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
        check_topic(t)
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

