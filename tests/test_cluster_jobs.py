"""Every job, submitted for real (issue 14, point 3): ``jobs/compact.py``, ``jobs/retain.py``,
``jobs/recover.py``, ``jobs/migrate_delta.py`` and ``spark.read`` / ``df.write.format("kafkalog")``
scripts go through the installed pyspark's ``spark-submit`` to the standalone cluster (executors
in JVMs and Python processes of their own); each result is compared with the local engine's
(the library, no Spark):

* log dirs byte for byte: every file of every partition dir and the log dir's checkpoint files
  (only ``.lock`` is left out: an empty file the lock holder creates, not data);
* Delta tables and reads row for row (Delta tables read back with ``deltalake``).

Each job runs on its own copy of one input built with ``write_log``; one spark-submit per job
(the read and the write share one script). On a local master the same code runs in the
in-session tests (``test_spark_*``; ``jobs/recover.py``'s ``main`` in ``test_spark_verify``) and
through ``spark-submit --master local[2]`` in ``test_readme_submit`` (``jobs/compact.py``) and
``test_delta_spark`` (``jobs/migrate_delta.py``); a local[2] submit of every job here as well
cost CI over a minute and compared nothing those do not.
"""

from __future__ import annotations

import json
import shutil
import textwrap
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cluster import REPO, spark_submit

import kafkalog_spark as kl
from kafkalog_spark.codec.records.schema import HEADERS_TYPE
from kafkalog_spark.codec.files import naming as N
from kafkalog_spark.log.staging import STAGING_INFIX
from test_datasource_read import as_source
from test_recover import crashed

pytestmark = [pytest.mark.spark, pytest.mark.cluster]

JOBS = REPO / "jobs"
T0 = 1_600_000_000_000  # ms: old records (2020)
HOUR = 3_600_000
TOPIC_ID = "AAECAwQFBgcICQoLDA0ODw"  # base64url of 16 fixed bytes: partition.metadata stays equal


# --- inputs ------------------------------------------------------------------------------------


def records(n: int, *, topic: str, partitions: int, keys: int | None = None,
            tombstone_every: int = 0, value_size: int = 120, start: int = 0) -> pa.Table:
    """``n`` records of ``topic`` round-robin over ``partitions``; ``keys`` distinct keys (a
    duplicate every ``keys`` records: what compaction removes), one record per minute from T0."""
    idx = range(start, start + n)
    return pa.table({
        "topic": [topic] * n,
        "partition": pa.array([i % partitions for i in idx], pa.int32()),
        "key": pa.array([(f"k{i % keys}" if keys else f"k{i}").encode() for i in idx]),
        "value": pa.array([None if tombstone_every and i % tombstone_every == 0
                           else (b"%08d" % i) * (value_size // 8) for i in idx]),
        "timestamp": pa.array([(T0 + i * 60_000) * 1000 for i in idx], pa.timestamp("us", tz="UTC")),
        "headers": pa.array([[{"key": "h", "value": str(i).encode()}] if i % 3 else [] for i in idx],
                            HEADERS_TYPE),
    })


def copies(src: Path, root: Path, names=("cluster", "engine")) -> dict[str, Path]:
    """A copy of log dir ``src`` per run, each alone in its own folder (so staging folders and
    quarantines next to it are its own)."""
    out = {}
    for name in names:
        out[name] = root / name / src.name
        shutil.copytree(src, out[name])
    return out


def tree(log_dir: Path) -> dict[str, bytes]:
    """Every file under a log dir by relative path, ``.lock`` left out."""
    return {str(p.relative_to(log_dir)): p.read_bytes() for p in sorted(log_dir.rglob("*"))
            if p.is_file() and p.name != N.LOCK_FILE}


def assert_same_tree(got: Path, expected: Path, what: str) -> None:
    a, b = tree(got), tree(expected)
    assert sorted(a) == sorted(b), f"{what}: file lists differ: only in {got}: " \
        f"{sorted(set(a) - set(b))}, only in {expected}: {sorted(set(b) - set(a))}"
    differ = [name for name in a if a[name] != b[name]]
    assert not differ, f"{what}: files differ in bytes: {differ}"


def assert_no_leftovers(log_dir: Path) -> None:
    assert [p.name for p in log_dir.parent.iterdir() if STAGING_INFIX in p.name] == []
    assert [p.name for p in log_dir.rglob("*")
            if p.suffix in (".cleaned", ".swap", ".deleted")] == []


def job_json(done) -> dict:
    """The JSON document a job printed (spark-submit merges the driver's stderr into stdout,
    so log lines may surround it)."""
    out = done.stdout
    start = out.index("{\n")
    return json.JSONDecoder().raw_decode(out[start:])[0]


def submit(spark_cluster, script: Path, *args, **kw):
    """The job through spark-submit on the cluster; its CompletedProcess."""
    t0 = time.perf_counter()
    done = spark_submit(script, *args, master=spark_cluster.url, **kw)
    print(f"spark-submit {script.name}: {time.perf_counter() - t0:.1f} s")
    return done


def rows_of(table: pa.Table) -> list[dict]:
    return sorted(table.to_pylist(), key=lambda r: (r["topic"], r["partition"], r["offset"]))


# --- compaction --------------------------------------------------------------------------------


def test_compact_job_on_the_cluster_equals_the_engine(spark_cluster, tmp_path):
    src = tmp_path / "input" / "logs"
    # two topics, 3 + 2 partitions, 40 keys: many duplicates and tombstones, ~25 segments
    kl.write_log(records(4000, topic="orders", partitions=3, keys=40, tombstone_every=13),
                 src, segment_bytes=48 * 1024, max_batch_records=20, codec="lz4")
    kl.write_log(records(1500, topic="users", partitions=2, keys=25, tombstone_every=7),
                 src, segment_bytes=24 * 1024, max_batch_records=10)
    dirs = copies(src, tmp_path)
    now = T0 + 1000 * HOUR
    config = ["cleanup.policy=compact", "delete.retention.ms=3600000", "segment.bytes=65536"]
    done = submit(spark_cluster, JOBS / "compact.py", "--execute", "--force", "--now", str(now),
                  "--json", *(a for c in config for a in ("--config", c)), dirs["cluster"])
    from kafkalog_spark.compaction.compact import compact
    from kafkalog_spark.report import parse_config_options

    engine = compact(dirs["engine"], execute=True, force=True, now_ms=now,
                     options=parse_config_options(tuple(config)))
    assert engine.metrics["records_kept"] < 5500 - 1000  # compaction really removed records
    assert_same_tree(dirs["cluster"], dirs["engine"], "compact (cluster vs engine)")
    assert_no_leftovers(dirs["cluster"])
    got = job_json(done)["metrics"]
    for key in ("records_kept", "bytes_written", "batches_copied", "batches_rebuilt"):
        assert got[key] == engine.metrics[key], key
    assert kl.verify(dirs["cluster"], deep=True).ok
    assert tree(dirs["cluster"]) != tree(src)


# --- retention ---------------------------------------------------------------------------------


def test_retain_job_on_the_cluster_equals_the_engine(spark_cluster, tmp_path):
    src = tmp_path / "input" / "logs"
    # uncompressed: ~5 segments per partition (gzip would fit each partition in one)
    kl.write_log(records(3000, topic="events", partitions=3), src, segment_bytes=32 * 1024,
                 max_batch_records=25)
    before = kl.read_log(src).num_rows
    dirs = copies(src, tmp_path)
    now = T0 + 3000 * 60_000 + 10 * HOUR  # records span 50 h; keep the last 30 h
    config = [f"retention.ms={40 * HOUR}"]
    done = submit(spark_cluster, JOBS / "retain.py", "--execute", "--now", str(now), "--json",
                  *(a for c in config for a in ("--config", c)), dirs["cluster"])
    from kafkalog_spark.report import parse_config_options
    from kafkalog_spark.retention.retain import retain

    engine = retain(dirs["engine"], execute=True, now_ms=now,
                    options=parse_config_options(tuple(config)))
    deleted = engine.metrics["segments_deleted"]
    assert deleted >= 3  # segments really went, in every partition (next line)
    assert all(p.deletions for p in engine.plans)
    assert 0 < kl.read_log(dirs["engine"]).num_rows < before
    assert_same_tree(dirs["cluster"], dirs["engine"], "retain (cluster vs engine)")
    assert_no_leftovers(dirs["cluster"])
    assert job_json(done)["metrics"]["segments_deleted"] == deleted
    assert kl.verify(dirs["cluster"], deep=True).ok


# --- recovery ----------------------------------------------------------------------------------


def quarantine_of(log_dir: Path) -> list[tuple]:
    """What the run moved to the quarantine: (kind, file name, start, sha256, bytes)."""
    from kafkalog_spark.recovery.quarantine import read_manifests

    root = log_dir.with_name(log_dir.name + ".kafkalog-quarantine")
    out = []
    for doc in read_manifests(root):
        for e in doc["entries"]:
            out.append((e["kind"], Path(e["file"]).name, e.get("start"), e["sha256"],
                        (Path(doc["run"]) / e["stored"]).read_bytes()))
    return sorted(out)


def test_recover_job_on_the_cluster_equals_the_engine(spark_cluster, tmp_path):
    src = tmp_path / "input" / "logs"
    kl.write_log(records(3000, topic="orders", partitions=3), src, segment_bytes=40 * 1024,
                 max_batch_records=30)
    # damage: partition 0's active segment loses its last 25 bytes (a torn write), partition
    # 1's gets junk appended, partition 2's second segment has a flipped payload bit (so it and
    # every later segment are cut), and partition 0's first offset index is gone
    segs = {p: sorted((src / f"orders-{p}").glob("*.log")) for p in range(3)}
    assert all(len(s) >= 3 for s in segs.values())
    data = segs[0][-1].read_bytes()
    segs[0][-1].write_bytes(data[:-25])
    with open(segs[1][-1], "ab") as f:
        f.write(b"\x07not a batch at all, just junk")
    data = bytearray(segs[2][1].read_bytes())
    data[300] ^= 0x04
    segs[2][1].write_bytes(bytes(data))
    segs[0][0].with_suffix(".index").unlink()
    crashed(src)  # nothing flushed: a broker's load checks every segment
    assert not kl.verify(src).ok
    dirs = copies(src, tmp_path)
    done = submit(spark_cluster, JOBS / "recover.py", "--execute", "--json", dirs["cluster"])
    from kafkalog_spark.recovery.recover import recover

    engine = recover(dirs["engine"], execute_plan=True)
    assert engine.changed
    assert kl.verify(dirs["engine"], deep=True).ok
    report = job_json(done)
    assert not report["before"]["ok"] and report["after"]["ok"]
    assert_same_tree(dirs["cluster"], dirs["engine"], "recover (cluster vs engine)")
    assert quarantine_of(dirs["cluster"]) == quarantine_of(dirs["engine"])
    assert len(quarantine_of(dirs["engine"])) >= 3
    assert 0 < kl.read_log(dirs["engine"]).num_rows < 3000


# --- migration to Delta ------------------------------------------------------------------------


def delta_tables(dest: Path) -> dict[str, list[dict]]:
    from deltalake import DeltaTable

    return {t.name: rows_of(DeltaTable(str(t)).to_pyarrow_table())
            for t in sorted(dest.iterdir()) if t.is_dir()}


def test_migrate_job_on_the_cluster_equals_the_engine(spark_cluster, tmp_path):
    src = tmp_path / "input" / "logs"
    kl.write_log(records(3000, topic="orders", partitions=3), src, segment_bytes=32 * 1024,
                 max_batch_records=25, codec="snappy")
    kl.write_log(records(800, topic="users", partitions=2, keys=50), src,
                 segment_bytes=16 * 1024, max_batch_records=10)
    dest = {name: tmp_path / name / "delta" for name in ("cluster", "engine")}
    done = submit(spark_cluster, JOBS / "migrate_delta.py", "--partition-by", "partition", src,
                  dest["cluster"])
    from kafkalog_spark.delta import migrate

    engine = migrate(src, dest["engine"], partition_by=["partition"])
    assert engine["records"] == 3800
    expected = delta_tables(dest["engine"])
    assert sorted(expected) == ["orders", "users"]
    got = job_json(done)
    assert (got["engine"], got["records"]) == ("spark", 3800)
    tables = delta_tables(dest["cluster"])
    assert sorted(tables) == sorted(expected)
    for topic in expected:
        assert len(tables[topic]) == len(expected[topic]), topic
        assert tables[topic] == expected[topic], topic
    log = rows_of(kl.read_log(src, topics=["orders"]))
    assert [(r["partition"], r["offset"], r["key"], r["value"]) for r in expected["orders"]] == \
        [(r["partition"], r["offset"], r["key"], r["value"]) for r in log]


# --- the data source ---------------------------------------------------------------------------

# one application per mode does both: spark.read.format("kafkalog") of READ_SRC (the whole log
# and a filtered query) into Parquet files on the driver, then df.write.format("kafkalog")
# .mode("append") of a Parquet folder into a copy of WRITE_BASE
DATASOURCE_SCRIPT = textwrap.dedent("""
    import sys
    import pyarrow.parquet as pq
    from kafkalog_spark.spark import session

    read_src, out, write_src, dst, topic_id = sys.argv[1:6]
    spark = session(app_name="kafkalog-datasource")
    df = (spark.read.format("kafkalog").option("includeHeaders", "true")
          .option("includeMetadata", "true").load(read_src))
    print("READ_PARTITIONS", df.rdd.getNumPartitions())
    pq.write_table(df.toArrow(), out + "/all.parquet")
    some = df.where("topic = 'orders' and partition = 1 and offset >= 100 and offset < 700")
    pq.write_table(some.toArrow(), out + "/filtered.parquet")

    df = spark.read.parquet(write_src)
    print("WRITE_PARTITIONS", df.rdd.getNumPartitions())
    (df.write.format("kafkalog").mode("append").option("topic", "orders")
       .option("topicId", topic_id).option("compression", "zstd")
       .option("segment.bytes", "16384").option("batch.records", "20").save(dst))
    spark.stop()
""")


def printed(done, label: str) -> int:
    return int(done.stdout.split(label + " ")[1].split()[0])


@pytest.fixture(scope="module")
def datasource_runs(spark_cluster, tmp_path_factory):
    """Builds the inputs, runs DATASOURCE_SCRIPT on the cluster (one submit); gives the paths
    and the CompletedProcess."""
    root = tmp_path_factory.mktemp("datasource")
    read_src = root / "read" / "logs"
    kl.write_log(records(3000, topic="orders", partitions=3), read_src, segment_bytes=32 * 1024,
                 max_batch_records=25, codec="gzip")
    kl.write_log(records(600, topic="users", partitions=2, keys=50), read_src,
                 segment_bytes=8 * 1024, max_batch_records=10)
    # the write target already holds topic "orders" partitions 0-2; the write appends to them
    # and creates partition 3 (its partition.metadata gets the topicId option, not a random id)
    base = root / "write" / "logs"
    kl.write_log(records(300, topic="orders", partitions=3), base, segment_bytes=16 * 1024,
                 max_batch_records=20, codec="zstd", topic_ids={"orders": TOPIC_ID})
    new = records(4000, topic="orders", partitions=4, start=300).drop_columns(["topic"])
    # one Parquet file per Kafka partition: Spark packs whole small files into its tasks (never
    # splits one), so each partition's rows come from one task in file order, as write_log
    # takes them (rows of one partition from two tasks would give a segment boundary between)
    parquet = root / "write" / "new"
    parquet.mkdir()
    for p in range(4):
        pq.write_table(new.filter(pa.compute.equal(new["partition"], p)),
                       parquet / f"part-{p}.parquet")
    dirs = copies(base, root / "write")
    out = root / "read" / "cluster"
    out.mkdir()
    script = root / "datasource.py"
    script.write_text(DATASOURCE_SCRIPT)
    done = submit(spark_cluster, script, read_src, out, parquet, dirs["cluster"], TOPIC_ID)
    return {"read_src": read_src, "out": out, "parquet": parquet, "dirs": dirs, "done": done}


def test_read_on_the_cluster_equals_read_log(datasource_runs):
    src, out, done = (datasource_runs[k] for k in ("read_src", "out", "done"))
    assert printed(done, "READ_PARTITIONS") >= 2  # the read is really spread over executors
    full = kl.read_log(src, include_headers=True, include_metadata=True)
    # as the source gives Spark: a record without headers has headers null (read_log: [])
    expected = rows_of(as_source(full, full.schema))
    filtered = rows_of(as_source(kl.read_log(src, topics=["orders"], partitions=[1],
                                             start_offset=100, end_offset=700,
                                             include_headers=True, include_metadata=True),
                                 full.schema))
    assert len(expected) == 3600 and len(filtered) == 600
    got = pq.read_table(out / "all.parquet")
    assert sorted(got.schema.names) == sorted(full.schema.names)
    assert rows_of(got.select(full.schema.names)) == expected
    some = pq.read_table(out / "filtered.parquet").select(full.schema.names)
    assert rows_of(some) == filtered


def test_write_on_the_cluster_equals_write_log(datasource_runs):
    parquet, dirs, done = (datasource_runs[k] for k in ("parquet", "dirs", "done"))
    assert printed(done, "WRITE_PARTITIONS") >= 2
    ordered = pa.concat_tables(pq.read_table(parquet / f"part-{p}.parquet") for p in range(4))
    kl.write_log(ordered, dirs["engine"], topic="orders", codec="zstd", segment_bytes=16384,
                 max_batch_records=20, topic_ids={"orders": TOPIC_ID})
    assert TOPIC_ID in (dirs["engine"] / "orders-3" / N.PARTITION_METADATA).read_text()
    assert_same_tree(dirs["cluster"], dirs["engine"], "write (cluster vs write_log)")
    assert_no_leftovers(dirs["cluster"])
    got = kl.read_log(dirs["cluster"])
    assert got.num_rows == 4300
    assert kl.verify(dirs["cluster"], deep=True).ok


# --- reconcile ---------------------------------------------------------------------------------


def test_reconcile_job_on_the_cluster_equals_the_library(spark_cluster, tmp_path):
    """One Spark task per partition on the cluster's executors (issue 19): the log dir they
    write is the library's, byte for byte (one submit: the local[2] path is test_reconcile's)."""
    from test_reconcile import three_brokers

    from kafkalog_spark.recovery.reconcile import reconcile

    brokers = three_brokers(tmp_path / "src")
    reconcile(brokers, tmp_path / "engine", execute_plan=True)
    done = spark_submit(JOBS / "reconcile.py", *map(str, brokers), "--dest",
                        str(tmp_path / "cluster"), "--execute", "--json", master=spark_cluster.url)
    report = job_json(done)
    assert report["verified"] and report["reconcile"]["executed"]
    assert_same_tree(tmp_path / "cluster", tmp_path / "engine", "reconcile (cluster vs engine)")


# --- erase -------------------------------------------------------------------------------------


def test_erase_job_on_the_cluster_equals_the_library(spark_cluster, tmp_path):
    """One Spark task per segment on the cluster's executors (issue 20): the log dir after
    ``jobs/erase.py --where`` is the local engine's, byte for byte, and the audit is the same."""
    from test_erase import WHERE
    from test_restore import records as restore_records

    from kafkalog_spark.compaction.erase import erase

    for partition in (0, 1):
        kl.write_log(restore_records(1500, 1500 * partition), tmp_path / "engine", topic="t",
                     partition=partition, codec="lz4", max_batch_records=40,
                     segment_bytes=20_000)
    shutil.copytree(tmp_path / "engine", tmp_path / "cluster")
    want = erase(tmp_path / "engine", "t", where=WHERE, execute_plan=True)
    done = spark_submit(JOBS / "erase.py", str(tmp_path / "cluster"), "--topic", "t",
                        "--where", WHERE, "--execute", "--json", master=spark_cluster.url)
    report = job_json(done)
    assert {k: v for k, v in report.items() if k != "tables"} == want
    assert want["records_removed"] > 0
    assert_same_tree(tmp_path / "cluster", tmp_path / "engine", "erase (cluster vs engine)")
    assert_no_leftovers(tmp_path / "cluster")
