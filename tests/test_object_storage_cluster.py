"""Object storage where Spark really runs (issue 16): jobs submitted with the real
``spark-submit`` to the standalone cluster (executors in their own JVMs and Python processes)
read a log dir in place from a real S3 server and migrate it into a Delta table on S3, given
nothing but the session's ``spark.hadoop.fs.s3a.*`` settings — the way Spark users configure
S3 already."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from s3 import ACCESS_KEY, SECRET_KEY, SeaweedS3

import kafkalog_spark as kl
from cluster import spark_submit

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[1]

READ = textwrap.dedent("""
    import json, sys
    from pyspark.sql import functions as F
    from kafkalog_spark.spark import session
    spark = session()
    df = spark.read.format("kafkalog").option("maxBytesPerPartition", str(64 << 10)).load(sys.argv[1])
    row = df.agg(F.count("*").alias("rows"), F.sum("offset").alias("offsets"),
                 F.sum(F.length("value")).alias("bytes")).first()
    print("READ " + json.dumps({"rows": row.rows, "offsets": row.offsets, "bytes": row.bytes,
                                "tasks": df.rdd.getNumPartitions()}))
    spark.stop()
""")


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    with SeaweedS3(tmp_path_factory.mktemp("seaweed-cluster")) as server:
        server.make_bucket("cluster")
        yield server


def s3a(s3) -> dict[str, str]:
    host = s3.endpoint[len("http://"):]
    return {"spark.hadoop.fs.s3a.endpoint": host,
            "spark.hadoop.fs.s3a.access.key": ACCESS_KEY,
            "spark.hadoop.fs.s3a.secret.key": SECRET_KEY,
            "spark.hadoop.fs.s3a.path.style.access": "true",
            "spark.hadoop.fs.s3a.connection.ssl.enabled": "false"}


@pytest.fixture(scope="module")
def logs(s3, tmp_path_factory) -> tuple[Path, str]:
    local = tmp_path_factory.mktemp("cluster-logs") / "logs"
    kl.write_log(pa.table({"value": [b"v%d" % i for i in range(4000)],
                           "key": [b"k%d" % (i % 97) for i in range(4000)],
                           "partition": [i % 3 for i in range(4000)]}),
                 local, topic="t", codec="lz4", segment_bytes=16 << 10, max_batch_records=50)
    fs = s3.filesystem()
    for p in sorted(local.rglob("*")):
        if p.is_file():
            with fs.open_output_stream(f"cluster/logs/{p.relative_to(local)}") as f:
                f.write(p.read_bytes())
    return local, "s3://cluster/logs"


def test_cluster_reads_s3_with_the_sessions_s3a_settings(spark_cluster, s3, logs, tmp_path):
    local, uri = logs
    script = tmp_path / "read.py"
    script.write_text(READ)
    done = spark_submit(script, uri, master=spark_cluster.url, conf=s3a(s3))
    got = json.loads([x for x in done.stdout.splitlines() if x.startswith("READ ")][-1][5:])
    expected = kl.read_log(local)
    assert got["rows"] == expected.num_rows == 4000
    assert got["offsets"] == sum(expected["offset"].to_pylist())
    assert got["bytes"] == sum(len(v) for v in expected["value"].to_pylist())
    assert got["tasks"] > 1  # the splits ran as several tasks on the executors
    assert SECRET_KEY not in done.stdout + done.stderr


def test_cluster_migrates_s3_logs_into_an_s3_delta_table(spark_cluster, s3, logs):
    local, uri = logs
    done = spark_submit(REPO / "jobs" / "migrate_delta.py", uri, "s3://cluster/lake",
                        master=spark_cluster.url, conf=s3a(s3))
    metrics = json.loads(done.stdout[done.stdout.index("{"):])
    assert metrics["engine"] == "spark" and metrics["records"] == 4000
    table = DeltaTable("s3://cluster/lake/t", storage_options={
        "AWS_ENDPOINT_URL": s3.endpoint, "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_ALLOW_HTTP": "true",
        "AWS_REGION": "us-east-1"}).to_pyarrow_table()
    key = lambda r: (r["partition"], r["offset"])  # noqa: E731
    want = kl.read_log(local).select(["partition", "offset", "key", "value"]).to_pylist()
    got = table.select(["partition", "offset", "key", "value"]).to_pylist()
    assert sorted(got, key=key) == sorted(want, key=key)
    again = spark_submit(REPO / "jobs" / "migrate_delta.py", uri, "s3://cluster/lake",
                         master=spark_cluster.url, conf=s3a(s3))
    assert json.loads(again.stdout[again.stdout.index("{"):])["records"] == 0
    assert SECRET_KEY not in done.stdout + done.stderr
