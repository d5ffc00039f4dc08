"""Parquet files of a run (Delta layer): the local engine's writer and the naming both engines use.

Files go to Hive-style partition folders (``topic=orders/date=2024-05-01/``, nulls as
``__HIVE_DEFAULT_PARTITION__``) inside the table, named ``part-kafkalog-<run id>-<n>`` so a
killed run's files can be found and deleted (:mod:`kafkalog_spark.delta.commit`). Partition
columns are not stored in the files (Delta keeps them in the ``add`` action). Timestamps are
written as microsecond ``TIMESTAMP`` adjusted to UTC, the schema all nullable.

Both engines write files with :func:`write_splits` over the ``kafkalog`` data source's own
planner and task reader (:func:`~kafkalog_spark.datasource.plan.plan_scan` /
:func:`~kafkalog_spark.datasource.reader.read_split`): the local engine (:func:`write_local`)
in this process, the Spark engine in its tasks — so both read and write exactly the same.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import KafkaLogError, Location
from ..log.model import LogDirs
from ..storage import storage_for
from .columns import partition_values, transform
from .commit import FILE_PREFIX, DataFile, data_file
from .plan import TablePlan

NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
MAX_OPEN_FILES = 64  # partition values written at once; the least recently used is closed
PARQUET_OPTIONS = {"compression": "snappy", "coerce_timestamps": "us",
                   "allow_truncated_timestamps": False}


def partition_dir(partition_by: tuple[str, ...], values: tuple[str | None, ...]) -> str:
    """The relative folder of one combination of partition values."""
    return "/".join(f"{col}={NULL_PARTITION if v is None else quote(v, safe='')}"
                    for col, v in zip(partition_by, values))


def file_name(run_id: str, n: int) -> str:
    """Name of a run's ``n``-th data file."""
    return f"{FILE_PREFIX}{run_id}-{n:05d}.snappy.parquet"


ROW_GROUP_BYTES = 32 << 20  # Arrow bytes buffered per file before a row group is written
BUFFER_BYTES = 128 << 20  # all files' buffers together; above it the largest is written


def write_local(plan: TablePlan, read_options: dict[str, str], partition_by: tuple[str, ...],
                run_id: str, found: LogDirs | None = None) -> list[DataFile]:
    """Read this run's records of one table in this process and write them as Parquet files;
    ``found``: the run's discovery of its sources (the read is planned from it, not listed
    again).

    Returns
    -------
    list of DataFile
        Every file written, ready for :func:`~kafkalog_spark.delta.commit.commit`.

    Raises
    ------
    KafkaLogError
        A data file could not be written (full disk, file size limit); names the file. The
        files of this run are removed by the next run (they are not committed).
    """
    from ..datasource.options import parse_read_options
    from ..datasource.plan import plan_scan

    opts = parse_read_options(read_options)
    written = write_splits(plan_scan(opts, found=found).splits, opts, plan.schema, partition_by,
                           plan.path, run_id)
    return [data_file(plan.path, rel, dict(zip(partition_by, values))) for rel, values in written]


def write_splits(splits: Iterable[Any], opts: Any, schema: pa.Schema,
                 partition_by: tuple[str, ...], root: Path, run_id: str
                 ) -> list[tuple[str, tuple[str | None, ...]]]:
    """Decode ``splits`` (the ``kafkalog`` source's, read with ``opts``), turn them into rows
    of ``schema`` and write them as Parquet files under ``root``; returns each file's path
    relative to ``root`` and its partition values. What both engines run per table: the local
    one over every split of a table, a Spark task over its share.

    Rows are buffered per file into row groups of about :data:`ROW_GROUP_BYTES` (a row group
    per read batch made thousands of tiny groups from small segments, slow to write and read).
    """
    from ..datasource.reader import read_split

    files = _DataFiles(root, partition_by,
                       pa.schema([f for f in schema if f.name not in partition_by]), run_id)
    try:
        try:
            for split in splits:
                for batch in read_split(split, opts):
                    for values, part in partition_values(transform(batch, schema),
                                                         partition_by):
                        files.add(values, part)
        finally:
            files.close()
    except OSError as exc:
        # pyarrow's errors (full disk, a file size limit) do not name the file
        raise KafkaLogError(f"writing a Parquet data file failed: {exc.strerror or exc}",
                            Location(str(files.current))) from exc
    return files.written


class _DataFiles:
    """The open Parquet files of one table's run, one per combination of partition values
    (at most :data:`MAX_OPEN_FILES`; the least recently used is closed), each with its
    buffered rows. ``current`` is the file a failed write names."""

    def __init__(self, root: Path, partition_by: tuple[str, ...], schema: pa.Schema,
                 run_id: str) -> None:
        self.root, self.partition_by, self.schema, self.run_id = root, partition_by, schema, run_id
        self.open: OrderedDict[tuple, tuple[pq.ParquetWriter, str]] = OrderedDict()
        self.buffers: dict[tuple, list[pa.RecordBatch]] = {}
        self.buffered: dict[tuple, int] = {}
        self.written: list[tuple[str, tuple]] = []
        self.current = root

    def add(self, values: tuple, rows: pa.RecordBatch) -> None:
        if values in self.open:
            self.open.move_to_end(values)
        else:
            if len(self.open) >= MAX_OPEN_FILES:
                self._close(next(iter(self.open)))
            self._start(values)
        self.buffers[values].append(rows.select(self.schema.names))
        self.buffered[values] += rows.nbytes
        if self.buffered[values] >= ROW_GROUP_BYTES:
            self._flush(values)
        elif sum(self.buffered.values()) > BUFFER_BYTES:
            self._flush(max(self.buffered, key=self.buffered.__getitem__))

    def close(self) -> None:
        """Write what is buffered and close every file (also after an error: each file is
        then complete up to its last row group, and never committed)."""
        while self.open:
            self._close(next(iter(self.open)))

    def _start(self, values: tuple) -> None:
        folder = partition_dir(self.partition_by, values)
        name = file_name(self.run_id, len(self.written))
        rel = f"{folder}/{name}" if folder else name
        self.current = self.root / rel
        fs = storage_for(self.current)
        fs.make_dirs_below(self.root, self.current.parent)  # never the root itself
        self.open[values] = (pq.ParquetWriter(fs.arrow_path(self.current), self.schema,
                                              filesystem=fs.arrow_fs, **PARQUET_OPTIONS), rel)
        self.buffers[values], self.buffered[values] = [], 0
        self.written.append((rel, values))

    def _flush(self, values: tuple) -> None:
        writer, rel = self.open[values]
        if self.buffers[values]:
            self.current = self.root / rel
            table = pa.Table.from_batches(self.buffers[values])
            writer.write_table(table, row_group_size=max(1, table.num_rows))
        self.buffers[values], self.buffered[values] = [], 0

    def _close(self, values: tuple) -> None:
        try:
            self._flush(values)
        finally:
            writer, rel = self.open.pop(values)
            del self.buffers[values], self.buffered[values]
            self.current = self.root / rel
            writer.close()
