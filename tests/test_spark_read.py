"""kafkalog data source end to end in a local Spark session: DataFrames equal read_log's table,
options, pushdown seen in the plan, isolation levels, auto-registration without register()."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import functions as F

import kafkalog_spark as kl
from test_datasource_read import REAL_LOG_DIRS, T0, as_source, records, write_txn_partition

pytestmark = pytest.mark.spark
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("spark") / "logs"
    for i, codec in enumerate(CODECS):
        kl.write_log(records(600, topic=f"t_{codec}", seed=i), d, codec=codec,
                     segment_bytes=8 * 1024, max_batch_records=25, index_interval_bytes=512)
    return d


def load(spark, path, **options):
    reader = spark.read.format("kafkalog")
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load(str(path))


def rows(table: pa.Table) -> list[dict]:
    return table.sort_by([("topic", "ascending"), ("partition", "ascending"),
                          ("offset", "ascending")]).to_pylist()


def test_generated_logs_equal_read_log(spark, log_dir):
    df = load(spark, log_dir, includeHeaders="true", includeMetadata="true")
    expected = kl.read_log(log_dir, include_headers=True, include_metadata=True)
    got = df.toArrow()
    assert got.schema.names == expected.schema.names
    assert rows(got) == rows(as_source(expected, got.schema)) and got.num_rows == 3000


@pytest.mark.parametrize("name", REAL_LOG_DIRS)
def test_real_fixture_dirs_equal_read_log(spark, shared_fixtures, name):
    path = shared_fixtures / name
    got = load(spark, path, includeHeaders="true").toArrow()
    assert rows(got) == rows(as_source(kl.read_log(path, include_headers=True), got.schema))


def test_split_segments_same_rows(spark, log_dir):
    whole = load(spark, log_dir)
    split = load(spark, log_dir, maxBytesPerPartition="4096")
    assert split.rdd.getNumPartitions() > whole.rdd.getNumPartitions()
    assert rows(split.toArrow()) == rows(whole.toArrow())


def test_offset_and_time_ranges(spark, log_dir):
    df = load(spark, log_dir, subscribe="t_lz4",
              startingOffsets='{"t_lz4": {"0": 100, "1": -2}}',
              endingOffsets='{"t_lz4": {"0": 150, "1": 20}}')
    got = {(r.partition, r.offset) for r in df.select("partition", "offset").collect()}
    assert got == {(0, o) for o in range(100, 150)} | {(1, o) for o in range(20)}
    df = load(spark, log_dir / "t_gzip-0", startingTimestamp=str(T0 + 2000),
              endingTimestamp=str(T0 + 4000))
    offsets = [r.offset for r in df.select("offset").orderBy("offset").collect()]
    assert offsets and offsets == list(range(offsets[0], offsets[-1] + 1))
    assert min(r.timestamp.timestamp() for r in df.collect()) * 1000 >= T0 + 2000 - 300


def test_filters_stay_with_spark(spark, log_dir):
    """No filter is pushed into the scan (see KafkaLogReader): Spark applies each one, on the
    read the options define, whether or not the session enables Python filter pushdown."""
    df = load(spark, log_dir)
    filtered = df.filter((F.col("topic") == "t_zstd") & (F.col("partition") == 1)
                         & (F.col("offset") >= 100) & (F.col("offset") < 130))
    assert [r.offset for r in filtered.select("offset").orderBy("offset").collect()] == list(
        range(100, 130))
    plan = filtered._jdf.queryExecution().executedPlan().toString()
    assert "Filter" in plan, plan
    key = "spark.sql.python.filterPushdown.enabled"
    before = spark.conf.get(key, None)
    try:
        spark.conf.set(key, "true")
        again = load(spark, log_dir)
        assert again.filter("offset >= 100 AND offset < 130 AND partition = 1 "
                            "AND topic = 't_zstd'").count() == 30
        assert again.count() == df.count()
    finally:
        spark.conf.unset(key) if before is None else spark.conf.set(key, before)


def test_isolation_levels(spark, tmp_path):
    pdir = tmp_path / "txn-0"
    write_txn_partition(pdir, with_indexes=True)
    committed = load(spark, pdir, **{"kafka.isolation.level": "read_committed"})
    assert sorted(r.offset for r in committed.collect()) == [*range(5, 15), 16, 17, 18,
                                                             *range(20, 25)]
    assert load(spark, pdir).count() == 29  # every data record, no markers


def test_include_headers(spark, log_dir):
    df = load(spark, log_dir / "t_snappy-0", includeHeaders="true")
    assert df.schema["headers"].dataType.simpleString() == "array<struct<key:string,value:binary>>"
    first = df.orderBy("offset").first()
    assert [(h.key, bytes(h.value)) for h in first.headers] == [("h", b"x")]
    assert "headers" not in load(spark, log_dir).columns
    # a record without headers: null, as Spark's Kafka source gives (read_log: an empty list)
    none = sum(1 for h in kl.read_log(log_dir / "t_snappy-0", include_headers=True)["headers"]
               .to_pylist() if not h)
    assert df.where("headers IS NULL").count() == none > 0
    assert df.where("size(headers) = 0").count() == 0


@pytest.mark.parametrize("option,value,needle", [
    ("onCorruption", "ignore", "fail, skip"),
    ("failOnDataLos", "false", "unknown option"),  # failOnDataLoss is ignored, a typo is not
    ("kafka.isolation.level", "none", "read_uncommitted, read_committed"),
    # Spark lower-cases the name before the source sees it; the closest valid one is named
    ("startingOffset", '{"t_lz4": {"0": 5}}', "'startingoffset' \\(did you mean 'startingOffsets'"),
    ("startingOffsets", '{"t_lz4": {"0": 5}}', "startingOffsets leaves out t_gzip-0"),
])
def test_bad_options_fail_at_load(spark, log_dir, option, value, needle):
    with pytest.raises(Exception, match=needle):
        load(spark, log_dir, **{option: value}).count()


def test_auto_registered_without_register(log_dir):
    """A fresh interpreter and session that never call register(): PySpark finds the
    ``pyspark_kafkalog`` package and its ``DefaultSource``."""
    script = textwrap.dedent(f"""
        import sys
        from pyspark.sql import SparkSession
        from kafkalog_spark.spark import LOCAL_CONF, REQUIRED_CONF
        b = SparkSession.builder.master("local[1]").appName("autoreg")
        for k, v in {{**REQUIRED_CONF, **LOCAL_CONF}}.items():
            b = b.config(k, v)
        spark = b.getOrCreate()
        print("COUNT", spark.read.format("kafkalog").load({str(log_dir)!r}).count())
        spark.stop()
    """)
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=300, env=env)
    assert "COUNT 3000" in out.stdout, out.stderr[-3000:]
