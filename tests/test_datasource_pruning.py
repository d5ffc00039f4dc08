"""Column pruning: a user schema on ``format("kafkalog")`` and ``read_log(columns=...)`` decode
and ship only the columns asked for; bad columns fail listing the valid ones. Plan-level tests
(decoder, reader, no Spark session) and a few ``spark``-marked ones in a local session."""

from __future__ import annotations

import os
import pickle
import re
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (ArrayType, BinaryType, IntegerType, LongType, StringType,
                               StructField, StructType, TimestampType)

import kafkalog_spark as kl
from kafkalog_spark.codec.records.decode import DecodeOptions, decode_to_table
from kafkalog_spark.codec.records.schema import ALL_COLUMNS, BASE_ORDER, record_schema
from kafkalog_spark.datasource import KafkaLogDataSource, spark_schema
from kafkalog_spark.datasource.options import parse_read_options
from kafkalog_spark.datasource.plan import plan_scan
from kafkalog_spark.datasource.reader import read_split
from kafkalog_spark.errors import InvalidOptionError
from kafkalog_spark.log.reader import iter_log
from test_datasource_read import as_source, records, write_txn_partition
from test_decode import LEGACY_CASES, RECS, _kp_legacy, _kp_v2

ALL_NAMES = list(ALL_COLUMNS)
SUBSETS = [["value"], ["key"], ["offset", "key"], ["headers", "topic"], ["partition"],
           ["compression", "producerId", "value", "timestamp"], ["timestampType", "isControl"],
           [], list(reversed(ALL_NAMES)), BASE_ORDER]
VALID = "valid columns (any subset, any order): key binary, value binary, topic string"


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("prune") / "logs"
    kl.write_log(records(1500), d, codec="none", segment_bytes=16 * 1024, max_batch_records=20,
                 index_interval_bytes=1024)
    kl.write_log(records(400, topic="payments", seed=4), d, codec="lz4", segment_bytes=8 * 1024)
    return d


def ddl_like(names: list[str]) -> StructType:
    """The schema a user's DDL string gives: the source's types, every field nullable."""
    def loose(t):
        if isinstance(t, StructType):
            return StructType([StructField(f.name, loose(f.dataType)) for f in t.fields])
        if isinstance(t, ArrayType):
            return ArrayType(loose(t.elementType))
        return t
    full = spark_schema(columns=ALL_NAMES)
    return StructType([StructField(n, loose(full[n].dataType)) for n in names])


def read(options: dict, schema: StructType | None = None) -> pa.Table:
    """The source as Spark drives it with an optional user schema (Spark skips schema())."""
    source = KafkaLogDataSource(options)
    schema = source.schema() if schema is None else schema
    reader = source.reader(schema)
    parts = [pickle.loads(pickle.dumps(p)) for p in reader.partitions()]
    arrow = to_arrow_schema(schema, timezone="UTC")
    batches = [b for p in parts for b in reader.read(p)]
    for b in batches:
        assert b.schema.equals(arrow)  # Spark's own check on returned batches
    return pa.Table.from_batches(batches, schema=arrow)


def same(got: pa.Table, full: pa.Table, names: list[str]) -> bool:
    """Equal values, nullability aside (a DDL schema is all nullable)."""
    assert got.column_names == names and got.num_rows == full.num_rows
    return all(got.column(n).cast(full.schema.field(n).type).equals(full.column(n))
               for n in names)


# --- decoder ---------------------------------------------------------------------------------


def _all_formats() -> bytes:
    recs = [(k, v) for k, v, _ in RECS]
    data = _kp_v2(RECS, 0, base_offset=0) + _kp_v2(RECS, 3, base_offset=4)
    for i, (builder, magic, codec) in enumerate(LEGACY_CASES):
        data += _kp_legacy(recs, magic, codec, base_offset=8 + 4 * i, builder=builder)
    return data


@pytest.mark.parametrize("names", SUBSETS)
def test_decoder_builds_exactly_the_columns_asked_for(names):
    data = _all_formats()
    full = decode_to_table(data, topic="t", partition=2, options=DecodeOptions(
        include_headers=True, include_metadata=True))
    got = decode_to_table(data, topic="t", partition=2, options=DecodeOptions(columns=names))
    assert got.schema.equals(record_schema(columns=names))
    assert got.num_rows == full.num_rows > 40
    assert got.equals(full.select(names)) or not names


def test_decoder_columns_with_offset_window_and_small_batches():
    data = _all_formats()
    opts = dict(min_offset=3, max_offset=30)
    full = decode_to_table(data, topic="t", partition=0, **opts,
                           options=DecodeOptions(include_headers=True, max_rows=3))
    got = decode_to_table(data, topic="t", partition=0, **opts,
                          options=DecodeOptions(columns=("value", "headers"), max_rows=3))
    assert got.equals(full.select(["value", "headers"]))


def test_decode_option_columns_are_checked():
    with pytest.raises(InvalidOptionError, match=re.escape(f"no column 'nope'; {VALID}")):
        DecodeOptions(columns=("value", "nope"))
    with pytest.raises(InvalidOptionError, match="asked for twice"):
        DecodeOptions(columns=("value", "value"))
    with pytest.raises(InvalidOptionError, match="sequence of column names"):
        DecodeOptions(columns="value")
    assert DecodeOptions(columns=["value"]).columns == ("value",)


def test_pruned_decode_same_without_jit(tmp_path):
    """The kernels' flags take the same path under NUMBA_DISABLE_JIT=1 (pure Python)."""
    data = _all_formats()
    (tmp_path / "data.bin").write_bytes(data)
    script = ("import sys, pyarrow as pa\n"
              "from kafkalog_spark.codec.records.decode import DecodeOptions, decode_to_table\n"
              "data = open(sys.argv[1], 'rb').read()\n"
              "for cols in (('value',), ('key', 'headers'), (), ('offset', 'compression')):\n"
              "    t = decode_to_table(data, topic='t', partition=0,"
              " options=DecodeOptions(columns=cols))\n"
              "    with pa.OSFile(sys.argv[1] + '-' + '_'.join(cols), 'wb') as f:\n"
              "        w = pa.ipc.new_file(f, t.schema); w.write_table(t); w.close()\n")
    flag = "0" if os.environ.get("NUMBA_DISABLE_JIT") == "1" else "1"
    env = {**os.environ, "NUMBA_DISABLE_JIT": flag}
    subprocess.run([sys.executable, "-c", script, str(tmp_path / "data.bin")], env=env,
                   check=True, timeout=600)
    for cols in (("value",), ("key", "headers"), (), ("offset", "compression")):
        other = pa.ipc.open_file(str(tmp_path / f"data.bin-{'_'.join(cols)}")).read_all()
        here = decode_to_table(data, topic="t", partition=0, options=DecodeOptions(columns=cols))
        assert other.equals(here) and other.num_rows == here.num_rows


# --- read_log --------------------------------------------------------------------------------


@pytest.mark.parametrize("names", SUBSETS)
def test_read_log_columns_equal_full_read(log_dir, names):
    full = kl.read_log(log_dir, include_headers=True, include_metadata=True)
    got = kl.read_log(log_dir, columns=names)
    assert got.schema.equals(record_schema(columns=names))
    assert got.num_rows == full.num_rows == 1900
    assert got.equals(full.select(names)) or not names


def test_read_log_columns_override_the_flags(log_dir):
    got = kl.read_log(log_dir, columns=["headers", "magic"], include_headers=False,
                      start_offset=10, end_offset=20)
    assert got.column_names == ["headers", "magic"] and got.num_rows == 4 * 10
    assert iter_log(log_dir, columns=["offset"]).schema.names == ["offset"]


def test_read_log_bad_column_lists_the_valid_ones(log_dir):
    with pytest.raises(InvalidOptionError, match=re.escape(f"no column 'vlaue'; {VALID}")) as e:
        kl.read_log(log_dir, columns=["vlaue"])
    assert "headers list<element: struct<key: string not null" in str(e.value)
    assert "compression string" in str(e.value)


# --- data source reader (plan level, no Spark session) ---------------------------------------


@pytest.mark.parametrize("names", SUBSETS)
def test_reader_with_subset_schema(log_dir, names):
    full = read({"path": str(log_dir), "includeHeaders": "true", "includeMetadata": "true"})
    assert same(read({"path": str(log_dir)}, spark_schema(columns=names)), full, names)
    assert same(read({"path": str(log_dir), "maxBytesPerPartition": "4096"}, ddl_like(names)),
                full, names)


def test_reader_ships_only_the_schema_columns(log_dir):
    opts = parse_read_options({"path": str(log_dir)})
    split = plan_scan(opts).splits[0]
    batches = list(read_split(split, opts, columns=("value",)))
    assert batches and all(b.schema.names == ["value"] for b in batches)
    assert all(b.column(0).buffers()[2].size <= sum(len(v) for v in b.column(0).to_pylist())
               for b in batches)


def test_read_committed_with_pruned_schema(tmp_path):
    """The aborted-transaction filter reads producerId / isTransactional, not in the schema."""
    pdir = tmp_path / "txn-0"
    write_txn_partition(pdir, with_indexes=True)
    opts = {"path": str(pdir), "kafka.isolation.level": "read_committed"}
    full = read(opts)
    got = read(opts, ddl_like(["value", "offset"]))
    assert got.column_names == ["value", "offset"]
    assert got["offset"].to_pylist() == full["offset"].to_pylist()
    assert 0 not in got["offset"].to_pylist()  # offsets 0-4: an aborted transaction


def test_starting_timestamp_without_timestamp_column(log_dir):
    """A starting timestamp prunes a read whose schema has no ``timestamp`` column."""
    from test_datasource_read import T0

    source = KafkaLogDataSource({"path": str(log_dir), "subscribe": "orders",
                                 "startingTimestamp": str(T0 + 5000)})
    reader = source.reader(ddl_like(["offset", "partition"]))
    got = sorted((b_p, o) for p in reader.partitions() for b in reader.read(p)
                 for b_p, o in zip(b.column("partition").to_pylist(),
                                   b.column("offset").to_pylist()))
    full = kl.read_log(log_dir, topics=["orders"])
    first = {}  # the first offset of each partition at or after the timestamp (ListOffsets)
    for p, o, t in zip(full["partition"].to_pylist(), full["offset"].to_pylist(),
                       full["timestamp"].cast(pa.int64()).to_pylist()):
        if t >= (T0 + 5000) * 1000 and p not in first:
            first[p] = o
    expected = sorted((p, o) for p, o in zip(full["partition"].to_pylist(),
                                             full["offset"].to_pylist())
                      if p in first and o >= first[p])
    assert got == expected and 0 < len(got) < full.num_rows


@pytest.mark.parametrize("schema,needle", [
    (StructType([StructField("value", StringType())]),
     "column 'value' has type binary, not string"),
    (StructType([StructField("nope", IntegerType())]), "no column 'nope'"),
    (StructType([StructField("offset", LongType(), False), StructField("key", BinaryType(),
                                                                      False)]),
     "column 'key' can be null; it cannot be declared NOT NULL"),
    (StructType([StructField("headers", ArrayType(StructType([
        StructField("key", StringType()), StructField("value", BinaryType(), False)])))]),
     "declares NOT NULL a nested field or element that can be null"),
    (StructType([StructField("timestamp", TimestampType()), StructField("timestamp",
                                                                        TimestampType())]),
     "asked for twice"),
])
def test_bad_user_schema_lists_valid_columns(log_dir, schema, needle):
    source = KafkaLogDataSource({"path": str(log_dir)})
    with pytest.raises(InvalidOptionError) as e:
        source.reader(schema)
    assert needle in str(e.value)
    assert ("valid columns (any subset, any order): key binary, value binary, topic string, "
            "partition int, offset bigint, timestamp timestamp, timestampType int, headers "
            "array<struct<key:string,value:binary>>, leaderEpoch int") in str(e.value)


def test_docs_column_table_is_current() -> None:
    from kafkalog_spark.datasource.columns import columns_doc

    doc = (Path(__file__).resolve().parents[1] / "docs" / "datasource.md").read_text()
    assert columns_doc() in doc and ".schema(" in doc


# --- Spark -----------------------------------------------------------------------------------


@pytest.mark.spark
def test_spark_pruned_dataframe_equals_full_columns(spark, log_dir):
    full = spark.read.format("kafkalog").option("includeHeaders", "true").load(str(log_dir))
    for ddl, names in (("value BINARY", ["value"]),
                       ("offset BIGINT, headers ARRAY<STRUCT<key: STRING, value: BINARY>>, "
                        "topic STRING, compression STRING", ["offset", "headers", "topic",
                                                              "compression"])):
        df = spark.read.format("kafkalog").schema(ddl).load(str(log_dir))
        assert df.columns == names
        got = df.toArrow()
        want = kl.read_log(log_dir, columns=names)
        key = [(n, "ascending") for n in ("topic", "offset") if n in names]
        if key:
            got, want = got.sort_by(key), want.sort_by(key)
        assert got.equals(as_source(want, got.schema))  # headers null where none
    # filters on schema columns stay with Spark and are exact
    df = spark.read.format("kafkalog").schema("offset BIGINT, topic STRING").load(str(log_dir))
    assert df.where("topic = 'payments' AND offset >= 150").count() == full.where(
        "topic = 'payments' AND offset >= 150").count() > 0


@pytest.mark.spark
def test_spark_bad_user_schema_fails_at_first_action(spark, log_dir):
    """Given a schema, Spark runs no Python at load() (pyspark 4.2): the first action fails."""
    df = spark.read.format("kafkalog").schema("value BINARY, nope INT").load(str(log_dir))
    with pytest.raises(Exception, match="no column 'nope'.*valid columns"):
        df.collect()
    df = spark.read.format("kafkalog").schema("value STRING").load(str(log_dir))
    with pytest.raises(Exception, match="column 'value' has type binary, not string"):
        df.collect()
