"""Delta migration without Spark: the local engine, delta-rs commits, exactly-once re-runs,
killed runs, data loss, schema evolution, internal topics, real broker dirs, the CLI."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from click.testing import CliRunner
from deltalake import DeltaTable

import kafkalog_spark as kl
from kafkalog_spark.cli import cli, main
from kafkalog_spark.codec.files.checkpoints import format_offset_checkpoint
from kafkalog_spark.codec.internal.internal_topics import (decode_consumer_offsets_key,
                                                           decode_consumer_offsets_value)
from kafkalog_spark.delta import (ConcurrentMigrationError, DataLossError, MIGRATE_OPTIONS,
                                  MigrateOptions, migrate, parse_migrate_options)
from kafkalog_spark.delta.commit import STATE_DIR, table_lock
from kafkalog_spark.errors import InvalidOptionError
from kafkalog_spark.log.discovery import discover
from kafkalog_spark.codec.files.naming import LOG_START_OFFSET_CHECKPOINT

from test_datasource_read import write_txn_partition  # the aborted/committed/open partition
from test_verify import REAL_LOG_DIRS

T0 = 1_700_000_000_000  # ms
COLUMNS = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType",
           "headers", "leaderEpoch", "producerId", "sequence", "isTransactional", "isControl",
           "batchBaseOffset", "magic", "compression"]


def records(n: int, start: int = 0, topic: str = "orders", partitions: int = 3) -> pa.Table:
    hdr = pa.list_(pa.field("element", pa.struct([pa.field("key", pa.string(), nullable=False),
                                                  pa.field("value", pa.binary())]),
                            nullable=False))
    return pa.table({
        "topic": [topic] * n,
        "partition": pa.array([(start + i) % partitions for i in range(n)], pa.int32()),
        "key": [None if i % 7 == 0 else f"k{start + i}".encode() for i in range(n)],
        "value": [None if i % 11 == 0 else f"v{start + i}".encode() * (1 + i % 5)
                  for i in range(n)],
        # 3 hours apart: several UTC days
        "timestamp": pa.array([(T0 + (start + i) * 10_800_000) * 1000 for i in range(n)],
                              pa.timestamp("us", tz="UTC")),
        "headers": pa.array([[{"key": "h", "value": str(start + i).encode()}] if i % 3 else []
                             for i in range(n)], hdr),
    })


@pytest.fixture()
def logs(tmp_path: Path) -> Path:
    kl.write_log(records(600), tmp_path / "logs", segment_bytes=8 * 1024, max_batch_records=25)
    kl.write_log(records(90, topic="users", partitions=1), tmp_path / "logs", codec="gzip")
    return tmp_path / "logs"


def delta_rows(path: Path, columns=COLUMNS) -> list[dict]:
    t = DeltaTable(str(path)).to_pyarrow_table()
    t = t.select([c for c in columns if c in t.schema.names])
    return sorted(t.to_pylist(), key=lambda r: (r["topic"], r["partition"], r["offset"]))


def log_rows(paths, columns=COLUMNS, **kw) -> list[dict]:
    t = kl.read_log(paths, include_headers=True, include_metadata=True, **kw)
    return sorted(t.select(columns).to_pylist(),
                  key=lambda r: (r["topic"], r["partition"], r["offset"]))


def table_files(path: Path) -> set[str]:
    dt = DeltaTable(str(path))
    return set(dt.get_add_actions(flatten=True).column("path").to_pylist())


def parquet_on_disk(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*.parquet")
            if STATE_DIR not in p.relative_to(path).parts}


# --- options ---------------------------------------------------------------------------------


def test_option_table_matches_options_object():
    names = {s.name for s in MIGRATE_OPTIONS}
    fields = set(MigrateOptions.__dataclass_fields__) - {"read_committed"} | {"isolation_level"}
    assert names == fields


@pytest.mark.parametrize("kwargs, needle", [
    ({"layout": "nested"}, "per-topic, single"),
    ({"partition_by": "topic,hour"}, "topic, partition, date"),
    ({"isolation_level": "serializable"}, "read_committed"),
    ({"topics": ["a"], "topic_pattern": "a.*"}, "only one of"),
    ({"topic_pattern": "(("}, "not a valid regular expression"),
    ({"bogus": 1}, "valid options"),
    ({"app_id_prefix": "a:b"}, "without ':'"),
])
def test_bad_options_name_the_choices(kwargs, needle):
    with pytest.raises(InvalidOptionError, match=needle):
        parse_migrate_options(kwargs)


def test_default_partitioning_depends_on_layout():
    assert parse_migrate_options().partition_by == ()
    assert parse_migrate_options(layout="single").partition_by == ("topic",)
    assert parse_migrate_options(partition_by="date, partition").partition_by == ("date",
                                                                                  "partition")


# --- migrate and read back ---------------------------------------------------------------------


def test_per_topic_tables_equal_read_log(logs, tmp_path):
    dest = tmp_path / "delta"
    m = migrate(logs, dest, partition_by=["partition", "date"])
    assert (m["records"], m["commits"], m["engine"], m["writer"]) == (690, 2, "local", "delta-rs")
    assert delta_rows(dest / "orders") == log_rows(logs, topics=["orders"])
    assert delta_rows(dest / "users") == log_rows(logs, topics=["users"])
    t = DeltaTable(str(dest / "orders"))
    assert t.metadata().partition_columns == ["partition", "date"]
    rows = t.to_pyarrow_table(columns=["timestamp", "date"])
    days = pc.floor(pc.divide(rows["timestamp"].cast(pa.int64()).cast(pa.float64()), 86.4e9))
    assert pc.all(pc.equal(days.cast(pa.int32()), rows["date"].cast(pa.int32()))).as_py()
    assert len(set(rows["date"].to_pylist())) > 10
    schema = pa.schema(t.schema().to_arrow())
    assert schema.field("timestamp").type == pa.timestamp("us", tz="UTC")
    assert all(f.nullable for f in schema)
    # one application transaction per partition, at its log end offset
    ends = {(p.topic, p.partition): kl.read_log(p.path)["offset"][-1].as_py() + 1
            for p in discover(logs).log_dirs[0].partitions}
    for (topic, p), end in ends.items():
        assert DeltaTable(str(dest / topic)).transaction_version(f"kafkalog:{topic}:{p}") == end
    assert parquet_on_disk(dest / "orders") == table_files(dest / "orders")


def test_small_segments_make_few_row_groups_and_each_table_lists_its_own_partitions(
        tmp_path, monkeypatch):
    """Rows of many small segments are buffered into row groups (not one per segment), and a
    table's read names its own partition dirs, never the whole log dir."""
    import pyarrow.parquet as pq

    from kafkalog_spark.delta import files as delta_files
    from kafkalog_spark.delta.plan import TablePlan

    logs = tmp_path / "logs"
    kl.write_log(records(1500), logs, segment_bytes=2048, max_batch_records=10)
    segments = sum(len(p.segments) for p in discover(logs).all_partition_dirs())
    assert segments >= 20
    paths = []
    real = TablePlan.read_options

    def spy(self, opts):
        out = real(self, opts)
        paths.append(out["path"].split(","))
        return out

    monkeypatch.setattr(TablePlan, "read_options", spy)
    dest = tmp_path / "delta"
    migrate(logs, dest, layout="single")
    files = sorted(dest.rglob("*.parquet"))
    assert len(files) == 1  # the single layout is partitioned by topic
    assert pq.ParquetFile(files[0]).num_row_groups == 1
    assert paths == [sorted(str(p.path) for p in discover(logs).log_dirs[0].partitions)]
    assert delta_rows(dest) == log_rows(logs)
    # a small row-group bound: several groups per file, the same rows
    monkeypatch.setattr(delta_files, "ROW_GROUP_BYTES", 4096)
    migrate(logs, tmp_path / "small", layout="single")
    assert all(pq.ParquetFile(f).num_row_groups > 1
               for f in (tmp_path / "small").rglob("*.parquet"))
    assert delta_rows(tmp_path / "small") == log_rows(logs)


def test_single_table_with_topic_column_and_selection(logs, tmp_path):
    dest = tmp_path / "one"
    m = migrate(logs, dest, layout="single", include_headers=False, include_metadata=False)
    assert m["records"] == 690 and DeltaTable(str(dest)).metadata().partition_columns == ["topic"]
    cols = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    assert delta_rows(dest, cols) == log_rows(logs, cols)
    assert "headers" not in DeltaTable(str(dest)).schema().to_arrow().names
    picked = migrate(logs, tmp_path / "picked", topic_pattern="us.*")
    assert [Path(t["path"]).name for t in picked["tables"]] == ["users"]


def test_second_run_commits_nothing_and_appends_only_new_records(logs, tmp_path):
    dest = tmp_path / "delta"
    migrate(logs, dest)
    version = DeltaTable(str(dest / "orders")).version()
    again = migrate(logs, dest)
    assert (again["commits"], again["records"], again["files"]) == (0, 0, 0)
    assert DeltaTable(str(dest / "orders")).version() == version
    kl.write_log(records(120, start=600), logs, codec="zstd")
    third = migrate(logs, dest)
    assert (third["records"], third["commits"]) == (120, 1)
    assert third["tables"][0]["partitions"] == {"orders-0": [200, 240], "orders-1": [200, 240],
                                                "orders-2": [200, 240]}
    assert delta_rows(dest / "orders") == log_rows(logs, topics=["orders"])
    assert DeltaTable(str(dest / "orders")).version() == version + 1


def test_table_exists_knows_a_new_folder_without_loading_deltalake(logs, tmp_path):
    """A migration into new tables asks before its job whether each exists: a local folder
    without ``_delta_log`` is answered without importing ``deltalake``; a ``_delta_log`` without
    a commit is no table; a migrated one is."""
    script = ("import sys; from pathlib import Path\n"
              "from kafkalog_spark.delta.commit import table_exists\n"
              "print(table_exists(Path(sys.argv[1])), 'deltalake' in sys.modules)")

    def probe(path: Path) -> list[str]:  # a fresh interpreter: nothing imported before
        return subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True,
                              text=True, check=True).stdout.split()

    new = tmp_path / "new"
    new.mkdir()
    assert probe(new) == ["False", "False"]
    (new / "_delta_log").mkdir()
    assert probe(new) == ["False", "True"]
    migrate(logs, tmp_path / "delta", topics=["orders"])
    assert probe(tmp_path / "delta" / "orders") == ["True", "True"]


def test_dry_run_writes_nothing(logs, tmp_path):
    m = migrate(logs, tmp_path / "delta", dry_run=True)
    assert m["dry_run"] and m["commits"] == 0
    assert m["tables"][0]["partitions"]["orders-1"] == [0, 200]
    assert not (tmp_path / "delta").exists()


def test_delta_spark_writer_without_spark_is_refused_before_anything_is_made(logs, tmp_path):
    with pytest.raises(InvalidOptionError, match="writer='delta-spark' needs the Spark engine"):
        migrate(logs, tmp_path / "delta", writer="delta-spark")
    assert not (tmp_path / "delta").exists()
    # auto on the local engine: delta-rs, without asking for delta-spark
    assert migrate(logs, tmp_path / "delta", writer="auto")["writer"] == "delta-rs"


def test_schema_evolution_adds_headers_and_metadata(logs, tmp_path):
    dest = tmp_path / "delta"
    migrate(logs, dest, topics=["orders"], include_headers=False, include_metadata=False)
    before = DeltaTable(str(dest / "orders")).schema().to_arrow().names
    assert "headers" not in before and "producerId" not in before
    kl.write_log(records(30, start=600), logs)
    m = migrate(logs, dest, topics=["orders"])
    assert m["records"] == 30
    got = delta_rows(dest / "orders")
    want = log_rows(logs, topics=["orders"])
    old = [r for r in got if r["offset"] < 200]
    assert all(r["headers"] is None and r["producerId"] is None for r in old)
    assert [r for r in got if r["offset"] >= 200] == [r for r in want if r["offset"] >= 200]
    base = ["key", "value", "offset", "timestamp"]
    assert [{k: r[k] for k in base} for r in got] == [{k: r[k] for k in base} for r in want]


def test_partitioning_of_a_table_cannot_change(logs, tmp_path):
    migrate(logs, tmp_path / "d", topics=["orders"])
    kl.write_log(records(3, start=600), logs)
    with pytest.raises(InvalidOptionError, match="keeps its partitioning"):
        migrate(logs, tmp_path / "d", topics=["orders"], partition_by="date")


# --- exactly once ------------------------------------------------------------------------------


class Killed(Exception):
    pass


@pytest.mark.parametrize("at", ["planned", "files-written", "before-commit", "committed"])
def test_killed_run_leaves_nothing_visible_and_rerun_gives_one_copy(logs, tmp_path, at):
    dest = tmp_path / "delta"
    migrate(logs, dest, topics=["orders"], partition_by="partition")
    kl.write_log(records(60, start=600), logs)

    def die(name, path):
        if name == at:
            raise Killed(name)

    with pytest.raises(Killed):
        migrate(logs, dest, topics=["orders"], partition_by="partition", step=die)
    committed = at == "committed"
    visible = delta_rows(dest / "orders")
    assert len(visible) == (660 if committed else 600)
    m = migrate(logs, dest, topics=["orders"], partition_by="partition")
    assert m["records"] == (0 if committed else 60)
    assert bool(m["cleaned"]) == (at in ("files-written", "before-commit"))
    assert delta_rows(dest / "orders") == log_rows(logs, topics=["orders"])
    assert parquet_on_disk(dest / "orders") == table_files(dest / "orders")
    assert not list((dest / "orders" / STATE_DIR / "runs").iterdir())


_KILL_SCRIPT = """
import os, signal, sys, threading, time
from kafkalog_spark.delta import migrate
delay = float(sys.argv[3])
def step(name, path):
    if name == "before-commit":
        if delay < 0:
            os.kill(os.getpid(), signal.SIGKILL)
        threading.Timer(delay, lambda: os.kill(os.getpid(), signal.SIGKILL)).start()
migrate(sys.argv[1], sys.argv[2], topics=["orders"], step=step)
time.sleep(5)
"""


@pytest.mark.parametrize("delay", [-1, 0.0, 0.002, 0.01])
def test_sigkill_before_and_during_commit(logs, tmp_path, delay):
    dest = tmp_path / "delta"
    migrate(logs, dest, topics=["orders"])
    kl.write_log(records(45, start=600), logs)
    proc = subprocess.run([sys.executable, "-c", _KILL_SCRIPT, str(logs), str(dest), str(delay)],
                          capture_output=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    n = len(delta_rows(dest / "orders"))
    assert n in (600, 645)  # the commit happened entirely or not at all
    m = migrate(logs, dest, topics=["orders"])
    assert m["records"] == 645 - n
    assert delta_rows(dest / "orders") == log_rows(logs, topics=["orders"])
    assert parquet_on_disk(dest / "orders") == table_files(dest / "orders")


def test_a_second_run_on_a_locked_table_fails(logs, tmp_path):
    dest = tmp_path / "delta"
    migrate(logs, dest, topics=["orders"])
    kl.write_log(records(3, start=600), logs)
    with table_lock(dest / "orders"):
        with pytest.raises(ConcurrentMigrationError, match="another migration"):
            migrate(logs, dest, topics=["orders"])
    assert migrate(logs, dest, topics=["orders"])["records"] == 3


# --- data loss ---------------------------------------------------------------------------------


def _retain_from(log_dir: Path, topic: str, partition: int) -> int:
    """Delete every segment but the last of a partition, as retention would; returns the new
    log start offset (also written to the log start checkpoint)."""
    part = next(p for p in discover(log_dir).log_dirs[0].partitions
                if (p.topic, p.partition) == (topic, partition))
    for seg in part.segments[:-1]:
        for f in (seg.log, seg.index, seg.timeindex, seg.txnindex):
            if f is not None:
                f.unlink()
    start = part.segments[-1].base_offset
    (log_dir / LOG_START_OFFSET_CHECKPOINT).write_text(
        format_offset_checkpoint({(topic, partition): start}))
    return start


def test_log_start_past_migrated_offset_is_data_loss(logs, tmp_path):
    dest = tmp_path / "delta"
    migrate(logs, dest, topics=["orders"])
    kl.write_log(records(900, start=600), logs, segment_bytes=8 * 1024, max_batch_records=25)
    start = _retain_from(logs, "orders", 1)
    assert start > 200
    with pytest.raises(DataLossError, match=rf"records \[200, {start}\) of orders-1"):
        migrate(logs, dest, topics=["orders"])
    assert DeltaTable(str(dest / "orders")).version() == 0
    m = migrate(logs, dest, topics=["orders"], fail_on_data_loss=False)
    assert [(g["topic"], g["partition"], g["from"], g["to"]) for g in m["data_loss"]] == [
        ("orders", 1, 200, start)]
    got = delta_rows(dest / "orders")
    assert [r for r in got if r["partition"] == 1 and 200 <= r["offset"]] == log_rows(
        logs, topics=["orders"], partitions=[1])
    history = DeltaTable(str(dest / "orders")).history(1)[0]
    assert history["kafkalog.dataLoss"][0]["to"] == start


def test_log_end_below_migrated_offset_is_data_loss(logs, tmp_path):
    dest = tmp_path / "delta"
    migrate(logs, dest, topics=["users"])
    kl.write_log(records(10, topic="users", partitions=1), logs, mode="overwrite")
    with pytest.raises(DataLossError, match="ends at 10, below the offset 90"):
        migrate(logs, dest, topics=["users"])
    m = migrate(logs, dest, topics=["users"], fail_on_data_loss=False)
    assert m["commits"] == 0 and m["data_loss"][0]["from"] == 10


# --- isolation level and internal topics -------------------------------------------------------


def test_read_committed_stops_at_last_stable_offset(tmp_path):
    pdir = tmp_path / "txn-0"
    write_txn_partition(pdir, with_indexes=True)
    dest = tmp_path / "delta"
    m = migrate(pdir, dest, isolation_level="read_committed")
    got = [r["offset"] for r in delta_rows(dest / "txn")]
    assert got == [*range(5, 15), 16, 17, 18, *range(20, 25)]
    assert m["tables"][0]["partitions"] == {"txn-0": [0, 26]}
    assert DeltaTable(str(dest / "txn")).transaction_version("kafkalog:txn:0") == 26
    # read_uncommitted into another table: everything to the log end, markers left out
    migrate(pdir, tmp_path / "all")
    assert [r["offset"] for r in delta_rows(tmp_path / "all" / "txn")] == [
        *range(15), 16, 17, 18, *range(20, 25), *range(26, 32)]


@pytest.mark.parametrize("name", REAL_LOG_DIRS)
def test_real_broker_dirs_migrate_record_by_record(shared_fixtures, tmp_path, name):
    src = shared_fixtures / name
    dest = tmp_path / "one"
    m = migrate(src, dest, layout="single")
    assert m["records"] == len(log_rows(src))
    assert delta_rows(dest) == log_rows(src)
    assert migrate(src, dest, layout="single")["commits"] == 0
    table = DeltaTable(str(dest)).to_pyarrow_table()
    co = table.filter(pc.equal(table["topic"], "__consumer_offsets"))
    others = table.filter(pc.not_equal(table["topic"], "__consumer_offsets"))
    assert co.num_rows > 0 and others["consumerOffsets"].null_count == others.num_rows
    for row in co.to_pylist()[:200]:
        dec = row["consumerOffsets"]
        assert dec["decodeError"] is None
        key = decode_consumer_offsets_key(row["key"])
        assert (dec["keyType"], dec["keyName"]) == (key["type"], key["name"])
        value = decode_consumer_offsets_value(key, row["value"])
        if value is not None and value["name"] == "OffsetCommitValue":
            assert dec["committedOffset"] == value["data"]["offset"]
            assert dec["topic"] == key["data"]["topic"]
        assert (dec["valueJson"] is None) == (value is None)


def test_transaction_state_typed_columns(shared_fixtures, tmp_path):
    src = shared_fixtures / REAL_LOG_DIRS[4]
    migrate(src, tmp_path / "d", topics=["__transaction_state"])
    rows = DeltaTable(str(tmp_path / "d" / "__transaction_state")).to_pyarrow_table().to_pylist()
    states = [r["transactionState"] for r in sorted(rows, key=lambda r: r["offset"])]
    assert states and all(s["decodeError"] is None for s in states)
    assert states[0]["transactionalId"] == "default_"
    assert [s["transactionStatusName"] for s in states[:3]] == ["Empty", "Ongoing",
                                                               "PrepareCommit"]
    assert states[1]["transactionPartitions"] == [
        {"topic": "_confluent-ksql-default__command_topic", "partitionIds": [0]}]
    assert states[1]["transactionStartTimestamp"] is not None
    assert "consumerOffsets" not in rows[0]


def test_undecodable_internal_record_is_reported_in_its_row(tmp_path):
    bad = pa.table({"key": [b"\x00\x01\x00"], "value": [b"\x00"]})
    kl.write_log(bad, tmp_path / "logs", topic="__consumer_offsets", partition=3)
    migrate(tmp_path / "logs", tmp_path / "d")
    row = DeltaTable(str(tmp_path / "d" / "__consumer_offsets")).to_pyarrow_table().to_pylist()[0]
    assert row["consumerOffsets"]["decodeError"]
    assert row["value"] == b"\x00"


# --- CLI ---------------------------------------------------------------------------------------


def test_cli_migrate_and_exit_codes(logs, tmp_path):
    runner = CliRunner()
    dest = tmp_path / "cli"
    res = runner.invoke(cli, ["migrate", str(logs), str(dest), "--partition-by", "partition",
                              "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["records"] == 690
    res = runner.invoke(cli, ["migrate", str(logs), str(dest)])  # run twice: nothing new
    assert res.exit_code == 0 and "orders: up to date" in res.output
    assert res.output.splitlines()[-1].startswith("up to date: nothing new to migrate")
    assert runner.invoke(cli, ["migrate", str(logs), str(dest), "--dry-run"]).exit_code == 0
    kl.write_log(records(3, start=600), logs)
    res = runner.invoke(cli, ["migrate", str(logs), str(dest), "--dry-run"])
    assert res.exit_code == 1, res.output  # a plan that would write something
    assert "would migrate offsets of 3 partitions (span 3)" in res.output
    assert "would migrate 3 partitions into 2 tables" in res.output and "planned: 0" not in \
        res.output
    assert DeltaTable(str(dest / "orders")).transaction_version("kafkalog:orders:0") == 200
    res = runner.invoke(cli, ["migrate", str(logs), str(dest), "--partition-by", "date"])
    assert res.exit_code != 0 and "keeps its partitioning" in str(res.exception or res.output)


def test_cli_reports_data_loss_with_exit_code_2(logs, tmp_path, capsys):
    dest = tmp_path / "cli"
    assert main(["migrate", str(logs), str(dest), "--topic", "orders"]) == 0
    kl.write_log(records(900, start=600), logs, segment_bytes=8 * 1024, max_batch_records=25)
    _retain_from(logs, "orders", 2)
    assert main(["migrate", str(logs), str(dest), "--topic", "orders"]) == 2
    assert "were deleted before they were migrated" in capsys.readouterr().err
    assert main(["migrate", str(logs), str(dest), "--topic", "orders",
                 "--no-fail-on-data-loss"]) == 0
    assert "DATA LOSS orders-2" in capsys.readouterr().out


def test_docs_option_table_is_current():
    from kafkalog_spark.delta import options_doc

    doc = (Path(__file__).resolve().parents[1] / "docs" / "delta.md").read_text()
    assert options_doc() in doc


def test_independent_readers_duckdb_and_polars(logs, tmp_path):
    """DuckDB's delta extension (delta-kernel) and polars read the table we committed, with
    the same records and types as read_log."""
    import duckdb
    import duckdb_extension_delta
    import polars as pl

    dest = tmp_path / "delta"
    migrate(logs, dest, partition_by=["partition", "date"])
    # the extension ships as a Python package (DuckDB would otherwise download it at run time)
    (extension,) = Path(duckdb_extension_delta.__file__).parent.glob(
        "extensions/*/delta.duckdb_extension")
    con = duckdb.connect()
    con.execute(f"LOAD '{extension}'")
    from_duckdb = con.execute(
        f"SELECT * FROM delta_scan('{dest / 'orders'}')").arrow().read_all()
    assert from_duckdb.schema.field("timestamp").type.unit == "us"
    got = sorted(from_duckdb.select(COLUMNS).to_pylist(),
                 key=lambda r: (r["topic"], r["partition"], r["offset"]))
    assert got == log_rows(logs, topics=["orders"])
    from_polars = pl.read_delta(str(dest / "users")).to_arrow()
    got = sorted(from_polars.select(COLUMNS).to_pylist(),
                 key=lambda r: (r["topic"], r["partition"], r["offset"]))
    assert got == log_rows(logs, topics=["users"])
