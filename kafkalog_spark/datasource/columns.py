"""Which columns a ``kafkalog`` scan decodes and ships (datasource layer): the Spark schema of
the source and the one column-pruning decision (a user schema → the columns to decode).

``spark.read.format("kafkalog").schema(s)`` takes any subset of the source's columns — the base
columns, ``headers`` and the Kafka metadata columns, whatever ``includeHeaders`` /
``includeMetadata`` say — in any order, with the source's names and types; the tasks then decode
and ship those columns only. PySpark (4.2/4.3) gives a Python data source no ``pruneColumns``
hook, so a user schema is the only way to ask for fewer columns. Nullability: a user schema may
declare any column nullable (DDL strings do); declaring NOT NULL a column that can be null is
refused, at every nesting level. Given a schema, Spark runs no Python at ``load()``: a bad one
fails at the first action (``reader()``).

:func:`requested_columns` is THE pruning decision; :func:`scan_columns` (it and the Arrow
schema to label batches with) is what ``KafkaLogDataSource.reader`` calls with the schema Spark
passes. When PySpark adds a ``pruneColumns(requiredSchema)`` hook to ``DataSourceReader``,
adopting it is one line in :class:`~kafkalog_spark.datasource.reader.KafkaLogReader`:
``self.columns, self.output = scan_columns(requiredSchema, self.options)``.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.sql.types import ArrayType, DataType, MapType, StructField, StructType

from ..codec.records.schema import (ALL_COLUMNS, BASE_COLUMNS, HEADERS_COLUMN, check_columns,
                                    default_columns, record_schema)
from .options import ReadOptions
from .splits import KafkaLogSplit

# what the tasks' own filter reads (read_split): the records of aborted transactions
_ABORTED_COLUMNS = ("offset", "producerId", "isTransactional")
# the source's values where they differ from read_log's (kafka_source.null_empty_headers)
SPARK_DOCS = {"headers": "record headers in order; null when the record has none (as Spark's "
                         "Kafka source gives)"}


def spark_schema(include_headers: bool = False, include_metadata: bool = False,
                 columns: Sequence[str] | None = None) -> StructType:
    """``record_schema(include_headers, include_metadata, columns)`` as a Spark ``StructType``:
    the same names, types and nullability (which columns can hold a null), each column's
    documentation (as the source returns it: :data:`SPARK_DOCS`) as its comment. The source
    declares it all nullable (:func:`~.kafka_source.nullable`), as Spark's Kafka source does."""
    arrow = record_schema(include_headers, include_metadata, columns)
    converted = from_arrow_schema(arrow)
    return StructType([
        StructField(f.name, f.dataType, f.nullable,
                    {"comment": SPARK_DOCS.get(f.name)
                     or arrow.field(f.name).metadata[b"doc"].decode()})
        for f in converted.fields])


def requested_columns(schema: StructType | None, opts: ReadOptions) -> tuple[str, ...]:
    """The columns a scan outputs, in order: those of ``schema`` (a user schema, or the one
    :meth:`KafkaLogDataSource.schema` gave), else the ones the options choose.

    Raises
    ------
    InvalidOptionError
        A column the source does not have, or with another type (or NOT NULL where the
        source has nulls); the message lists every valid column with its Spark type.
    """
    if schema is None:
        return default_columns(opts.include_headers, opts.include_metadata)
    full = spark_schema(columns=tuple(ALL_COLUMNS))
    return check_columns([(f.name, f.dataType, f.nullable) for f in schema.fields],
                         [(f.name, f.dataType, f.nullable) for f in full.fields],
                         show=lambda t: t.simpleString(), same_type=_accepts)


def scan_columns(schema: StructType, opts: ReadOptions) -> tuple[tuple[str, ...], pa.Schema]:
    """The columns a reader of ``schema`` outputs and the Arrow schema of its batches."""
    columns = requested_columns(schema, opts)
    return columns, output_schema(schema, columns)


def decode_columns(columns: Sequence[str], split: KafkaLogSplit) -> tuple[str, ...]:
    """``columns`` plus those the split's own filter reads (dropped again after filtering)."""
    extra = _ABORTED_COLUMNS if split.aborted else ()
    return tuple(columns) + tuple(c for c in extra if c not in columns)


def output_schema(schema: StructType | None, columns: Sequence[str]) -> pa.Schema:
    """The Arrow schema Spark checks the batches against (its own conversion of ``schema``);
    the decoder's schema when no user schema was given."""
    if schema is None:
        return record_schema(columns=columns)
    return to_arrow_schema(schema, timezone="UTC")


def _accepts(user: DataType, source: DataType) -> bool:
    """Whether a user-declared type holds the source's values: the same type, nested fields
    and elements as nullable as the source's or more."""
    if isinstance(user, StructType) and isinstance(source, StructType):
        return len(user.fields) == len(source.fields) and all(
            u.name == s.name and (u.nullable or not s.nullable) and _accepts(u.dataType, s.dataType)
            for u, s in zip(user.fields, source.fields))
    if isinstance(user, ArrayType) and isinstance(source, ArrayType):
        return ((user.containsNull or not source.containsNull)
                and _accepts(user.elementType, source.elementType))
    if isinstance(user, MapType) and isinstance(source, MapType):
        return ((user.valueContainsNull or not source.valueContainsNull)
                and _accepts(user.keyType, source.keyType)
                and _accepts(user.valueType, source.valueType))
    return user == source


def columns_doc() -> str:
    """The column table as Markdown (docs/datasource.md), from ``codec.records.schema``: every column
    a user schema may ask for, with its Spark type as ``.schema(...)`` names it."""
    def without_user_schema(name: str) -> str:
        return ("always" if name in BASE_COLUMNS else "includeHeaders" if name in HEADERS_COLUMN
                else "includeMetadata")

    rows = ["| column | Spark type | can be null | without a user schema | meaning |",
            "|---|---|---|---|---|"]
    rows += [f"| `{f.name}` | `{f.dataType.simpleString()}` | {'yes' if f.nullable else 'no'} "
             f"| {without_user_schema(f.name)} | {f.metadata['comment']} |"
             for f in spark_schema(columns=tuple(ALL_COLUMNS)).fields]
    return "\n".join(rows)
