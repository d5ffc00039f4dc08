"""The ``kafkalog`` writer (Spark layer): ``df.write.format("kafkalog").save(log_dir)``.

Tasks stage, the driver publishes — both through :mod:`kafkalog_spark.log.writer`, the same
code ``write_log`` runs:

* ``write()`` (in each task) routes every row to its (topic, partition) — the ``partition``
  column, else Kafka's default partitioner (:mod:`kafkalog_spark.codec.records.partitioner`) over
  ``numPartitions`` or the topic's existing partition count — and stages complete segments with
  provisional offsets (or the ``offset`` column's) in
  ``<parent>/.<log dir name>.kafkalog-staging-<job id>/task-<spark partition>-<attempt id>/``,
  a sibling of the log dir, never inside it. The driver creates the staging folder when the
  write starts and tasks create folders only inside it: an attempt that outlives the job (a
  killed or losing speculative one) fails instead of re-creating it after commit. A task
  returns a commit message naming its segments and where each of their batches starts (the
  driver shifts offsets there without walking the segments again).
* ``commit()`` (on the driver, holding the log dir's ``.lock``) publishes the staged outputs of
  each partition ordered by Spark partition id (or by kept offsets), then deletes the staging
  folder — including outputs of failed or killed attempts, which no message names.
* ``abort()`` deletes the staging folder; the log dir was never touched.

Modes: ``append`` continues each partition from its log end offset; ``overwrite`` replaces the
partitions that receive rows and nothing else (see :mod:`kafkalog_spark.log.writer` for the
exact effect and what a crash during commit leaves).

Columns: ``value`` (required), ``key`` (binary or string), ``topic`` (or the ``topic``
option), ``partition``, ``timestamp`` (timestamp or long ms; null: now), ``headers``,
``offset`` (keeps the offsets: copying or re-compressing a log exactly). The reader's
``timestampType`` and metadata columns are accepted and not written: every batch is written
as CreateTime, without producer ids, leader epoch from the ``leaderEpoch`` option.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from ..codec.files import naming as N
from ..codec.records.partitioner import default_partitions
from ..codec.records.schema import METADATA_COLUMNS
from ..errors import InvalidOptionError, Location, LogDirError
from ..log.publish import publish
from ..log.staging import (STAGING_INFIX, PartitionStager, StagedPartition, create_staging_dir,
                           remove_staging_dir)
from ..log.writer import metrics
from ..storage import LOCAL, as_path, storage_for
from ..storage.lock import ensure_not_locked, hold_lock
from ..storage.paths import ObjectPath
from ..storage.upload import download_tree, require_new_prefix, upload_log_dir, upload_tree
from .executors import require_visible
from .options import storage_options
from .write_options import WriteOptions, parse_write_options

WRITTEN_COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "headers")
IGNORED_COLUMNS = ("timestampType", *METADATA_COLUMNS)
_INTEGER_TYPES = ("byte", "short", "integer", "long")


@dataclass(frozen=True)
class KafkaLogCommitMessage(WriterCommitMessage):
    """What one task staged (sent to the driver)."""

    spark_partition: int
    attempt_id: int
    rows: int
    staged: tuple[StagedPartition, ...]


class KafkaLogWriter(DataSourceArrowWriter):
    """Stage in tasks, publish on the driver (see the module docstring).

    Parameters
    ----------
    options : dict
        The write options (:mod:`kafkalog_spark.datasource.write_options`), any case.
    schema : pyspark.sql.types.StructType
        The DataFrame's schema.
    overwrite : bool
        ``mode("overwrite")``.

    Raises
    ------
    InvalidOptionError
        Bad options or columns.
    LogDirLockedError
        A live process (a broker) holds the log dir's ``.lock``.
    """

    def __init__(self, options: dict, schema: Any, overwrite: bool,
                 session_storage: dict[str, str] | None = None) -> None:
        self.options: WriteOptions = parse_write_options(options)
        self.overwrite = bool(overwrite)
        self._check_schema(schema)
        target = as_path(self.options.path, storage_options(options, session_storage))
        self.remote = target if isinstance(target, ObjectPath) else None
        self.job_id = os.urandom(8).hex()
        self.last_metrics: dict | None = None
        if self.remote is not None:
            self._init_remote(self.remote)
            return
        self.log_dir = str(Path(self.options.path).absolute())
        log_dir = Path(self.log_dir)
        fs = storage_for(log_dir)
        if fs.exists(log_dir):
            if not fs.is_dir(log_dir):
                raise LogDirError("the target is not a directory", Location(self.log_dir))
            ensure_not_locked(log_dir)
        elif not fs.is_dir(log_dir.parent):
            raise LogDirError("the parent of the log dir does not exist", Location(self.log_dir))
        self.partition_counts = existing_partition_counts(log_dir)
        topic = self.options.topic
        if (topic is not None and not self.has_partition and self.options.num_partitions is None
                and topic not in self.partition_counts):
            raise InvalidOptionError(
                f"topic {topic!r} has no partitions in {self.log_dir} and the DataFrame has no "
                "partition column; give the numPartitions option")
        # made here, on the driver: tasks only create folders inside it, so an attempt that
        # outlives the job (killed, speculative) cannot re-create it after commit or abort
        self.staging = str(create_staging_dir(log_dir, self.job_id))

    def _init_remote(self, dest: ObjectPath) -> None:
        """A new log dir on an object store (see the end of this module): tasks stage on their
        own disks and upload to a staging prefix next to ``dest``; the driver publishes on its
        disk and uploads the log dir under the writing markers."""
        require_new_prefix(dest)
        self.log_dir = str(dest)
        self.partition_counts: dict[str, int] = {}
        topic = self.options.topic
        if topic is not None and not self.has_partition and self.options.num_partitions is None:
            raise InvalidOptionError(f"topic {topic!r} has no partitions in {dest} (a new "
                                     "prefix) and the DataFrame has no partition column; give "
                                     "the numPartitions option")
        self.staging = str(dest.parent / f".{dest.name}{STAGING_INFIX}{self.job_id}")

    def _check_schema(self, schema: Any) -> None:
        fields = {f.name: f.dataType for f in schema.fields}
        unknown = [n for n in fields if n not in WRITTEN_COLUMNS and n not in IGNORED_COLUMNS]
        if unknown:
            raise InvalidOptionError(
                f"unknown column(s) {unknown}; kafkalog writes {', '.join(WRITTEN_COLUMNS)} "
                f"(and ignores {', '.join(IGNORED_COLUMNS)})")
        if "value" not in fields:
            raise InvalidOptionError(f"the DataFrame has no 'value' column (columns: {list(fields)})")
        has_topic = "topic" in fields
        if has_topic == (self.options.topic is not None):
            raise InvalidOptionError("give the topic either as a 'topic' column or as the topic "
                                     "option, exactly one of them")
        for name in ("partition", "offset"):
            if name in fields and fields[name].typeName() not in _INTEGER_TYPES:
                raise InvalidOptionError(f"column {name!r} has type {fields[name].simpleString()}; "
                                         "expected an integer type")
        self.has_partition = "partition" in fields
        self.columns = tuple(n for n in WRITTEN_COLUMNS if n in fields)

    # --- tasks ---------------------------------------------------------------------------------

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaLogCommitMessage:
        """Stage this task's rows (runs in a Spark task)."""
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx is not None:
            pid, attempt = ctx.partitionId(), ctx.taskAttemptId()
        else:  # called outside Spark (tests, embedding): each call is the next "task"
            self._local_calls = pid = getattr(self, "_local_calls", -1) + 1
            attempt = 0
        if self.remote is not None:
            return stage_and_upload(self, iterator, pid, attempt)
        require_visible(Path(self.log_dir).parent, "folder of the log dir")
        return self.stage(iterator, pid, attempt, Path(self.staging))

    def stage(self, iterator: Iterator[pa.RecordBatch], pid: int, attempt: int,
              staging: Path) -> KafkaLogCommitMessage:
        """Stage the rows of task ``pid`` below ``staging`` (the write's staging folder)."""
        task_dir = staging / f"task-{pid:05d}-{attempt}"
        router = _Router(self, pid)
        stagers: dict[tuple[str, int], PartitionStager] = {}
        rows = 0
        try:
            for batch in iterator:
                rows += batch.num_rows
                for (topic, partition), part in router.split(batch):
                    stager = stagers.get((topic, partition))
                    if stager is None:
                        stager = stagers[(topic, partition)] = PartitionStager(
                            task_dir / N.partition_dir_name(topic, partition), topic, partition,
                            order=pid, settings=self.options.settings, staging=staging)
                    stager.add(part)
            staged = tuple(stagers[k].finish() for k in sorted(stagers))
        except BaseException:
            for stager in stagers.values():
                stager.abandon()
            raise
        return KafkaLogCommitMessage(pid, attempt, rows, staged)

    # --- driver ----------------------------------------------------------------------------------

    def commit(self, messages: list[KafkaLogCommitMessage | None]) -> None:
        """Publish every task's staged segments into the log dir, then drop the staging folder."""
        if self.remote is not None:
            self.last_metrics = publish_and_upload(self, messages)
            return
        try:
            log_dir = Path(self.log_dir)
            fs = storage_for(log_dir)
            try:  # Path.mkdir(exist_ok=True): an existing folder is fine, anything else is not
                fs.make_dir(log_dir)
            except FileExistsError:
                if not fs.is_dir(log_dir):
                    raise
            staged = [s for m in messages if m is not None for s in m.staged]
            topic_ids = ({self.options.topic: self.options.topic_id}
                         if self.options.topic_id is not None else None)
            with hold_lock(log_dir):
                written = publish(log_dir, staged,
                                  mode="overwrite" if self.overwrite else "append",
                                  leader_epoch=self.options.settings.leader_epoch,
                                  topic_ids=topic_ids, staging=self.staging)
            self.last_metrics = metrics(written)
        finally:
            remove_staging_dir(self.staging)

    def abort(self, messages: list[KafkaLogCommitMessage | None]) -> None:
        """Delete everything staged; the log dir was not touched."""
        if self.remote is not None:
            storage_for(self.remote).remove_tree(as_path(self.staging, self.remote.options),
                                                 ignore_errors=True)
            return
        remove_staging_dir(self.staging)


class _Router:
    """Splits a task's Arrow batches by (topic, partition), input order kept inside a group."""

    def __init__(self, writer: KafkaLogWriter, spark_partition: int) -> None:
        self.topic = writer.options.topic
        self.columns = writer.columns
        self.has_partition = writer.has_partition
        self.num_partitions = writer.options.num_partitions
        self.partition_counts = writer.partition_counts
        self.null_next: dict[str, int] = {}  # round-robin position of the next null key
        self.spark_partition = spark_partition

    def split(self, batch: pa.RecordBatch) -> Iterator[tuple[tuple[str, int], pa.Table]]:
        n = batch.num_rows
        if not n:
            return
        data = pa.Table.from_batches([batch]).select(
            [c for c in self.columns if c not in ("topic", "partition")])
        if self.topic is not None:
            topics, codes = [self.topic], np.zeros(n, np.int64)
        else:
            col = batch.column("topic")
            if col.null_count:
                raise InvalidOptionError("the topic column has nulls")
            enc = pc.dictionary_encode(col)
            topics = enc.dictionary.to_pylist()
            codes = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        parts = self._partitions(batch, topics, codes)
        if len(topics) == 1 and (parts == parts[0]).all():
            yield (topics[0], int(parts[0])), data
            return
        key = codes * (1 << 32) + parts
        order = np.argsort(key, kind="stable")
        sorted_key = key[order]
        cuts = np.flatnonzero(np.diff(sorted_key)) + 1
        for lo, hi in zip(np.r_[0, cuts], np.r_[cuts, n]):
            k = int(sorted_key[lo])
            yield (topics[k >> 32], k & 0xFFFFFFFF), data.take(pa.array(order[lo:hi]))

    def _partitions(self, batch: pa.RecordBatch, topics: list[str], codes: np.ndarray) -> np.ndarray:
        if self.has_partition:
            col = batch.column("partition")
            if col.null_count:
                raise InvalidOptionError("the partition column has nulls")
            parts = col.to_numpy(zero_copy_only=False).astype(np.int64)
            if len(parts) and (parts.min() < 0 or parts.max() > 2**31 - 1):
                raise InvalidOptionError(f"partition numbers must be in [0, 2^31-1]; got "
                                         f"{int(parts.min())}..{int(parts.max())}")
            return parts
        keys = batch.column("key") if "key" in batch.schema.names else pa.nulls(batch.num_rows)
        parts = np.empty(batch.num_rows, np.int64)
        for code, topic in enumerate(topics):
            rows = np.flatnonzero(codes == code)
            count = self.num_partitions or self.partition_counts.get(topic)
            if count is None:
                raise InvalidOptionError(f"topic {topic!r} has no partitions in the log dir and "
                                         "there is no partition column; give numPartitions")
            start = self.null_next.get(topic, self.spark_partition)
            sub = keys if len(rows) == len(parts) else keys.take(pa.array(rows))
            assigned, nulls = default_partitions(sub, count, null_start=start)
            self.null_next[topic] = start + nulls
            parts[rows] = assigned
        return parts


def existing_partition_counts(log_dir: str | os.PathLike[str]) -> dict[str, int]:
    """``{topic: highest partition number + 1}`` over the live partition dirs of ``log_dir``
    (what the default partitioner divides by when ``numPartitions`` is not given)."""
    counts: dict[str, int] = {}
    path = Path(log_dir)
    fs = storage_for(path)
    if not fs.is_dir(path):
        return counts
    with fs.scandir(path) as entries:
        for entry in entries:
            if not entry.is_dir(follow_symlinks=False):
                continue
            try:
                parsed = N.parse_partition_dir_name(entry.name)
            except LogDirError:
                continue
            if parsed.kind is None and parsed.topic is not None and parsed.partition is not None:
                counts[parsed.topic] = max(counts.get(parsed.topic, 0), parsed.partition + 1)
    return counts


# --- to an object store: a new log dir, uploaded ---------------------------------------------
#
# An object store has no rename, so tasks cannot stage next to the log dir and the driver cannot
# publish by renames. Instead each task stages its rows on its own disk exactly as for a local
# write (KafkaLogWriter.stage), uploads the staged folder to a staging prefix next to the
# destination (.<name>.kafkalog-staging-<job id>/task-...) and sends the staged description
# with those URIs. The driver's commit downloads the staged segments of the attempts Spark
# kept, publishes them into a log dir on its own disk (the same log.publish.publish as every
# write), and uploads it under the writing markers (storage.upload): readers see no partition
# before all of its files are there. The staging prefix is deleted at the end (also on abort).
# The output passes through the driver's disk once: for very large outputs write to a shared
# disk and upload.


def stage_and_upload(writer: KafkaLogWriter, iterator: Iterator[pa.RecordBatch], pid: int,
                     attempt: int) -> KafkaLogCommitMessage:
    """In a task: stage on this machine's disk, upload to the staging prefix, and describe the
    staged partitions by their URIs."""
    staging = as_path(writer.staging, writer.remote.options)
    with LOCAL.temp_dir("kafkalog-task-") as tmp:
        message = writer.stage(iterator, pid, attempt, Path(tmp))
        upload_tree(Path(tmp), staging)
        moved = tuple(replace(s, directory=str(staging / str(Path(s.directory).relative_to(tmp))))
                      for s in message.staged)
    return replace(message, staged=moved)


def publish_and_upload(writer: KafkaLogWriter,
                       messages: list[KafkaLogCommitMessage | None]) -> dict:
    """On the driver: fetch the kept attempts' staged partitions, publish them into a log dir
    on this disk, upload it to the destination; returns the write's metrics."""
    dest, staging = writer.remote, as_path(writer.staging, writer.remote.options)
    try:
        with LOCAL.temp_dir("kafkalog-publish-") as tmp:
            local_staging, log_dir = Path(tmp) / "staging", Path(tmp) / "log"
            LOCAL.make_dirs(log_dir)
            LOCAL.make_dirs(local_staging)
            staged: list[StagedPartition] = []
            for s in (s for m in messages if m is not None for s in m.staged):
                src = as_path(s.directory, dest.options)
                here = local_staging / str(src.relative_to(staging))
                download_tree(src, here)
                staged.append(replace(s, directory=str(here)))
            topic_ids = ({writer.options.topic: writer.options.topic_id}
                         if writer.options.topic_id is not None else None)
            written = publish(log_dir, staged, mode="append",
                              leader_epoch=writer.options.settings.leader_epoch,
                              topic_ids=topic_ids, staging=local_staging)
            upload_log_dir(log_dir, dest)
        return metrics(written)
    finally:
        storage_for(dest).remove_tree(staging, ignore_errors=True)
