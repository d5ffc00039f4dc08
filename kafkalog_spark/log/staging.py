"""Staging a write (log layer): rows encoded into complete segments — ``.log`` plus
``.index``/``.timeindex`` — in a staging folder next to the log dir, with provisional offsets.

A staging folder is a **sibling** of the log dir, ``<parent>/.<log dir name>.kafkalog-staging-<id>``
(same file system, so publishing is renames). Never inside the log dir: a broker treats every
subdirectory there as a topic-partition and takes the whole log dir offline on a bad name.
:mod:`.publish` moves staged segments into the log dir.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..codec import layout as L
from ..codec.files import naming as N
from ..codec.files.index import DEFAULT_INDEX_INTERVAL_BYTES
from ..codec.files.index_rebuild import build_indexes
from ..codec.files.naming import check_topic
from ..codec.records.encode import DEFAULT_MAX_BATCH_BYTES, encode_record_batches
from ..errors import InvalidOptionError, Location, LogDirError
from ..storage import mapped_file, storage_for
from ..storage.atomic import disk_errors

DEFAULT_SEGMENT_BYTES = 1 << 30  # segment.bytes (log.segment.bytes default, 1 GiB)
STAGING_INFIX = ".kafkalog-staging-"
FLUSH_ROWS = 1 << 16  # a stager encodes once this many rows (or FLUSH_BYTES) are pending
FLUSH_BYTES = 16 << 20


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
    """One complete staged segment (files named by ``base_offset`` in the staging folder).

    ``positions`` and ``offsets`` hold, as little-endian int64, each batch's byte position in
    the ``.log`` and its (provisional) base offset: publishing shifts the base offsets at these
    positions without walking the file (:func:`.publish.shift_base_offsets` checks them).
    Staged batches never carry a producer id (the stager sets none), so a write leaves the
    producer state as it was at the log end it starts from.
    """

    base_offset: int
    last_offset: int
    records: int
    batches: int
    bytes: int
    positions: bytes
    offsets: bytes

    def batch_table(self) -> tuple[np.ndarray, np.ndarray]:
        """(byte positions, base offsets) of the segment's batches, as int64 arrays."""
        return np.frombuffer(self.positions, "<i8"), np.frombuffer(self.offsets, "<i8")


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
    fs = storage_for(path)
    try:
        fs.make_dirs(path, exist_ok=False)
    except OSError as exc:
        raise LogDirError(f"cannot create the staging folder next to the log dir: "
                          f"{exc.strerror or exc}", Location(str(path))) from exc
    if fs.exists(log_dir) and fs.stat(path).st_dev != fs.stat(log_dir).st_dev:
        fs.remove_tree(path, ignore_errors=True)
        raise LogDirError("the log dir is on a different filesystem than its parent (a mount "
                          "point?); staging next to it cannot be published by rename",
                          Location(str(log_dir)))
    return path


def remove_staging_dir(path: str | os.PathLike[str]) -> None:
    """Delete a staging folder and everything in it (nothing when it is gone already)."""
    path = Path(path)
    if STAGING_INFIX not in path.name:  # never delete anything that is not ours
        raise LogDirError("not a kafkalog staging folder", Location(str(path)))
    storage_for(path).remove_tree(path, ignore_errors=True)


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
    staging : path, optional
        The write's staging folder, which must exist (default: the parent of ``directory``);
        the folders between it and ``directory`` are created.
    """

    def __init__(self, directory: str | os.PathLike[str], topic: str, partition: int, *,
                 order: int, settings: WriteSettings,
                 staging: str | os.PathLike[str] | None = None) -> None:
        check_topic(topic)
        if partition < 0:
            raise InvalidOptionError(f"partition must be >= 0, got {partition}")
        self.directory = Path(directory)
        self._fs = storage_for(self.directory)
        # folders are made below the write's staging folder, never the staging folder itself:
        # a Spark task attempt that outlives its job (killed, speculative) then fails instead of
        # re-creating a staging folder the driver already removed
        root = self.directory.parent if staging is None else Path(staging)
        with disk_errors("creating the staging folder", self.directory):
            self._fs.make_dirs_below(root, self.directory)
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
            self._open["positions"].append(self._open["size"])
            self._open["offsets"].append(int(encoded.base_offset[i]))
            self._open["size"] += incoming
            self._open["batches"] += 1
            self._open["records"] += int(encoded.record_count[i])
            self._open["last"] = int(encoded.last_offset[i])
        self._write(encoded, start, len(encoded))
        self._last = int(encoded.last_offset[-1])
        self._next = self._last + 1

    def _open_segment(self, base: int) -> None:
        path = self._writing = self.directory / N.segment_file_name(base, N.LOG)
        self._open = {"base": base, "path": path, "file": self._fs.create(path), "size": 0,
                      "batches": 0, "records": 0, "last": base, "positions": [], "offsets": []}

    def _write(self, encoded, start: int, stop: int) -> None:
        if stop > start:
            lo = int(encoded.position[start])
            hi = int(encoded.position[stop - 1] + encoded.size[stop - 1])
            self._open["file"].write(memoryview(encoded.data[lo:hi]))

    def _close_segment(self) -> None:
        seg, self._open = self._open, None
        if seg is None:
            return
        self._writing = seg["path"]
        self._fs.close_durably(seg["file"])
        with mapped_file(seg["path"]) as buf:
            indexes = build_indexes(buf, seg["base"], verify_crc=False,
                                    index_interval_bytes=self.settings.index_interval_bytes,
                                    file=str(seg["path"]))
        for kind, content in ((N.INDEX, indexes.offset_index.to_bytes()),
                              (N.TIME_INDEX, indexes.time_index.to_bytes())):
            self._writing = self.directory / N.segment_file_name(seg["base"], kind)
            self._fs.write_whole(self._writing, content, exclusive=True)
        self._segments.append(StagedSegment(
            seg["base"], seg["last"], seg["records"], seg["batches"], seg["size"],
            np.array(seg["positions"], "<i8").tobytes(), np.array(seg["offsets"], "<i8").tobytes()))

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

