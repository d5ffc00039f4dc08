"""The Spark engine of a migration (Delta layer): Spark tasks decode and write Parquet.

Spark tasks read exactly the run's offset windows (the options of
:meth:`~kafkalog_spark.delta.plan.TablePlan.read_options`) with the ``kafkalog`` source's planner
and task reader, apply :func:`~kafkalog_spark.delta.columns.transform` (date and internal-topic
columns) in the task (:class:`MigrationRows`), and Spark's
Parquet writer writes microsecond UTC timestamps into the run's staging folder inside the table.
The driver then moves every file to its partition folder under a run-named file name; the
commit (delta-rs) makes them visible.

With the Delta jars on the session's classpath (:func:`delta_jars_available`) and
``writer="delta-spark"`` (or ``auto``), each partition is instead appended with
``df.write.format("delta")`` and the idempotent-write options ``txnAppId`` / ``txnVersion`` —
the same application ids and versions the delta-rs path records, so either writer can continue
a table the other started. That is one commit per partition instead of one per table.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from ..datasource.options import ReadOptions, parse_read_options
from ..datasource.executors import require_visible, task_errors
from ..datasource.reader import KafkaLogReader
from ..log.storage import storage_for
from .columns import transform
from .commit import DataFile, data_file
from .files import NULL_PARTITION, file_name
from .options import MigrateOptions
from .plan import TablePlan

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DELTA_CLASS = "org.apache.spark.sql.delta.sources.DeltaDataSource"


def delta_jars_available(spark: "SparkSession") -> bool:
    """Whether delta-spark's data source class loads in the session's JVM."""
    try:
        jvm = spark.sparkContext._jvm  # type: ignore[attr-defined]
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        jvm.java.lang.Class.forName(DELTA_CLASS, False, loader)
        return True
    except Exception:  # py4j reports a missing class as a generic Py4JJavaError
        return False


SCHEMA_OPTION = "kafkalog.delta.schema"  # the rows' Arrow schema (IPC, base64) for the tasks
DEST_OPTION = "kafkalog.delta.destination"  # the table's folder: tasks check they can reach it
_OWN_OPTIONS = (SCHEMA_OPTION.lower(), DEST_OPTION.lower())


class MigrationRows(DataSource):
    """The rows a migration writes, as a data source: the ``kafkalog`` reader
    (:class:`~kafkalog_spark.datasource.reader.KafkaLogReader`) with :func:`transform` applied
    in the task.

    A source rather than ``df.mapInArrow``: that needs pandas on the driver, this does not."""

    @classmethod
    def name(cls) -> str:
        return "kafkalog_delta_rows"

    def _arrow_schema(self) -> pa.Schema:
        return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(self.options[SCHEMA_OPTION])))

    def schema(self) -> StructType:
        return from_arrow_schema(self._arrow_schema())

    def reader(self, schema: StructType) -> DataSourceReader:
        read = {k: v for k, v in self.options.items() if k.lower() not in _OWN_OPTIONS}
        return _MigrationReader(parse_read_options(read), self._arrow_schema(),
                                self.options.get(DEST_OPTION))


class _MigrationReader(KafkaLogReader):
    """The ``kafkalog`` reader (same planning and task packing: many small segments per task,
    so one Parquet file per task rather than per segment) with :func:`transform` applied."""

    def __init__(self, options: ReadOptions, schema: pa.Schema, destination: str | None) -> None:
        super().__init__(options)
        self.arrow_schema = schema
        self.destination = destination

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if self.destination is not None:  # Spark's Parquet writer runs on this executor too
            require_visible(self.destination, "Delta table folder")
        for batch in super().read(partition):
            yield transform(batch, self.arrow_schema)


def _dataframe(spark: "SparkSession", plan: TablePlan, read_options: dict[str, str]):
    spark.dataSource.register(MigrationRows)
    encoded = base64.b64encode(plan.schema.serialize().to_pybytes()).decode()
    # as many tasks as cores: a table of small segments then costs a few tasks, not 16
    read_options = {"minPartitions": str(spark.sparkContext.defaultParallelism), **read_options}
    return (spark.read.format(MigrationRows.name()).options(**read_options)
            .option(SCHEMA_OPTION, encoded).option(DEST_OPTION, str(plan.path)).load())


def write_spark(spark: "SparkSession", plan: TablePlan, read_options: dict[str, str],
                partition_by: tuple[str, ...], run_id: str, staging: Path) -> list[DataFile]:
    """Write this run's rows of one table as Parquet with Spark; return the files, moved to
    their final place inside the table (not yet committed)."""
    df = _dataframe(spark, plan, read_options)
    key = "spark.sql.parquet.outputTimestampType"
    previous = spark.conf.get(key, None)
    spark.conf.set(key, "TIMESTAMP_MICROS")  # Spark's default INT96 is not a Delta timestamp
    try:
        writer = df.write.mode("errorifexists").option("compression", "snappy")
        if partition_by:
            writer = writer.partitionBy(*partition_by)
        with task_errors():
            writer.parquet(str(staging))
    finally:
        if previous is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, previous)
    return _adopt(plan.path, staging, partition_by, run_id)


def _adopt(root: Path, staging: Path, partition_by: tuple[str, ...], run_id: str
           ) -> list[DataFile]:
    out = []
    fs = storage_for(root)
    found = [p for p in fs.glob(staging, "**/*.parquet")  # Path.rglob, sorted
             if not p.name.startswith((".", "_"))]
    for n, src in enumerate(found):
        folders = src.relative_to(staging).parts[:-1]
        values: dict[str, str | None] = {}
        for folder, col in zip(folders, partition_by):
            name, _, raw = folder.partition("=")
            if name != col:
                raise ValueError(f"unexpected Spark output folder {folder!r} (expected {col}=...)")
            values[col] = None if raw == NULL_PARTITION else unquote(raw)
        rel = "/".join([*folders, file_name(run_id, n)])
        fs.make_dirs((root / rel).parent, exist_ok=True)
        fs.rename(src, root / rel)
        out.append(data_file(root, rel, values))
    return out


def write_delta_spark(spark: "SparkSession", plan: TablePlan, read_options: dict[str, str],
                      opts: MigrateOptions) -> int:
    """Append each pending partition with delta-spark's idempotent writes; returns the number
    of commits made."""
    import json

    commits = 0
    for part in plan.pending:
        one = dict(read_options)
        one["assign"] = json.dumps({part.topic: [part.partition]})
        one["startingOffsets"] = json.dumps({part.topic: {str(part.partition): part.start}})
        one["endingOffsets"] = json.dumps({part.topic: {str(part.partition): part.end}})
        writer = (_dataframe(spark, plan, one).write.format("delta").mode("append")
                  .option("mergeSchema", "true")
                  .option("txnAppId", opts.app_id(part.topic, part.partition))
                  .option("txnVersion", str(part.end)))
        if opts.partition_by:
            writer = writer.partitionBy(*opts.partition_by)
        with task_errors():
            writer.save(str(plan.path))
        commits += 1
    return commits
