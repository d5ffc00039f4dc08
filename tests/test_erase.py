"""``kafkalog erase`` (issue 20, parts 3-5, log dirs): every record with a key of the set is gone
and nothing else changed — other offsets, batch headers, producer state, markers, the log end;
untouched segments are not rewritten; ``--check`` proves it; the audit report holds no key; a
run killed at any step is finished by the next."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from click.testing import CliRunner

import kafkalog_spark as kl
from kafkalog_spark.cli import cli, main
from kafkalog_spark.codec.records.scan import scan_entries
from kafkalog_spark.compaction.erase import erase
from kafkalog_spark.compaction.erase_select import read_keys

from faults import run_forked
from test_datasource_read import write_txn_partition
from test_reconcile import kafka_python_offsets
from test_restore import records
from test_salvage import legacy_log

# heavy for the plain-Python pass, which keeps the first test (nojit)
pytestmark = pytest.mark.slow
KEYS = [b"k7", b"k13", b"k0"]
META = ["offset", "key", "value", "timestamp", "timestampType", "headers", "leaderEpoch",
        "producerId", "producerEpoch", "isTransactional", "isControl", "batchBaseOffset",
        "batchLastOffset"]


def rows(log_dir: Path, **kw) -> pa.Table:
    return kl.read_log(log_dir, include_headers=True, include_metadata=True, **kw)


def without(table: pa.Table, keys, columns=META) -> list[dict]:
    keep = pc.invert(pc.fill_null(pc.is_in(table["key"], value_set=pa.array(keys)), False))
    return table.filter(keep).select(columns).to_pylist()


@pytest.mark.nojit
@pytest.mark.parametrize("codec", ["none", "gzip", "lz4", "zstd"])
def test_erase_removes_exactly_the_keys(tmp_path, codec):
    logs = tmp_path / "logs"
    kl.write_log(records(3000), logs, topic="t", codec=codec, max_batch_records=40,
                 segment_bytes=20_000)
    kl.write_log(records(50, 3000), logs, topic="other", codec=codec)
    before = rows(logs)
    segs = {p.name: p.read_bytes() for p in (logs / "t-0").glob("*.log")}
    dry = erase(logs, "t", KEYS, execute_plan=False)
    assert rows(logs).equals(before)
    report = erase(logs, "t", KEYS, execute_plan=True)
    assert report["records_removed"] == dry["records_removed"] > 0
    after = rows(logs)
    assert without(after, KEYS) == without(before, KEYS)
    assert after.num_rows == before.num_rows - report["records_removed"]
    assert kl.verify(logs).ok
    assert kafka_python_offsets(logs / "t-0") == [r["offset"] for r in without(
        before.filter(pc.equal(before["topic"], "t")), KEYS)]
    rewritten = set(report["partitions"][0]["segments_rewritten"])
    for name, data in segs.items():  # a segment with no match keeps its bytes
        if name not in rewritten:
            assert (logs / "t-0" / name).read_bytes() == data
    assert erase(logs, "t", KEYS, execute_plan=False)["records_removed"] == 0
    assert b"k7" not in json.dumps(report).encode()  # the audit names no key


def test_legacy_wrappers_and_multiple_key_passes(tmp_path):
    logs = legacy_log(tmp_path, 1, 1)  # v1 gzip wrappers of 25 records
    before = rows(logs)
    keys = [b"k%d" % i for i in (3, 30, 31, 599)]
    report = erase(logs, "t", keys, max_keys=1, execute_plan=True)  # four passes of one key
    assert report["records_removed"] == 4
    # rebuilt wrappers are v2 batches now (KIP-724): the records are the same
    record = ["offset", "key", "value", "timestamp"]
    assert without(rows(logs), keys, record) == without(before, keys, record)
    assert kl.verify(logs).ok
    assert kafka_python_offsets(logs / "t-0")[-1] == 598  # 599 erased
    last = scan_entries(np.frombuffer(sorted((logs / "t-0").glob("*.log"))[-1].read_bytes(),
                                      np.uint8))
    assert int(last.last_offset[-1]) == 599  # the log end offset did not move back


def test_producer_state_markers_and_log_end_kept(tmp_path):
    logs = tmp_path / "logs"
    write_txn_partition(logs / "txn-0", with_indexes=True)
    (logs / "meta.properties").write_text("version=0\nbroker.id=0\n")
    clean = kl.verify(logs).ok
    before = rows(logs, include_control=True)
    keys = [b"k%d" % i for i in (10, 11, 12, 13, 14, 30, 31)]  # a whole transactional batch
    erase(logs, "txn", keys, execute_plan=True)
    after = rows(logs, include_control=True)
    assert without(after, keys) == without(before, keys)
    t = scan_entries(np.frombuffer((logs / "txn-0" / f"{0:020d}.log").read_bytes(), np.uint8))
    empty = [i for i in range(len(t)) if t.count[i] == 0]
    assert empty and t.producer_id[empty[0]] == 2  # producer 2's batch kept, emptied
    assert after["offset"].to_pylist()[-1] < 31 and (kl.verify(logs).ok or not clean)
    assert (logs / "txn-0" / f"{0:020d}.txnindex").exists()  # kept with its segment
    last = scan_entries(np.frombuffer((logs / "txn-0" / f"{16:020d}.log").read_bytes(), np.uint8))
    assert int(last.last_offset[-1]) == 31  # the log end offset did not move back


def test_keys_file_and_cli(tmp_path, capsys):
    logs = tmp_path / "logs"
    kl.write_log(records(500), logs, topic="t", max_batch_records=25)
    with pytest.raises(Exception, match="does not exist"):
        read_keys(tmp_path / "nope.txt")
    (tmp_path / "empty.txt").write_text("\n\n")
    assert main(["erase", str(logs), "--topic", "t", "--keys", str(tmp_path / "empty.txt")]) == 2
    assert "holds no keys" in capsys.readouterr().err
    (tmp_path / "keys.txt").write_text("k7\nk13\n")
    args = ["erase", str(logs), "--topic", "t", "--keys", str(tmp_path / "keys.txt")]
    check = CliRunner().invoke(cli, [*args, "--check"])
    assert check.exit_code == 1 and "records left" in check.output
    left = erase(logs, "t", [b"k7", b"k13"])["records_removed"]  # the library plans too
    before = rows(logs)
    plan = CliRunner().invoke(cli, args)  # erase changes a log dir in place: a plan by default
    assert plan.exit_code == 1 and "records to erase" in plan.output, plan.output
    assert "run again with --execute" in plan.output and rows(logs).equals(before)
    assert CliRunner().invoke(cli, [*args, "--dry-run"]).output == plan.output  # the same plan
    both = CliRunner().invoke(cli, [*args, "--dry-run", "--execute"])
    assert both.exit_code == 2 and "give one" in both.output and rows(logs).equals(before)
    assert main([*args, "--execute", "--report", str(tmp_path / "audit.json")]) == 0
    audit = json.loads((tmp_path / "audit.json").read_text())
    assert audit["records_removed"] == left > 0 and len(audit["key_set_sha256"]) == 64
    assert CliRunner().invoke(cli, [*args, "--check"]).exit_code == 0
    again = CliRunner().invoke(cli, [*args, "--execute"])  # run twice: nothing left to erase
    assert again.exit_code == 0 and "t: 0 records erased" in again.output, again.output
    assert CliRunner().invoke(cli, args).exit_code == 0  # and a plan finds nothing to do
    (tmp_path / "hex.txt").write_text("6b37\n")  # "k7" in hex
    assert CliRunner().invoke(cli, ["erase", str(logs), "--topic", "t", "--keys",
                                    str(tmp_path / "hex.txt"), "--keys-encoding", "hex",
                                    "--check"]).exit_code == 0


def _erase(step, logs: str) -> None:
    erase(logs, "t", KEYS, step=step, execute_plan=True)


@pytest.mark.slow  # a fork per step: the JIT pass runs it
def test_a_run_killed_at_any_step_is_finished_by_the_next(tmp_path):
    def build(root: Path) -> Path:
        kl.write_log(records(800), root / "logs", topic="t", max_batch_records=40,
                     segment_bytes=8_000)
        return root / "logs"

    want = without(rows(build(tmp_path / "ref")), KEYS)
    probe = run_forked(_erase, logs=str(build(tmp_path / "probe")))
    assert probe.finished and len(probe.steps) > 10, probe
    for k in range(1, len(probe.steps) + 1):
        logs = build(tmp_path / f"k{k}")
        out = run_forked(_erase, kill_at=k, logs=str(logs))
        assert out.killed, (k, out)
        erase(logs, "t", KEYS, execute_plan=True)
        assert without(rows(logs), KEYS) == want and \
            rows(logs).num_rows == len(want), (k, out.steps[-1])
        assert kl.verify(logs).ok, (k, out.steps[-1])
        shutil.rmtree(tmp_path / f"k{k}")


def test_one_run_covers_the_log_dir_and_the_migrate_table(tmp_path):
    from kafkalog_spark.delta import migrate

    logs = tmp_path / "logs"
    kl.write_log(records(600), logs, topic="t", max_batch_records=30)
    kl.write_log(records(100), logs, topic="u", max_batch_records=30)
    migrate(logs, tmp_path / "lake", layout="single")
    (tmp_path / "keys.txt").write_text("k7\nk13\n")
    args = ["erase", str(logs), "--topic", "t", "--keys", str(tmp_path / "keys.txt"),
            "--table", str(tmp_path / "lake")]
    dry = CliRunner().invoke(cli, [*args, "--json"])
    assert dry.exit_code == 1, dry.output  # a plan that would change something
    matching = json.loads(dry.output)["tables"][0]["rows_matching"]
    assert matching == json.loads(dry.output)["records_removed"] > 0
    done = CliRunner().invoke(cli, [*args, "--execute"])
    assert done.exit_code == 0 and "vacuum" in done.output, done.output
    from deltalake import DeltaTable

    table = DeltaTable(str(tmp_path / "lake")).to_pyarrow_table()
    keys = table.filter(pc.equal(table["topic"], "t"))["key"].to_pylist()
    assert b"k7" not in keys and b"k13" not in keys
    assert table.filter(pc.equal(table["topic"], "u")).num_rows == 100  # other topics stay
    assert CliRunner().invoke(cli, [*args, "--check"]).exit_code == 0


# --- --where: a SQL predicate, and the Spark engine -------------------------------------------

WHERE = ("key = X'6b37' OR array_has(headers, named_struct('key', 'h', 'value', X'3433')) "
         "OR (timestamp >= '2023-11-14T22:13:25Z' AND timestamp < '2023-11-14T22:13:26Z' "
         "AND timestampType = 0)")


def where_hits(table: pa.Table) -> pa.Array:
    """WHERE computed independently (pyarrow) on read_log's rows: key k7, a header h=43, or a
    timestamp in [22:13:25, 22:13:26) UTC."""
    import datetime as dt

    def ts(s: int) -> pa.Scalar:
        return pa.scalar(dt.datetime(2023, 11, 14, 22, 13, s, tzinfo=dt.timezone.utc),
                         table["timestamp"].type)

    h43 = pa.array([{"key": "h", "value": b"43"} in (hs or []) for hs in
                    table["headers"].to_pylist()])
    in_window = pc.and_(pc.greater_equal(table["timestamp"], ts(25)),
                        pc.less(table["timestamp"], ts(26)))
    # SQL's OR: true when either side is, even if the other is null (a null key)
    return pc.fill_null(pc.or_kleene(pc.or_kleene(pc.equal(table["key"], b"k7"), h43),
                                     in_window), False)


@pytest.mark.nojit
def test_where_removes_what_the_predicate_selects(tmp_path):
    logs = tmp_path / "logs"
    kl.write_log(records(3000), logs, topic="t", codec="lz4", max_batch_records=40,
                 segment_bytes=20_000)
    before = rows(logs)
    report = erase(logs, "t", where=WHERE, execute_plan=True)
    hits = where_hits(before)
    assert report["records_removed"] == pc.sum(hits).as_py() > 150
    assert rows(logs).select(META).to_pylist() == before.filter(pc.invert(hits)).select(
        META).to_pylist()
    assert kl.verify(logs).ok
    assert kafka_python_offsets(logs / "t-0") == before.filter(pc.invert(hits))[
        "offset"].to_pylist()
    assert "k7" not in json.dumps(report) and len(report["predicate_sha256"]) == 64
    assert erase(logs, "t", where=WHERE, execute_plan=False)["records_removed"] == 0


def test_where_and_option_errors_are_one_line(tmp_path, capsys):
    logs = tmp_path / "logs"
    kl.write_log(records(100), logs, topic="t")
    base = ["erase", str(logs), "--topic", "t"]
    (tmp_path / "keys.txt").write_text("k7\n")
    for args, message in [
            (["--where", "key = X'6b37' OR ("], "does not parse"),
            (["--where", "customer = 'x'"], "No field named customer"),
            (["--where", "key = X'6b37'", "--keys", str(tmp_path / "keys.txt")], "exactly one"),
            ([], "exactly one")]:
        assert main([*base, *args]) == 2
        err = capsys.readouterr().err.strip()
        assert message in err and "Traceback" not in err and len(err.splitlines()) == 1, err
    assert rows(logs).num_rows == 100  # nothing changed


def test_where_on_the_migrate_table_deletes_the_same_rows(tmp_path):
    from deltalake import DeltaTable

    from kafkalog_spark.delta import migrate

    logs = tmp_path / "logs"
    for partition in (0, 1):
        kl.write_log(records(1500), logs, topic="t", partition=partition, max_batch_records=30)
    kl.write_log(records(100), logs, topic="u", max_batch_records=30)
    migrate(logs, tmp_path / "lake", layout="single", include_headers=True)
    args = ["erase", str(logs), "--topic", "t", "--where", WHERE, "--table",
            str(tmp_path / "lake"), "--json"]
    done = CliRunner().invoke(cli, [*args, "--execute"])
    assert done.exit_code == 0, done.output
    report = json.loads(done.output)
    assert report["tables"][0]["rows_matching"] == report["records_removed"] > 0
    lake = DeltaTable(str(tmp_path / "lake")).to_pyarrow_table()
    left = sorted((r["topic"], r["partition"], r["offset"]) for r in
                  lake.select(["topic", "partition", "offset"]).to_pylist())
    assert left == sorted((r["topic"], r["partition"], r["offset"]) for r in
                          rows(logs).select(["topic", "partition", "offset"]).to_pylist())
    assert CliRunner().invoke(cli, [*args, "--check"]).exit_code == 0
    # a predicate on a column the table lacks names the table
    migrate(logs, tmp_path / "bare", layout="single", include_headers=False)
    out = CliRunner().invoke(cli, ["erase", str(logs), "--topic", "t", "--where", WHERE,
                                   "--table", str(tmp_path / "bare"), "--dry-run"])
    assert out.exit_code != 0 and "headers" in str(out.exception), out.output


@pytest.mark.spark
def test_the_spark_engine_writes_the_local_engines_bytes(tmp_path, spark):
    for partition in (0, 1):
        kl.write_log(records(1500, 1500 * partition), tmp_path / "local", topic="t",
                     partition=partition, codec="gzip", max_batch_records=40,
                     segment_bytes=20_000)
    shutil.copytree(tmp_path / "local", tmp_path / "spark")
    engine = {}
    for name, sess in (("local", None), ("spark", spark)):
        engine[name] = [erase(tmp_path / name, "t", KEYS, max_keys=2, spark=sess,  # 2 passes
                              execute_plan=True),
                        erase(tmp_path / name, "t", where=WHERE, spark=sess, execute_plan=True)]
    assert engine["spark"] == engine["local"] and engine["local"][1]["records_removed"] > 0
    files = sorted(p.relative_to(tmp_path / "local") for p in (tmp_path / "local").rglob("*"))
    assert files == sorted(p.relative_to(tmp_path / "spark") for p in
                           (tmp_path / "spark").rglob("*"))
    for f in files:
        if (tmp_path / "local" / f).is_file():
            assert (tmp_path / "local" / f).read_bytes() == (tmp_path / "spark" / f).read_bytes(), f
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # staging removed


@pytest.mark.spark
def test_the_spark_engine_over_two_log_dirs_and_a_dry_run(tmp_path, spark):
    """Partitions of the topic in two log dirs (JBOD): each log dir's rewrites are staged next
    to it (renamed into it); a dry run creates nothing, not even a staging folder."""
    for d, partition in (("a", 0), ("b", 1)):
        kl.write_log(records(800, 800 * partition), tmp_path / "disks" / d / "logs", topic="t",
                     partition=partition, max_batch_records=40, segment_bytes=8_000)
    dirs = [tmp_path / "disks" / d / "logs" for d in ("a", "b")]
    shutil.copytree(tmp_path / "disks", tmp_path / "local")
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    dry = erase(dirs, "t", KEYS, execute_plan=False, spark=spark)
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before and dry["records_removed"] > 0
    done = erase(dirs, "t", KEYS, spark=spark, execute_plan=True)
    want = erase([tmp_path / "local" / d / "logs" for d in ("a", "b")], "t", KEYS,
                 execute_plan=True)
    assert done == want
    for d in dirs:
        assert not [p for p in d.parent.iterdir() if p.name.startswith(".")]
        assert without(rows(d), KEYS) == without(rows(tmp_path / "local" / d.parent.name / "logs"),
                                                  KEYS) and kl.verify(d).ok
