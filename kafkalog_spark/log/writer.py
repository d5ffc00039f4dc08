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
   segment base, so a shift rewrites 8 bytes per batch and renames the files; nothing is
   re-encoded. Then ``leader-epoch-checkpoint``, ``partition.metadata``, a producer snapshot at
   the new log end offset, and the log dir's recovery-point / replication / log-start
   checkpoints are written.

Staging folder: a **sibling** of the log dir, ``<parent>/.<log dir name>.kafkalog-staging-<id>``
(same filesystem, so publishing is renames). Never inside the log dir: a broker treats every
subdirectory there as a topic-partition and takes the whole log dir offline on a bad name.

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

import ctypes
import ctypes.util
import errno
import mmap
import os
import re
import shutil
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..codec import checkpoints as C
from ..codec import layout as L
from ..codec.encode import DEFAULT_MAX_BATCH_BYTES, encode_record_batches
from ..codec.index import DEFAULT_INDEX_INTERVAL_BYTES, build_indexes
from ..codec.scan import scan_entries
from ..codec.snapshot import ProducerStateTracker, read_snapshot
from ..errors import CorruptRecordError, InvalidOptionError, Location, LogDirError
from . import naming as N
from .atomic import (atomic_write_bytes, disk_errors, fsync_dir, read_checkpoint_file,
                     write_checkpoint_file)
from .discovery import PartitionDir, _scan_partition_dir, describe_segment
from .lock import hold_lock
from .mapped import mapped_file

DEFAULT_SEGMENT_BYTES = 1 << 30  # segment.bytes (log.segment.bytes default, 1 GiB)
MAX_TOPIC_LENGTH = 249
STAGING_INFIX = ".kafkalog-staging-"
FLUSH_ROWS = 1 << 16  # a stager encodes once this many rows (or FLUSH_BYTES) are pending
FLUSH_BYTES = 16 << 20
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
_MODES = ("append", "error", "overwrite")
_RENAME_EXCHANGE = 2  # linux/fs.h
_AT_FDCWD = -100
Step = Callable[[str], None]


@dataclass(frozen=True)
class WriteSettings:
    """How segments are encoded and rolled (one value shared by every task of a write)."""

    codec: int | str = "none"
    compression_level: int | None = None
    segment_bytes: int = DEFAULT_SEGMENT_BYTES
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES
    max_batch_records: int = 10_000
    max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES
    leader_epoch: int = 0

    def __post_init__(self) -> None:
        if self.segment_bytes < L.RECORD_BATCH_OVERHEAD:
            raise InvalidOptionError(f"segment_bytes must be at least {L.RECORD_BATCH_OVERHEAD}")
        if self.index_interval_bytes < 0:
            raise InvalidOptionError("index_interval_bytes must be >= 0")
        if self.leader_epoch < -1:
            raise InvalidOptionError("leader_epoch must be >= -1 (-1: none)")


@dataclass(frozen=True)
class StagedSegment:
    """One complete staged segment (files named by ``base_offset`` in the staging folder)."""

    base_offset: int
    last_offset: int
    records: int
    batches: int
    bytes: int


@dataclass(frozen=True)
class StagedPartition:
    """What one writer staged for one partition: picklable, sent from a task to the driver.

    ``order`` ranks outputs of the same partition (the Spark partition id); provisional offsets
    start at 0 unless ``offsets_fixed`` (an ``offset`` column gave the final offsets).
    """

    topic: str
    partition: int
    directory: str
    order: int
    offsets_fixed: bool
    segments: tuple[StagedSegment, ...]

    @property
    def records(self) -> int:
        return sum(s.records for s in self.segments)

    @property
    def first_offset(self) -> int:
        return self.segments[0].base_offset

    @property
    def next_offset(self) -> int:
        return self.segments[-1].last_offset + 1


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


def write_log(table: pa.Table | pa.RecordBatch, log_dir: str | os.PathLike[str], *,
              topic: str | None = None, partition: int | None = None,
              codec: int | str = "none", mode: str = "append",
              segment_bytes: int = DEFAULT_SEGMENT_BYTES,
              index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
              max_batch_records: int = 10_000, max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
              leader_epoch: int = 0, topic_ids: dict[str, str] | None = None,
              compression_level: int | None = None, step: Step | None = None) -> dict:
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
    if mode not in _MODES:
        raise InvalidOptionError(f"mode must be one of {', '.join(_MODES)}; got {mode!r}")
    settings = WriteSettings(codec=codec, compression_level=compression_level,
                             segment_bytes=segment_bytes, index_interval_bytes=index_interval_bytes,
                             max_batch_records=max_batch_records, max_batch_bytes=max_batch_bytes,
                             leader_epoch=leader_epoch)
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    staging = create_staging_dir(log_dir)
    try:
        with hold_lock(log_dir):
            staged = []
            for i, ((t, p), rows) in enumerate(_groups(table, topic, partition)):
                stager = PartitionStager(staging / f"w{i}", t, p, order=0, settings=settings)
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


def check_topic(topic: str) -> None:
    """Raise :class:`InvalidOptionError` unless ``topic`` is a legal Kafka topic name."""
    if (not topic or len(topic) > MAX_TOPIC_LENGTH or topic in (".", "..")
            or not _LEGAL_TOPIC.match(topic)):
        raise InvalidOptionError(
            f"illegal topic name {topic!r}: 1-{MAX_TOPIC_LENGTH} characters of [a-zA-Z0-9._-], "
            "not '.' or '..'")


def _say(step: Step | None, label: str) -> None:
    if step is not None:
        step(label)


# --- staging folder -------------------------------------------------------------------------


def create_staging_dir(log_dir: str | os.PathLike[str], job_id: str | None = None) -> Path:
    """Create the staging folder of one write: a sibling of ``log_dir`` on the same filesystem.

    Raises
    ------
    LogDirError
        The parent is not writable, or the sibling is on another filesystem (a log dir that is
        a mount point) so publishing could not be done by renames.
    """
    log_dir = Path(log_dir).absolute()
    path = log_dir.parent / f".{log_dir.name}{STAGING_INFIX}{job_id or uuid.uuid4().hex}"
    try:
        path.mkdir(parents=True)
    except OSError as exc:
        raise LogDirError(f"cannot create the staging folder next to the log dir: "
                          f"{exc.strerror or exc}", Location(str(path))) from exc
    if log_dir.exists() and path.stat().st_dev != log_dir.stat().st_dev:
        shutil.rmtree(path, ignore_errors=True)
        raise LogDirError("the log dir is on a different filesystem than its parent (a mount "
                          "point?); staging next to it cannot be published by rename",
                          Location(str(log_dir)))
    return path


def remove_staging_dir(path: str | os.PathLike[str]) -> None:
    """Delete a staging folder and everything in it (nothing when it is gone already)."""
    path = Path(path)
    if STAGING_INFIX not in path.name:  # never delete anything that is not ours
        raise LogDirError("not a kafkalog staging folder", Location(str(path)))
    shutil.rmtree(path, ignore_errors=True)


# --- staging: one partition's segments --------------------------------------------------------


class PartitionStager:
    """Encode one partition's rows into complete segments inside ``directory``.

    Rows arrive in chunks through :meth:`add`; they are encoded once :data:`FLUSH_ROWS` rows or
    :data:`FLUSH_BYTES` key/value bytes are pending (bounding memory to about one flush per
    open partition), batches are appended to the open segment, and a segment is closed — its
    indexes built — when the next batch would break Kafka's roll rule
    (``LogSegment.shouldRoll``: ``size > segment.bytes − incoming``, or the batch's last offset
    not storable relative to the segment base).

    Parameters
    ----------
    directory : path
        Staging folder for this partition (created).
    topic, partition :
        The partition.
    order : int
        Rank among the outputs for this partition (see :class:`StagedPartition`).
    settings : WriteSettings
        Encoding and roll settings.
    """

    def __init__(self, directory: str | os.PathLike[str], topic: str, partition: int, *,
                 order: int, settings: WriteSettings) -> None:
        check_topic(topic)
        if partition < 0:
            raise InvalidOptionError(f"partition must be >= 0, got {partition}")
        self.directory = Path(directory)
        with disk_errors("creating the staging folder", self.directory):
            self.directory.mkdir(parents=True, exist_ok=True)
        self.topic, self.partition, self.order, self.settings = topic, partition, order, settings
        self._pending: list[pa.Table] = []
        self._pending_rows = self._pending_bytes = 0
        self._offsets_fixed: bool | None = None
        self._next = 0  # next provisional offset
        self._last: int | None = None  # last offset written (offset column)
        self._segments: list[StagedSegment] = []
        self._open: dict | None = None  # the segment being written
        self._writing: Path = self.directory  # the file a failed write names

    def add(self, rows: pa.Table | pa.RecordBatch) -> None:
        """Queue rows (input order is offset order) and encode when enough are pending."""
        if isinstance(rows, pa.RecordBatch):
            rows = pa.Table.from_batches([rows])
        if not rows.num_rows:
            return
        fixed = "offset" in rows.column_names
        if self._offsets_fixed is None:
            self._offsets_fixed = fixed
        elif fixed != self._offsets_fixed:
            raise InvalidOptionError("some rows have an offset column and some do not")
        self._pending.append(rows)
        self._pending_rows += rows.num_rows
        self._pending_bytes += sum(rows[c].nbytes for c in ("key", "value") if c in rows.column_names)
        if self._pending_rows >= max(FLUSH_ROWS, self.settings.max_batch_records) \
                or self._pending_bytes >= FLUSH_BYTES:
            with self._staging_errors():
                self._flush()

    def finish(self) -> StagedPartition:
        """Encode what is pending, close the open segment, and describe the staged output."""
        with self._staging_errors():
            self._flush()
            self._close_segment()
        return StagedPartition(self.topic, self.partition, str(self.directory), self.order,
                               bool(self._offsets_fixed), tuple(self._segments))

    def _flush(self) -> None:
        if not self._pending:
            return
        rows = pa.concat_tables(self._pending, promote_options="permissive")
        self._pending, self._pending_rows, self._pending_bytes = [], 0, 0
        if self._offsets_fixed:
            first = pc.min(rows["offset"]).as_py()
            if self._last is not None and first is not None and first <= self._last:
                raise InvalidOptionError(
                    f"{self.topic}-{self.partition}: offset {first} does not increase past the "
                    f"previous row's offset {self._last}")
        s = self.settings
        encoded = encode_record_batches(
            rows, codec=s.codec, max_batch_records=s.max_batch_records,
            max_batch_bytes=s.max_batch_bytes, base_offset=0 if self._offsets_fixed else self._next,
            partition_leader_epoch=s.leader_epoch, compression_level=s.compression_level)
        start = 0
        for i in range(len(encoded)):
            incoming = int(encoded.size[i])
            seg = self._open
            if seg is not None and (seg["size"] > s.segment_bytes - incoming
                                    or int(encoded.last_offset[i]) - seg["base"] > L.INT32_MAX):
                self._write(encoded, start, i)
                start = i
                self._close_segment()
            if self._open is None:
                self._open_segment(int(encoded.base_offset[i]))
            self._open["size"] += incoming
            self._open["batches"] += 1
            self._open["records"] += int(encoded.record_count[i])
            self._open["last"] = int(encoded.last_offset[i])
        self._write(encoded, start, len(encoded))
        self._last = int(encoded.last_offset[-1])
        self._next = self._last + 1

    def _open_segment(self, base: int) -> None:
        path = self._writing = self.directory / N.segment_file_name(base, N.LOG)
        self._open = {"base": base, "path": path, "file": open(path, "xb"), "size": 0,
                      "batches": 0, "records": 0, "last": base}

    def _write(self, encoded, start: int, stop: int) -> None:
        if stop > start:
            lo = int(encoded.position[start])
            hi = int(encoded.position[stop - 1] + encoded.size[stop - 1])
            self._open["file"].write(memoryview(encoded.data[lo:hi]))

    def _close_segment(self) -> None:
        seg, self._open = self._open, None
        if seg is None:
            return
        f = seg["file"]
        self._writing = seg["path"]
        f.flush()
        os.fsync(f.fileno())
        f.close()
        with mapped_file(seg["path"]) as buf:
            indexes = build_indexes(buf, seg["base"], verify_crc=False,
                                    index_interval_bytes=self.settings.index_interval_bytes,
                                    file=str(seg["path"]))
        for kind, content in ((N.INDEX, indexes.offset_index.to_bytes()),
                              (N.TIME_INDEX, indexes.time_index.to_bytes())):
            self._writing = self.directory / N.segment_file_name(seg["base"], kind)
            with open(self._writing, "xb") as out:
                out.write(content)
                out.flush()
                os.fsync(out.fileno())
        self._segments.append(StagedSegment(seg["base"], seg["last"], seg["records"],
                                            seg["batches"], seg["size"]))

    @contextmanager
    def _staging_errors(self) -> Iterator[None]:
        """A failed write names the segment being written and closes it (the caller removes
        the staging folder; nothing was published)."""
        try:
            yield
        except OSError as exc:
            self.abandon()
            name = exc.filename if exc.filename is not None else self._writing
            raise LogDirError(f"staging a segment failed: {exc.strerror or exc}",
                              Location(os.fspath(name))) from exc

    def abandon(self) -> None:
        """Close the open file after a failure (the staging folder is removed by the caller)."""
        if self._open is not None:
            try:
                self._open["file"].close()
            except OSError:
                pass  # closing flushes the buffer, which fails again on a full disk
            self._open = None


# --- publishing -------------------------------------------------------------------------------


@dataclass
class _Plan:
    """One partition's publication, checked before anything is moved."""

    topic: str
    partition: int
    pdir: Path
    existing: PartitionDir | None
    replace: bool
    outputs: list[tuple[StagedPartition, int]]  # (staged output, offset shift), in offset order
    first_offset: int
    next_offset: int


def publish(log_dir: str | os.PathLike[str], staged: Iterable[StagedPartition], *, mode: str,
            leader_epoch: int, topic_ids: dict[str, str] | None = None,
            staging: str | os.PathLike[str], step: Step | None = None) -> list[PartitionWrite]:
    """Publish staged segments into ``log_dir`` (the caller holds its ``.lock``).

    Every partition is checked first (leftovers of an interrupted operation, an unclean last
    segment, ``mode='error'`` conflicts, kept offsets below the log end offset or overlapping
    between outputs), so a refusal changes nothing; then partitions are published one by one
    in (topic, partition) order as the module docstring describes, and finally the log dir's
    checkpoints are updated.

    Parameters
    ----------
    log_dir : path
        The target log dir (created if missing).
    staged : iterable of StagedPartition
        Outputs of the stagers; outputs of one partition are ordered by ``order`` (provisional
        offsets) or by their first offset (kept offsets).
    mode : {"append", "error", "overwrite"}
        See :func:`write_log`.
    leader_epoch : int
        Recorded in ``leader-epoch-checkpoint`` at the first new offset (``-1``: none).
    topic_ids : dict, optional
        ``{topic: base64url id}`` for new ``partition.metadata`` files.
    staging : path
        The write's staging folder (replacement dirs are assembled there).
    step : callable, optional
        ``step(label)`` before each change to the log dir (see :func:`write_log`).

    Returns
    -------
    list of PartitionWrite
        One per partition that received records, in (topic, partition) order.

    Raises
    ------
    LogDirError
        A refusal (nothing changed), or a failed rename/write naming the file; what a failure
        part way leaves is what a crash there leaves (module docstring).
    """
    if mode not in _MODES:
        raise InvalidOptionError(f"mode must be one of {', '.join(_MODES)}; got {mode!r}")
    log_dir = Path(log_dir)
    by_partition: dict[tuple[str, int], list[StagedPartition]] = {}
    for s in staged:
        if s.segments:
            by_partition.setdefault((s.topic, s.partition), []).append(s)
    plans = [_plan(log_dir, t, p, outputs, mode) for (t, p), outputs in sorted(by_partition.items())]
    log_dir.mkdir(parents=True, exist_ok=True)
    assembly = Path(staging) / "_publish"
    written = []
    for plan in plans:
        with disk_errors("publishing", plan.pdir):
            written.append(_apply(plan, log_dir, assembly, leader_epoch,
                                  (topic_ids or {}).get(plan.topic), step))
    with disk_errors("updating the log dir checkpoints", log_dir):
        _update_log_dir_checkpoints(log_dir, written, step)
    return written


def _plan(log_dir: Path, topic: str, partition: int, outputs: list[StagedPartition],
          mode: str) -> _Plan:
    pdir = log_dir / N.partition_dir_name(topic, partition)
    existing = _existing(pdir)
    if existing is not None and existing.segments and mode == "error":
        raise LogDirError("partition already has segments (mode='error')", Location(str(pdir)))
    replace = mode == "overwrite" and existing is not None
    start = 0 if replace else _log_end_offset(existing)
    fixed = {o.offsets_fixed for o in outputs}
    if len(fixed) > 1:
        raise InvalidOptionError(f"{topic}-{partition}: some outputs kept offsets and some not")
    placed: list[tuple[StagedPartition, int]] = []
    nxt = start
    if fixed.pop():
        for o in sorted(outputs, key=lambda o: (o.first_offset, o.order)):
            if o.first_offset < nxt:
                what = "the log end offset" if not placed else "the previous output's end"
                raise InvalidOptionError(
                    f"{topic}-{partition}: offset column starts at {o.first_offset}, below "
                    f"{what} {nxt}")
            placed.append((o, 0))
            nxt = o.next_offset
    else:
        for o in sorted(outputs, key=lambda o: o.order):
            placed.append((o, nxt - o.first_offset))
            nxt += o.next_offset - o.first_offset
    return _Plan(topic, partition, pdir, existing, replace, placed,
                 placed[0][0].first_offset + placed[0][1], nxt)


def _apply(plan: _Plan, log_dir: Path, assembly: Path, leader_epoch: int,
           topic_id: str | None, step: Step | None) -> PartitionWrite:
    in_place = plan.existing is not None and not plan.replace
    target = plan.pdir if in_place else assembly / plan.pdir.name
    target.mkdir(parents=True, exist_ok=True)
    result = PartitionWrite(plan.topic, plan.partition, plan.first_offset, plan.next_offset, 0, 0,
                            replaced=plan.replace)
    moved: list[tuple[int, int]] = []  # (final base offset, bytes) of every new segment
    for output, shift in plan.outputs:
        for seg in output.segments:
            base = _move_segment(Path(output.directory), seg, shift, target, step)
            moved.append((base, seg.bytes))
            result.segments.append(base)
            result.records += seg.records
            result.batches += seg.batches
            result.bytes += seg.bytes
    fsync_dir(target)
    if in_place:
        _check_segments(target, moved)
    old = None if plan.existing is None or not plan.replace else plan.existing
    if old is not None and not (target / N.PARTITION_METADATA).exists() and topic_id is None:
        old_meta = plan.pdir / N.PARTITION_METADATA
        if old_meta.exists():
            shutil.copyfile(old_meta, target / N.PARTITION_METADATA)
    _write_partition_files(target, plan.existing if in_place else None, result, leader_epoch,
                           topic_id, log_dir, step)
    if not in_place:
        _say(step, f"exchange {plan.pdir.name} with its replacement" if plan.replace
             else f"rename {target.name} into the log dir")
        _check_segments(target, moved)  # the last look before the dir becomes visible
        if plan.replace:
            _swap_into_place(target, plan.pdir, assembly, step)
        else:
            os.rename(target, plan.pdir)
        fsync_dir(log_dir)
    return result


def _check_segments(target: Path, moved: list[tuple[int, int]]) -> None:
    """Every new segment is in ``target`` with the size it was staged with: a file removed or
    cut by someone else mid-write fails the write instead of publishing a log with a hole."""
    for base, size in moved:
        path = target / N.segment_file_name(base, N.LOG)
        try:
            found = path.stat().st_size
        except FileNotFoundError:
            found = None
        if found != size:
            raise LogDirError(f"a new segment vanished or changed while publishing (staged "
                              f"{size} bytes, found {'none' if found is None else found})",
                              Location(str(path), 0, base))


def _move_segment(src_dir: Path, seg: StagedSegment, shift: int, target: Path,
                  step: Step | None = None) -> int:
    """Shift one staged segment by ``shift`` offsets and rename its files into ``target``,
    indexes first and ``.log`` last; returns the final base offset."""
    final = seg.base_offset + shift
    src_log = src_dir / N.segment_file_name(seg.base_offset, N.LOG)
    if shift:
        _say(step, f"shift {src_log.name} by {shift}")
        shift_base_offsets(src_log, shift)
    dst_log = target / N.segment_file_name(final, N.LOG)
    if dst_log.exists() and dst_log.stat().st_size:
        raise LogDirError("a non-empty segment already exists at this base offset",
                          Location(str(dst_log), 0, final))
    for kind in (N.INDEX, N.TIME_INDEX, N.LOG):
        _say(step, f"rename {N.segment_file_name(final, kind)} into {target.name}")
        os.replace(src_dir / N.segment_file_name(seg.base_offset, kind),
                   target / N.segment_file_name(final, kind))
    return final


def shift_base_offsets(path: str | os.PathLike[str], shift: int) -> None:
    """Add ``shift`` to the baseOffset of every v2 batch of a ``.log`` file, in place, durably.

    The baseOffset (bytes 0-8 of a batch) is outside the batch CRC (which covers
    ``[attributes, end)``), so the batches stay valid; only v2 batches can be shifted this way.

    Raises
    ------
    CorruptRecordError
        The file does not walk cleanly or holds a legacy (v0/v1) entry.
    """
    with open(path, "r+b") as f:
        size = os.fstat(f.fileno()).st_size
        if not size:
            return
        with mmap.mmap(f.fileno(), size) as mm:
            buf = np.frombuffer(mm, dtype=np.uint8)
            table = scan_entries(buf)
            if not table.clean or len(table) and (table.magic != 2).any():
                del buf
                raise CorruptRecordError("staged segment does not walk cleanly as v2 batches "
                                         f"({table.stop_reason})",
                                         Location(str(path), table.stop_position))
            new = (table.offset + shift).astype(">i8").view(np.uint8)
            where = (table.position[:, None] + np.arange(8)).ravel()
            buf[where] = new
            del buf
            mm.flush()
        os.fsync(f.fileno())


def _swap_into_place(new: Path, pdir: Path, assembly: Path, step: Step | None = None) -> None:
    """Put ``new`` where ``pdir`` is; the old dir ends up under ``assembly`` and is deleted."""
    aside = assembly / (pdir.name + ".replaced")
    if _rename_exchange(new, pdir):
        os.rename(new, aside)  # ``new`` now holds the old partition dir
    else:
        os.rename(pdir, aside)
        _say(step, f"rename the replacement of {pdir.name} into the log dir")
        os.rename(new, pdir)
    fsync_dir(pdir.parent)
    _say(step, f"delete the replaced {pdir.name}")
    shutil.rmtree(aside)


def _rename_exchange(a: Path, b: Path) -> bool:
    """Atomically exchange two paths (Linux ``renameat2(RENAME_EXCHANGE)``); False when the
    platform or filesystem cannot."""
    name = ctypes.util.find_library("c")
    try:
        fn = ctypes.CDLL(name, use_errno=True).renameat2
    except (OSError, AttributeError, TypeError):
        return False
    rc = fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EPERM, errno.ENOTSUP):
        return False
    raise LogDirError(f"cannot exchange the partition dir: {os.strerror(err)}", Location(str(b)))


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


# --- partition files and log dir checkpoints ---------------------------------------------------


def _write_partition_files(pdir: Path, existing: PartitionDir | None, result: PartitionWrite,
                           leader_epoch: int, topic_id: str | None, log_dir: Path,
                           step: Step | None = None) -> None:
    """``leader-epoch-checkpoint``, ``partition.metadata`` and a producer snapshot at the new
    log end offset (what a broker leaves at a clean shutdown)."""
    epoch_file = pdir / N.LEADER_EPOCH_CHECKPOINT
    epochs = read_checkpoint_file(epoch_file, C.parse_leader_epoch_checkpoint)
    if leader_epoch >= 0 and result.records:
        epochs = C.assign_leader_epoch(epochs, leader_epoch, result.first_offset)
    _say(step, f"write {pdir.name}/{N.LEADER_EPOCH_CHECKPOINT}")
    write_checkpoint_file(epoch_file, C.format_leader_epoch_checkpoint(epochs))

    meta = pdir / N.PARTITION_METADATA
    if not meta.exists():  # an existing partition keeps its topic id
        tid = topic_id or _topic_id_in(log_dir, result.topic) or _random_topic_id()
        _say(step, f"write {pdir.name}/{N.PARTITION_METADATA}")
        write_checkpoint_file(meta, C.format_partition_metadata(tid))

    if result.segments:
        _say(step, f"write {pdir.name} producer snapshot")
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


def _update_log_dir_checkpoints(log_dir: Path, written: list[PartitionWrite],
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
        _say(step, f"write {name}")
        write_checkpoint_file(path, C.format_offset_checkpoint(offsets))
    replaced = {(w.topic, w.partition) for w in written if w.replaced}
    for name in (N.LOG_START_OFFSET_CHECKPOINT, N.CLEANER_OFFSET_CHECKPOINT):
        path = log_dir / name
        if not path.exists():
            if name == N.LOG_START_OFFSET_CHECKPOINT:
                _say(step, f"write {name}")
                write_checkpoint_file(path, C.format_offset_checkpoint({}))
            continue
        offsets = read_checkpoint_file(path, C.parse_offset_checkpoint)
        if replaced & offsets.keys():
            kept = {tp: o for tp, o in offsets.items() if tp not in replaced}
            _say(step, f"write {name}")
            write_checkpoint_file(path, C.format_offset_checkpoint(kept))
