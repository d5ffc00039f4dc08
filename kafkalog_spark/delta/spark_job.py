"""The Spark engine of a migration (Delta layer): one Spark job writes every table's Parquet.

The driver plans each table (:mod:`~kafkalog_spark.delta.plan`), then every table's splits
the way the ``kafkalog`` source does (:func:`plan_tasks`), and packs them into tasks across
tables, so a run over fifty small topics is one Spark job of a few tasks, not fifty jobs. A
task (:func:`files_task`) decodes its splits with the source's task reader, applies
:func:`~kafkalog_spark.delta.columns.transform` and writes Parquet with the local engine's own
code (:func:`~kafkalog_spark.delta.files.write_splits`) into a staging folder of its own
attempt, and returns one small row per file. The driver moves the files of the attempts Spark
kept to their partition folders under run-named file names (a retried or speculative
attempt's files stay in staging, removed with it); the commit (delta-rs) makes them visible.

With the Delta jars on the session's classpath (:func:`delta_jars_available`) and
``writer="delta-spark"`` (or ``auto`` for a table delta-rs cannot write), each partition is
instead appended with ``df.write.format("delta")`` and the idempotent-write options
``txnAppId`` / ``txnVersion`` — the same application ids and versions the delta-rs path
records, so either writer can continue a table the other started — and the run id as the
commit's ``userMetadata``. That is one commit per partition instead of one per table.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from functools import partial
from itertools import groupby
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from ..datasource.executors import require_visible, task_attempt, task_errors
from ..datasource.options import ReadOptions, parse_read_options
from ..datasource.plan import codec_weights, pack_splits, plan_scan
from ..datasource.reader import KafkaLogReader
from ..datasource.splits import KafkaLogSplit
from ..storage import as_path, storage_for
from ..storage.atomic import disk_errors
from ..storage.paths import ObjectPath
from .columns import transform
from .commit import DataFile, data_file, load_in_background
from .files import file_name, write_splits
from .options import MigrateOptions
from .plan import SourceListing, TablePlan

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
    read_options = {"minPartitions": str(spark.sparkContext.defaultParallelism), **read_options,
                    SCHEMA_OPTION: encoded}
    if not isinstance(plan.path, ObjectPath):  # a folder every executor must see; an object
        read_options[DEST_OPTION] = str(plan.path)  # store is Spark's Hadoop file system's
    return spark.read.format(MigrationRows.name()).options(**read_options).load()


HADOOP_SCHEMES = {"s3": "s3a", "gcs": "gs", "az": "abfss"}
"""The scheme Spark's Hadoop file systems take for an object-store URI written another way
(Hadoop has no FileSystem for ``s3://``; the package reads ``s3://`` and ``s3a://`` alike)."""


def hadoop_uri(path: Path | ObjectPath) -> str:
    """``path`` as Spark's writers take it."""
    if not isinstance(path, ObjectPath) or path.scheme not in HADOOP_SCHEMES:
        return str(path)
    return HADOOP_SCHEMES[path.scheme] + str(path)[len(path.scheme):]


@dataclass(frozen=True)
class TableWrite:
    """What the tasks need of one table of a run (picklable): where its files go, the rows'
    schema and the read options of this run's records."""

    root: str  # the table folder
    staging: str  # the run's staging folder inside it; each task attempt writes a folder of its own
    schema: pa.Schema
    read_options: dict[str, str]
    storage: dict[str, str] | None = None  # the table's object-store options (None: local)

    def root_path(self) -> Path | ObjectPath:
        return as_path(self.root, self.storage)

    def in_place(self) -> bool:
        """Whether attempts write straight into the table (object stores: no rename to move
        a staged file; each attempt's files carry its id, and only the kept ones are
        committed) rather than into their staging folders."""
        return self.storage is not None


@dataclass(frozen=True)
class FilesTask:
    """One Spark task of a migration: splits of one or more tables, ``(table index, split)``."""

    items: tuple[tuple[int, KafkaLogSplit], ...]


def plan_tasks(tables: list[TableWrite], min_tasks: int, listing: SourceListing | None = None
               ) -> list[FilesTask]:
    """Every table's splits, planned as the ``kafkalog`` source plans them (listings and
    index entries, no record decoded), packed into tasks across tables (many small topics: a
    few tasks, not one per table) of about equal work: a split's bytes weighed by its
    segment's codec (:data:`LOG_CODEC_COST`, :func:`~..datasource.plan.codec_weights`; on an
    object store by its partition's, from ``listing``). ``listing``: what planning the run
    read of its sources, from which the tables' reads are planned (not listed again per
    table)."""
    tagged, max_bytes = [], 0
    for i, table in enumerate(tables):
        opts = parse_read_options(table.read_options)
        max_bytes = opts.max_bytes_per_partition
        found = None if listing is None else listing.found
        tagged += [(i, split) for split in plan_scan(opts, found=found).splits]
    if not tagged:
        return []
    by_split = {id(split): i for i, split in tagged}
    splits = [s for _, s in tagged]
    tasks = pack_splits(splits, max_bytes, min_tasks=min_tasks, cost=codec_weights(
        splits, LOG_CODEC_COST, None if listing is None else listing.codecs))
    return [FilesTask(tuple((by_split[id(s)], s) for s in t.splits)) for t in tasks]


LOG_CODEC_COST = {"none": 1.0, "lz4": 1.1, "snappy": 1.05, "zstd": 2.05, "gzip": 2.15}
"""A migration task's work per ``.log`` byte by the codec of the segment it reads, relative to
uncompressed batches: the medians of three migrate runs on the 4 GiB bench_scaling log (ns per
log byte of the tasks of one codec, ``benchmarks/bench_task_codec_cost.py --job migrate``;
BENCHMARKS.md, "Scan tasks weighed by codec"); an unknown codec counts as uncompressed."""


def files_task(tables: list[TableWrite], partition_by: tuple[str, ...], run_id: str,
               task: FilesTask) -> list[tuple[int, str, DataFile]]:
    """One task of :func:`write_spark`: decode its splits and write their Parquet files into
    its attempt's own staging folder (in place on an object store); returns per file its
    table index, its path below the staging folder (``attempt-<id>/...``) and its ``add``
    action's description, read from the file's footer here rather than on the driver."""
    attempt = f"attempt-{task_attempt()}"
    out_rows: list[tuple[int, str, DataFile]] = []
    for i, items in groupby(task.items, key=lambda item: item[0]):
        table = tables[i]
        root = table.root_path()
        require_visible(root, "Delta table folder")
        if table.in_place():
            out, tag = root, f"{run_id}-{attempt}"
        else:
            out, tag = Path(table.staging) / attempt, run_id
            # only below the run's staging folder (made by the driver): an attempt that
            # outlives the run fails here instead of re-creating a folder the run removed
            storage_for(out).make_dirs_below(table.staging, out)
        written = write_splits((split for _, split in items),
                               parse_read_options(table.read_options), table.schema,
                               partition_by, out, tag)
        out_rows += [(i, f"{attempt}/{rel}", data_file(out, rel, dict(zip(partition_by, values))))
                     for rel, values in written]
    return out_rows


def write_spark(spark: "SparkSession", tables: list[TableWrite], partition_by: tuple[str, ...],
                run_id: str, listing: SourceListing | None = None) -> list[list[DataFile]]:
    """Write this run's rows of every table as Parquet in one Spark job (planned from
    ``listing``, what planning the run read of its sources, when given); returns each table's
    files, moved from the staging folder of the attempt that succeeded to their final place
    inside the table (not yet committed). Other attempts' files stay in staging, which the
    run's end removes.

    The tasks are planned here and run as an RDD of :class:`FilesTask`: a Python data source
    planned them in Spark's Python planning workers instead, and that source, registered on
    the session, got two planning daemons of its own beside the ``kafkalog`` source's (for
    ``schema()``, then ``reader()``/``partitions()``), each a fresh interpreter importing this
    package: 3-4 s before the first task on a 282 MiB log, against 0.03 s of planning here
    (0.3 s for a 4 GB log of 4,146 segments)."""
    sc = spark.sparkContext
    tasks = plan_tasks(tables, sc.defaultParallelism, listing)
    out: list[list[DataFile]] = [[] for _ in tables]
    if not tasks:
        return out
    with task_errors():
        rdd = sc.parallelize(tasks, len(tasks)).flatMap(
            partial(files_task, tables, partition_by, run_id))
        load_in_background()  # what the commits import, while the driver waits on the job
        rows = rdd.collect()
    for i, staged, file in sorted(rows, key=lambda r: (r[0], r[1])):
        out[i].append(file if tables[i].in_place()  # written where it stays, attempt-named
                      else _moved(tables[i], staged, file, file_name(run_id, len(out[i]))))
    return out


def _moved(table: TableWrite, staged: str, file: DataFile, name: str) -> DataFile:
    """A staged file of a kept attempt (``attempt-<id>/<folder>/<file>`` below the staging
    folder) moved into its partition folder of the table under the run-named ``name``."""
    root, folder = table.root_path(), file.path.rpartition("/")[0]
    final = "/".join(x for x in (folder, name) if x)
    fs = storage_for(root)
    with disk_errors("moving a data file into the table", root / final):
        fs.make_dirs_below(root, (root / final).parent)
        fs.rename(Path(table.staging) / staged, root / final)
    return replace(file, path=final)


def write_delta_spark(spark: "SparkSession", plan: TablePlan, read_options: dict[str, str],
                      opts: MigrateOptions, metadata: dict[str, Any],
                      step: Callable[[str], None]) -> None:
    """Append each pending partition with delta-spark's idempotent writes (``txnAppId`` /
    ``txnVersion``: a partition whose offsets are already recorded commits nothing), each
    commit carrying ``metadata`` as its ``userMetadata`` JSON; ``step("before-commit")`` and
    ``step("committed")`` around each partition's write."""
    for part in plan.pending:
        one = dict(read_options)
        one["assign"] = json.dumps({part.topic: [part.partition]})
        one["startingOffsets"] = json.dumps({part.topic: {str(part.partition): part.start}})
        one["endingOffsets"] = json.dumps({part.topic: {str(part.partition): part.end}})
        writer = (_dataframe(spark, plan, one).write.format("delta").mode("append")
                  .option("mergeSchema", "true")
                  .option("txnAppId", opts.app_id(part.topic, part.partition))
                  .option("txnVersion", str(part.end))
                  .option("userMetadata", json.dumps(metadata)))
        if opts.partition_by:
            writer = writer.partitionBy(*opts.partition_by)
        step("before-commit")
        with task_errors():
            writer.save(hadoop_uri(plan.path))
        step("committed")
