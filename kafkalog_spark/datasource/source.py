"""The ``kafkalog`` Spark data source (Spark layer): schema, reader and writer entry points.

``spark.read.format("kafkalog").load(path)`` reads Kafka log dirs as a DataFrame with the
columns of Spark's own Kafka source (plus ``headers`` / the Kafka metadata columns on request);
``df.write.format("kafkalog")`` writes them (:mod:`kafkalog_spark.datasource.writer`). The
column table lives in :mod:`kafkalog_spark.codec.schema`; :func:`spark_schema` is the one
conversion of it to Spark types.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSource, DataSourceReader
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructField, StructType

from ..codec.schema import record_schema
from ..errors import InvalidOptionError
from .options import parse_read_options
from .reader import KafkaLogReader

if TYPE_CHECKING:
    from pyspark.sql.datasource import DataSourceWriter


def spark_schema(include_headers: bool = False, include_metadata: bool = False) -> StructType:
    """``record_schema(include_headers, include_metadata)`` as a Spark ``StructType``: the same
    names, types and nullability, each column's documentation as its comment."""
    arrow = record_schema(include_headers, include_metadata)
    converted = from_arrow_schema(arrow)
    return StructType([
        StructField(f.name, f.dataType, f.nullable,
                    {"comment": arrow.field(f.name).metadata[b"doc"].decode()})
        for f in converted.fields])


class KafkaLogDataSource(DataSource):
    """Kafka log dirs as a Spark data source named ``kafkalog``.

    Options: see :data:`kafkalog_spark.datasource.options.READ_OPTIONS` (reading) and the
    writer module (writing). Options are checked when the schema is asked for, so a bad one
    fails at ``load()``.
    """

    @classmethod
    def name(cls) -> str:
        return "kafkalog"

    def schema(self) -> StructType:
        opts = parse_read_options(self.options)
        return spark_schema(opts.include_headers, opts.include_metadata)

    def reader(self, schema: StructType) -> DataSourceReader:
        opts = parse_read_options(self.options)
        expected = spark_schema(opts.include_headers, opts.include_metadata)
        if [(f.name, f.dataType) for f in schema.fields] != [(f.name, f.dataType)
                                                             for f in expected.fields]:
            raise InvalidOptionError(
                f"format kafkalog has a fixed schema; do not pass .schema(...) (got "
                f"{schema.simpleString()}, expected {expected.simpleString()} — use "
                f"includeHeaders / includeMetadata to choose the columns)")
        return KafkaLogReader(opts)

    def writer(self, schema: StructType, overwrite: bool) -> "DataSourceWriter":
        from .writer import KafkaLogWriter  # the writing side lives in its own module

        return KafkaLogWriter(dict(self.options), schema, overwrite)
