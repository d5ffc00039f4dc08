"""Object storage through Spark's own file systems (issue 31.3): with ``hadoop-aws`` of
pyspark's bundled Hadoop (3.5.0, from Maven with its AWS SDK bundle: ``tests/spark_jars.py``)
and the S3A settings a Spark user writes (``spark.hadoop.fs.s3a.*``), on a real S3 server
(SeaweedFS, ``tests/s3.py``): ``format("kafkalog")`` reads and writes ``s3a://`` paths, Delta
tables written by delta-spark land on the server, and Spark's S3A, the package's pyarrow.fs
path and delta-rs agree on what is in the bucket, under both spellings ``s3://`` and ``s3a://``.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import DeltaTable

import kafkalog_spark as kl
from kafkalog_spark.delta import migrate

from oracle import maven_jars
from s3 import ACCESS_KEY, SECRET_KEY, SeaweedS3
from spark_jars import DELTA_CONF, JarSpark, spark_jars
from test_datasource_read import as_source
from test_delta_migrate import COLUMNS, log_rows, records
from test_object_storage_read import store_options, upload

pytestmark = [pytest.mark.spark, pytest.mark.slow]

BUCKET = "kafkalog-s3a"
SORT = [("topic", "ascending"), ("partition", "ascending"), ("offset", "ascending")]
# the Kafka source's columns (what a plain format("kafkalog") read with headers has)
KAFKA_COLUMNS = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType",
                 "headers"]


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    with SeaweedS3(tmp_path_factory.mktemp("s3a-server")) as server:
        server.make_bucket(BUCKET)
        yield server


def s3a_conf(s3: SeaweedS3) -> dict[str, str]:
    """The settings a Spark user writes for an S3-compatible store."""
    return {"spark.hadoop.fs.s3a.endpoint": s3.endpoint,
            "spark.hadoop.fs.s3a.path.style.access": "true",
            "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
            "spark.hadoop.fs.s3a.endpoint.region": "us-east-1",
            "spark.hadoop.fs.s3a.access.key": ACCESS_KEY,
            "spark.hadoop.fs.s3a.secret.key": SECRET_KEY}


@pytest.fixture(scope="module")
def s3a_spark(s3):
    try:
        jars = spark_jars("delta", "hadoop-aws")
    except maven_jars.MavenUnavailable as e:
        pytest.fail(f"{e} (hadoop-aws and delta-spark come from Maven)")
    js = JarSpark(jars, conf={**DELTA_CONF, **s3a_conf(s3)})
    yield js
    js.close()


@pytest.fixture(scope="module")
def logs(tmp_path_factory, s3) -> tuple:
    """A local log dir (two topics) and its upload: ``(path, "bucket/prefix")``."""
    root = tmp_path_factory.mktemp("s3a-logs") / "logs"
    kl.write_log(records(400, partitions=2), root, segment_bytes=8 * 1024, max_batch_records=25)
    kl.write_log(records(60, topic="users", partitions=1), root, codec="lz4")
    upload(s3, root, f"{BUCKET}/logs")
    return root, f"{BUCKET}/logs"


# --- run in the jar session's process ----------------------------------------------------------


def _kafkalog_rows(spark, path: str) -> pa.Table:
    """``format("kafkalog")`` with headers and metadata, no store options on the read: the
    session's ``spark.hadoop.fs.s3a.*`` settings are all it has."""
    return (spark.read.format("kafkalog").option("includeHeaders", "true")
            .option("includeMetadata", "true").load(path).toArrow().sort_by(SORT))


def _kafkalog_copy(spark, src: str, dest: str) -> None:
    (spark.read.format("kafkalog").option("includeHeaders", "true").load(src)
     .write.format("kafkalog").mode("append").save(dest))


def _parquet_write(spark, src: str, dest: str) -> None:
    spark.read.format("kafkalog").load(src).write.mode("overwrite").parquet(dest)


def _delta_write(spark, src: str, dest: str) -> None:
    (spark.read.format("kafkalog").option("includeHeaders", "true").option("subscribe", "orders")
     .load(src).write.format("delta").mode("overwrite").save(dest))


def _delta_rows(spark, path: str, columns=COLUMNS) -> list[dict]:
    t = spark.read.format("delta").load(path).toArrow()
    t = t.select([c for c in columns if c in t.schema.names])
    return sorted(t.to_pylist(), key=lambda r: (r["topic"], r["partition"], r["offset"]))


def _migrate(spark, src: str, dest: str, **kw) -> dict:
    return migrate(src, dest, spark=spark, **kw)


def _migrate_with_session_options(spark, src: str, dest: str, **kw) -> dict:
    """As ``jobs/migrate_delta.py`` does: the session's S3A settings as store options."""
    from kafkalog_spark.spark import session_storage_options

    return migrate(src, dest, spark=spark, storage_options=session_storage_options(spark), **kw)


# --- helpers -----------------------------------------------------------------------------------


def arrow_rows(table: pa.Table) -> list[dict]:
    return table.sort_by(SORT).to_pylist()


def delta_rs_rows(uri: str, s3: SeaweedS3, columns=COLUMNS) -> list[dict]:
    """The table as delta-rs reads it through its own object store (``s3://``)."""
    opts = {"AWS_ENDPOINT_URL": s3.endpoint, "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_REGION": "us-east-1",
            "AWS_ALLOW_HTTP": "true", "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false"}
    t = DeltaTable(uri, storage_options=opts).to_pyarrow_table()
    t = t.select([c for c in columns if c in t.schema.names])
    return sorted(t.to_pylist(), key=lambda r: (r["topic"], r["partition"], r["offset"]))


# --- format("kafkalog") on s3a:// -------------------------------------------------------------


def test_kafkalog_reads_s3a_and_s3_spellings_alike(s3a_spark, logs):
    """``s3a://`` and ``s3://`` name the same objects; the rows are the local copy's."""
    local, prefix = logs
    want = kl.read_log(local, include_headers=True, include_metadata=True).sort_by(SORT)
    for scheme in ("s3a", "s3"):
        got = s3a_spark.run(_kafkalog_rows, f"{scheme}://{prefix}")
        assert arrow_rows(got) == arrow_rows(as_source(want.select(got.schema.names),
                                                       got.schema)), scheme


def test_kafkalog_writes_s3a_and_pyarrow_reads_it_back(s3a_spark, s3, logs):
    _, prefix = logs
    s3a_spark.run(_kafkalog_copy, f"s3a://{prefix}", f"s3a://{BUCKET}/copy")
    opts = store_options(s3)
    copy = kl.read_log(f"s3://{BUCKET}/copy", include_headers=True, storage_options=opts)
    source = kl.read_log(f"s3://{prefix}", include_headers=True, storage_options=opts)
    cols = ["topic", "partition", "offset", "key", "value", "timestamp", "headers"]
    assert arrow_rows(copy.select(cols)) == arrow_rows(source.select(cols))


def test_spark_parquet_on_s3a_is_what_pyarrow_sees_on_s3(s3a_spark, s3, logs):
    """Spark's S3A file system and pyarrow.fs (the package's path) agree on the bucket."""
    import pyarrow.dataset as ds

    local, prefix = logs
    s3a_spark.run(_parquet_write, f"s3a://{prefix}", f"s3a://{BUCKET}/parquet")
    seen = ds.dataset(f"{BUCKET}/parquet", format="parquet", filesystem=s3.filesystem())
    got = seen.to_table()
    want = kl.read_log(local).select(got.schema.names)
    assert arrow_rows(got.cast(want.schema)) == arrow_rows(want)


# --- Delta on s3a:// --------------------------------------------------------------------------


def test_delta_spark_table_on_s3a_reads_back_in_delta_rs(s3a_spark, s3, logs):
    local, prefix = logs
    s3a_spark.run(_delta_write, f"s3a://{prefix}", f"s3a://{BUCKET}/delta-plain")
    # the rows format("kafkalog") gave: headers null where a record has none
    want = [{**r, "headers": r["headers"] or None}
            for r in log_rows(local, KAFKA_COLUMNS, topics=["orders"])]
    assert s3a_spark.run(_delta_rows, f"s3a://{BUCKET}/delta-plain") == want
    assert delta_rs_rows(f"s3://{BUCKET}/delta-plain", s3) == want


def test_migrate_delta_rs_writer_to_s3a_reads_back_in_delta_spark(s3a_spark, s3, logs):
    local, prefix = logs
    dest = f"s3a://{BUCKET}/lake-rs"
    m = s3a_spark.run(_migrate_with_session_options, f"s3a://{prefix}", dest,
                      writer="delta-rs")
    assert (m["writer"], m["records"]) == ("delta-rs", 460)
    for topic in ("orders", "users"):
        want = log_rows(local, topics=[topic])
        assert s3a_spark.run(_delta_rows, f"{dest}/{topic}") == want
        assert delta_rs_rows(f"s3://{BUCKET}/lake-rs/{topic}", s3) == want


def test_migrate_delta_spark_writer_to_s3a(s3a_spark, s3, logs):
    local, prefix = logs
    dest = f"s3a://{BUCKET}/lake-spark"
    m = s3a_spark.run(_migrate_with_session_options, f"s3a://{prefix}", dest,
                      writer="delta-spark", topics=["orders"])
    assert m["writer"] == "delta-spark"
    want = log_rows(local, topics=["orders"])
    assert s3a_spark.run(_delta_rows, f"{dest}/orders") == want
    assert delta_rs_rows(f"s3://{BUCKET}/lake-spark/orders", s3) == want


def test_migrate_delta_spark_writer_takes_the_s3_spelling(s3a_spark, s3, logs):
    local, prefix = logs
    m = s3a_spark.run(_migrate_with_session_options, f"s3://{prefix}",
                      f"s3://{BUCKET}/lake-s3", writer="delta-spark", topics=["users"])
    assert m["writer"] == "delta-spark"
    assert delta_rs_rows(f"s3://{BUCKET}/lake-s3/users", s3) == log_rows(local,
                                                                         topics=["users"])


def test_migrate_takes_the_sessions_s3a_settings(s3a_spark, s3, logs):
    local, prefix = logs
    m = s3a_spark.run(_migrate, f"s3a://{prefix}", f"s3a://{BUCKET}/lake-session",
                      writer="delta-rs", topics=["users"])
    assert m["records"] == 60
    assert delta_rs_rows(f"s3://{BUCKET}/lake-session/users", s3) == log_rows(
        local, topics=["users"])
