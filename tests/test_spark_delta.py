"""Delta migration with the Spark engine: Spark tasks write the Parquet, delta-rs commits;
the result equals the local engine's and read_log's, incrementally and after a killed run."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

import kafkalog_spark as kl
from kafkalog_spark.delta import migrate
from kafkalog_spark.delta.spark_job import delta_jars_available

from test_delta_migrate import delta_rows, log_rows, parquet_on_disk, records, table_files
from test_verify import REAL_LOG_DIRS

pytestmark = pytest.mark.spark


@pytest.fixture()
def logs(tmp_path: Path) -> Path:
    kl.write_log(records(300), tmp_path / "logs", max_batch_records=25)
    return tmp_path / "logs"


def test_no_delta_jars_here_so_delta_rs_commits(spark):
    assert delta_jars_available(spark) is False


def test_spark_engine_equals_read_log_and_continues_incrementally(spark, logs, tmp_path):
    dest = tmp_path / "delta"
    m = migrate(logs, dest, spark=spark, partition_by=["partition"])
    assert (m["engine"], m["writer"], m["records"], m["commits"]) == ("spark", "delta-rs", 300, 1)
    assert delta_rows(dest / "orders") == log_rows(logs)
    assert parquet_on_disk(dest / "orders") == table_files(dest / "orders")
    # Spark's Parquet: microsecond UTC timestamps (not INT96), partition columns left out
    some = next((dest / "orders").rglob("*.parquet"))
    arrow = pq.read_schema(some)
    assert arrow.field("timestamp").type == pa.timestamp("us", tz="UTC")
    assert "partition" not in arrow.names
    assert migrate(logs, dest, spark=spark, partition_by=["partition"])["commits"] == 0
    kl.write_log(records(40, start=300), logs)

    def die(name, path):
        if name == "before-commit":
            raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        migrate(logs, dest, spark=spark, partition_by=["partition"], step=die)
    assert len(delta_rows(dest / "orders")) == 300
    again = migrate(logs, dest, spark=spark, partition_by=["partition"])
    assert again["records"] == 40 and again["cleaned"]
    assert delta_rows(dest / "orders") == log_rows(logs)
    assert parquet_on_disk(dest / "orders") == table_files(dest / "orders")


def test_spark_and_local_engines_write_the_same_rows(spark, shared_fixtures, tmp_path):
    src = shared_fixtures / REAL_LOG_DIRS[1]
    parts = ["topic", "date"]
    migrate(src, tmp_path / "spark", spark=spark, layout="single", partition_by=parts)
    migrate(src, tmp_path / "local", layout="single", partition_by=parts)
    a = DeltaTable(str(tmp_path / "spark")).to_pyarrow_table()
    b = DeltaTable(str(tmp_path / "local")).to_pyarrow_table()
    key = lambda r: (r["topic"], r["partition"], r["offset"])  # noqa: E731
    assert sorted(a.to_pylist(), key=key) == sorted(b.select(a.schema.names).to_pylist(), key=key)
    assert delta_rows(tmp_path / "spark") == log_rows(src)
    spark_parts = DeltaTable(str(tmp_path / "spark")).get_add_actions(flatten=True)
    local_parts = DeltaTable(str(tmp_path / "local")).get_add_actions(flatten=True)
    assert ({(t, str(d)) for t, d in zip(spark_parts["partition.topic"].to_pylist(),
                                         spark_parts["partition.date"].to_pylist())}
            == {(t, str(d)) for t, d in zip(local_parts["partition.topic"].to_pylist(),
                                            local_parts["partition.date"].to_pylist())})


def test_migrated_table_reads_back_in_spark_as_parquet(spark, logs, tmp_path):
    # without the Delta jars Spark reads the committed files directly; same rows
    dest = tmp_path / "delta"
    migrate(logs, dest, spark=spark, include_metadata=False)
    files = [str(dest / "orders" / f) for f in sorted(table_files(dest / "orders"))]
    df = spark.read.parquet(*files)
    assert df.count() == 300
    assert df.schema["timestamp"].dataType.simpleString() == "timestamp"


def test_small_segments_are_packed_into_few_tasks_and_files(spark, tmp_path):
    """Many small segments: the Spark engine packs them into tasks as the ``kafkalog`` reader
    does, so a table gets a few Parquet files, not one per segment, and every record once."""
    from kafkalog_spark.log.discovery import discover

    logs = tmp_path / "logs"
    kl.write_log(records(3000, partitions=4), logs, segment_bytes=2048, max_batch_records=10)
    segments = sum(len(p.segments) for p in discover(logs).all_partition_dirs())
    assert segments >= 60
    dest = tmp_path / "delta"
    m = migrate(logs, dest, spark=spark, layout="single")
    assert m["records"] == 3000
    assert m["files"] <= 16 < segments  # about one task per core (minPartitions), a few files
    assert delta_rows(dest) == log_rows(logs)
    assert parquet_on_disk(dest) == table_files(dest)


def test_tasks_are_packed_by_work_each_segment_weighed_by_its_codec(tmp_path):
    """migrate's tasks hold about equal work, not bytes: a gzip segment's bytes weigh
    LOG_CODEC_COST["gzip"] times an uncompressed one's (its codec: its first batch's, read
    from its header; the partition's last entry's, read with its log end, only stands in for
    segments that are not local), so its tasks hold fewer bytes; packed without weights the
    same splits hold equal bytes."""
    from kafkalog_spark.datasource.plan import pack_splits
    from kafkalog_spark.datasource.splits import split_bytes
    from kafkalog_spark.delta.options import parse_migrate_options
    from kafkalog_spark.delta.plan import SourceListing, plan_table, source_partitions
    from kafkalog_spark.delta.spark_job import LOG_CODEC_COST, FilesTask, TableWrite, plan_tasks

    logs = tmp_path / "logs"
    for topic, codec in (("plain", "none"), ("zipped", "gzip")):
        kl.write_log(records(4000, topic=topic, partitions=1), logs, codec=codec,
                     segment_bytes=16 * 1024, max_batch_records=1)  # one record per batch:
    # the same bytes either way
    opts = parse_migrate_options({})
    tables, listing = source_partitions([str(logs)], opts)
    assert sorted(listing.codecs.values()) == [0, 1]
    jobs = []
    for name, parts in sorted(tables.items()):
        plan = plan_table(tmp_path / "delta" / name, parts, opts, {})
        jobs.append(TableWrite(str(plan.path), "", plan.schema, plan.read_options(opts)))

    def bytes_per_task(tasks, table: int) -> float:
        mine = [sum(split_bytes(s) for i, s in t.items if i == table) for t in tasks]
        mine = [b for b in mine if b]
        return sum(mine) / len(mine)

    by_work = plan_tasks(jobs, 16, listing)
    local = plan_tasks(jobs, 16, SourceListing(listing.found))  # no stand-in codecs
    assert local == by_work  # local segments weigh by their own codecs
    tagged = [item for t in by_work for item in t.items]
    table_of = {id(s): i for i, s in tagged}
    by_bytes = [FilesTask(tuple((table_of[id(s)], s) for s in t.splits)) for t in
                pack_splits([s for _, s in tagged], 1 << 40, min_tasks=16)]
    names = sorted(tables)
    plain, zipped = names.index("plain"), names.index("zipped")
    ratio = bytes_per_task(by_work, plain) / bytes_per_task(by_work, zipped)
    assert ratio == pytest.approx(LOG_CODEC_COST["gzip"], rel=0.25), ratio
    ratio = bytes_per_task(by_bytes, plain) / bytes_per_task(by_bytes, zipped)
    assert ratio == pytest.approx(1.0, rel=0.25), ratio
    # the same splits either way, each once
    def splits(tasks):
        return sorted((str(s.segment.log), s.start_position) for t in tasks for _, s in t.items)

    assert splits(by_work) == splits(by_bytes) and len(set(splits(by_work))) > 16


def test_tables_commit_at_once_and_a_failed_commit_is_raised_then_resumed(spark, tmp_path,
                                                                         monkeypatch):
    """After the Spark job the tables commit in a few threads (each commit waits on its
    store); one table's failed commit is raised, the tables not yet started are not
    committed, and the next run commits every table exactly once."""
    import importlib
    import threading

    M = importlib.import_module("kafkalog_spark.delta.migrate")  # the package's `migrate` is
    # the function

    logs, dest = tmp_path / "logs", tmp_path / "delta"
    topics = [f"t{i}" for i in range(6)]
    for topic in topics:
        kl.write_log(records(60, topic=topic, partitions=1), logs)
    real_commit = M.commit
    threads: set[str] = set()

    def commit(path, *args, **kwargs):
        threads.add(threading.current_thread().name)
        if path.name == "t3" and not threads & {"second run"}:
            raise RuntimeError("the store refused t3's commit")
        return real_commit(path, *args, **kwargs)

    monkeypatch.setattr(M, "commit", commit)
    with pytest.raises(RuntimeError, match="t3"):
        migrate(logs, dest, spark=spark)
    assert len({t for t in threads if t.startswith("kafkalog-commit")}) >= 2, threads
    committed = [t for t in topics if (dest / t / "_delta_log").exists()]
    assert "t3" not in committed
    threads.add("second run")
    again = migrate(logs, dest, spark=spark)
    assert again["records"] == 60 * (len(topics) - len(committed))
    for topic in topics:
        assert delta_rows(dest / topic) == log_rows(logs, topics=[topic])
        assert parquet_on_disk(dest / topic) == table_files(dest / topic)
