"""Parquet files of a run (Delta layer): the local engine's writer and the naming both engines use.

Files go to Hive-style partition folders (``topic=orders/date=2024-05-01/``, nulls as
``__HIVE_DEFAULT_PARTITION__``) inside the table, named ``part-kafkalog-<run id>-<n>`` so a
killed run's files can be found and deleted (:mod:`kafkalog_spark.delta.commit`). Partition
columns are not stored in the files (Delta keeps them in the ``add`` action). Timestamps are
written as microsecond ``TIMESTAMP`` adjusted to UTC, the schema all nullable.

The local engine (:func:`write_local`) runs the ``kafkalog`` data source's own planner and task
reader (:func:`~kafkalog_spark.datasource.reader.plan_scan` /
:func:`~kafkalog_spark.datasource.reader.read_split`) in this process, so it reads exactly what
the Spark engine reads, without a JVM.
"""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path
from urllib.parse import quote

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import KafkaLogError, Location
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


def write_local(plan: TablePlan, read_options: dict[str, str], partition_by: tuple[str, ...],
                run_id: str) -> list[DataFile]:
    """Read this run's records of one table in this process and write them as Parquet files.

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
    from ..datasource.reader import plan_scan, read_split

    opts = parse_read_options(read_options)
    file_schema = pa.schema([f for f in plan.schema if f.name not in partition_by])
    open_files: OrderedDict[tuple, tuple[pq.ParquetWriter, str]] = OrderedDict()
    written: list[tuple[str, tuple]] = []
    current = plan.path  # the file a failed write names
    try:
        try:
            for split in plan_scan(opts).splits:
                for batch in read_split(split, opts):
                    rows = transform(batch, plan.schema)
                    for values, part in partition_values(rows, partition_by):
                        current = plan.path
                        writer = _writer(plan.path, open_files, written, values, partition_by,
                                         file_schema, run_id)
                        current = plan.path / open_files[values][1]
                        writer.write_batch(part.select(file_schema.names))
        finally:
            for writer, rel in open_files.values():
                current = plan.path / rel
                writer.close()
    except OSError as exc:
        # pyarrow's errors (full disk, a file size limit) do not name the file
        raise KafkaLogError(f"writing a Parquet data file failed: {exc.strerror or exc}",
                            Location(str(current))) from exc
    return [data_file(plan.path, rel, dict(zip(partition_by, values)))
            for rel, values in written]


def _writer(root: Path, open_files: OrderedDict, written: list, values: tuple,
            partition_by: tuple[str, ...], schema: pa.Schema, run_id: str) -> pq.ParquetWriter:
    if values in open_files:
        open_files.move_to_end(values)
        return open_files[values][0]
    if len(open_files) >= MAX_OPEN_FILES:
        _, (old, _) = open_files.popitem(last=False)
        old.close()
    folder = partition_dir(partition_by, values)
    rel = f"{folder}/{file_name(run_id, len(written))}" if folder else file_name(run_id,
                                                                                 len(written))
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    writer = pq.ParquetWriter(root / rel, schema, **PARQUET_OPTIONS)
    open_files[values] = (writer, rel)
    written.append((rel, values))
    return writer
