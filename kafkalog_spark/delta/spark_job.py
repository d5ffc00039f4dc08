"""The Spark engine of a migration (Delta layer): Spark tasks decode and write Parquet.

``spark.read.format("kafkalog")`` reads exactly the run's offset windows (the options of
:meth:`~kafkalog_spark.delta.plan.TablePlan.read_options`), ``mapInArrow`` applies
:func:`~kafkalog_spark.delta.columns.transform` (date and internal-topic columns), and Spark's
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

import os
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote

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


def _dataframe(spark: "SparkSession", plan: TablePlan, read_options: dict[str, str]):
    from pyspark.sql.pandas.types import from_arrow_schema

    schema = plan.schema

    def convert(batches):
        for batch in batches:
            yield transform(batch, schema)

    df = spark.read.format("kafkalog").options(**read_options).load()
    return df.mapInArrow(convert, from_arrow_schema(schema))


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
    found = sorted(p for p in staging.rglob("*.parquet") if not p.name.startswith((".", "_")))
    for n, src in enumerate(found):
        folders = src.relative_to(staging).parts[:-1]
        values: dict[str, str | None] = {}
        for folder, col in zip(folders, partition_by):
            name, _, raw = folder.partition("=")
            if name != col:
                raise ValueError(f"unexpected Spark output folder {folder!r} (expected {col}=...)")
            values[col] = None if raw == NULL_PARTITION else unquote(raw)
        rel = "/".join([*folders, file_name(run_id, n)])
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        os.replace(src, root / rel)
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
        writer.save(str(plan.path))
        commits += 1
    return commits
