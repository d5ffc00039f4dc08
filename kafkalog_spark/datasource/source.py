"""The ``kafkalog`` Spark data source (Spark layer): schema, reader and writer entry points.

``spark.read.format("kafkalog").load(path)`` reads Kafka log dirs as a DataFrame with the
columns of Spark's own Kafka source (plus ``headers`` / the Kafka metadata columns on request);
``df.write.format("kafkalog")`` writes them (:mod:`kafkalog_spark.datasource.writer`). The
column table lives in :mod:`kafkalog_spark.codec.records.schema`; :func:`spark_schema`
(:mod:`.columns`) is the one conversion of it to Spark types. A user schema
(``.schema(...)``) selects columns: column pruning, see :mod:`.columns`.

Each side's modules are imported by the method that needs them: Spark unpickles this class in
every planning process, and the write's set-up needs neither the reader's planning nor its
column conversions (about 0.1 s of imports in a fresh process).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSource

if TYPE_CHECKING:
    from pyspark.sql.datasource import DataSourceReader, DataSourceWriter
    from pyspark.sql.types import StructType

    from .options import ReadOptions

__all__ = ["KafkaLogDataSource"]


class KafkaLogDataSource(DataSource):
    """Kafka log dirs as a Spark data source named ``kafkalog``.

    Options: see :data:`kafkalog_spark.datasource.options.READ_OPTIONS` (reading) and the
    writer module (writing). Options are checked when the schema is asked for, so a bad one
    fails at ``load()``. With a user schema Spark asks for none and runs no Python at
    ``load()`` (pyspark 4.2, checked): options and schema are then checked in :meth:`reader`,
    at the first action.
    """

    session_storage: dict[str, str] = {}
    """Object-store options from the session's ``spark.hadoop.fs.s3a.*`` settings; set on the
    class that :func:`kafkalog_spark.spark.register` registers (options given on a read or
    write win over them)."""

    @classmethod
    def name(cls) -> str:
        return "kafkalog"

    def schema(self) -> StructType:
        """The columns the options choose, declared as Spark's Kafka source declares its
        columns (every field nullable; :mod:`.kafka_source`)."""
        from .columns import spark_schema
        from .kafka_source import nullable

        opts = self._read_options()
        return nullable(spark_schema(opts.include_headers, opts.include_metadata))

    def reader(self, schema: StructType) -> DataSourceReader:
        """The reader of ``schema``'s columns only (``schema()``'s or a user schema: any
        subset of the columns, see :mod:`.columns`)."""
        from .columns import scan_columns
        from .reader import KafkaLogReader

        opts = self._read_options()
        return KafkaLogReader(opts, *scan_columns(schema, opts))

    def _read_options(self) -> ReadOptions:
        """The read options, the Kafka source's options that mean nothing here dropped (each
        name logged once: :func:`~.kafka_source.without_ignored`)."""
        from .kafka_source import without_ignored
        from .options import parse_read_options

        return parse_read_options(without_ignored(self.options), self.session_storage)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from .writer import KafkaLogWriter

        return KafkaLogWriter(dict(self.options), schema, overwrite, self.session_storage)
