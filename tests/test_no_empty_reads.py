"""No silent empty reads: every path that exists but holds nothing readable as given either
reads its data or fails saying what was found and what was expected — in ``read_log``, the
Spark data source's planner, and the CLI (``docs/datasource.md``, "Paths")."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner

import kafkalog_spark as kl
from kafkalog_spark.cli import cli
from kafkalog_spark.datasource.plan import plan_scan
from kafkalog_spark.errors import InvalidOptionError, LogDirError


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    table = pa.table({"key": [b"k%d" % i for i in range(600)],
                      "value": [b"v%d" % i for i in range(600)],
                      "partition": [i % 2 for i in range(600)]})
    kl.write_log(table, tmp_path / "logs", topic="orders", segment_bytes=2048,
                 max_batch_records=20)
    return tmp_path / "logs"


def _rows(table: pa.Table) -> list[tuple]:
    return list(zip(table["offset"].to_pylist(), table["value"].to_pylist()))


def test_a_loose_log_file_needs_its_topic_and_partition(logs, tmp_path):
    seg = sorted((logs / "orders-1").glob("*.log"))[1]
    loose = tmp_path / "copy.d" / seg.name
    loose.parent.mkdir()
    shutil.copy(seg, loose)
    with pytest.raises(InvalidOptionError, match=r"1 segment \.log file\(s\) outside a "
                                                 r"<topic>-<partition> folder.*loose_topic"):
        kl.read_log(loose)
    got = kl.read_log(loose, loose_topic="orders", loose_partition=1)
    assert set(got["topic"].to_pylist()) == {"orders"} and set(got["partition"].to_pylist()) == {1}
    assert _rows(got) == _rows(kl.read_log(seg))  # offsets from the file name's base


def test_a_folder_of_loose_segments_reads_as_the_given_partition(logs, tmp_path):
    backup = tmp_path / "backup"
    shutil.copytree(logs / "orders-0", backup)
    with pytest.raises(InvalidOptionError, match="outside a <topic>-<partition> folder"):
        kl.read_log(backup)
    with pytest.raises(InvalidOptionError, match="looseTopic"):
        plan_scan({"path": str(backup)})
    got = kl.read_log(backup, loose_topic="orders", loose_partition=0)
    assert _rows(got) == _rows(kl.read_log(logs, partitions=[0]))
    plan = plan_scan({"path": str(backup), "looseTopic": "orders", "loosePartition": "0"})
    assert {(s.topic, s.partition) for s in plan.splits} == {("orders", 0)}
    with pytest.raises(InvalidOptionError, match="illegal topic name"):
        kl.read_log(backup, loose_topic="a/b", loose_partition=0)


def test_loose_segments_must_not_shadow_a_partition_dir(logs, tmp_path):
    backup = tmp_path / "backup"
    shutil.copytree(logs / "orders-0", backup)
    with pytest.raises(LogDirError, match="also a partition dir"):
        kl.read_log([logs, backup], loose_topic="orders", loose_partition=0)


def test_a_folder_without_kafka_data_is_an_error_naming_what_it_holds(tmp_path):
    odd = tmp_path / "odd"
    (odd / "sub").mkdir(parents=True)
    (odd / "notes.txt").write_text("x")
    for read in (lambda: kl.read_log(odd), lambda: plan_scan({"path": str(odd)})):
        with pytest.raises(LogDirError, match=r"no Kafka data here: expected a Kafka log dir.*"
                                              r"found 2 other entries: notes.txt, sub"):
            read()
    (tmp_path / "empty").mkdir()
    with pytest.raises(LogDirError, match="it is empty"):
        kl.read_log(tmp_path / "empty")


def test_a_kafka_log_dir_without_partitions_reads_as_empty(tmp_path):
    broker = tmp_path / "broker"
    broker.mkdir()
    (broker / "meta.properties").write_text("version=0\nbroker.id=1\n")
    assert kl.read_log(broker).num_rows == 0
    assert plan_scan({"path": str(broker)}).splits == []


def test_a_missing_topic_or_partition_is_an_error_listing_what_is_there(logs):
    with pytest.raises(InvalidOptionError, match="topic.s. ordres not found .*topics there: orders"):
        kl.read_log(logs, topics=["ordres"])
    with pytest.raises(InvalidOptionError, match="topic.s. ordres not found"):
        plan_scan({"path": str(logs), "subscribe": "orders,ordres"})
    with pytest.raises(InvalidOptionError, match="no topic matches 'ord'"):
        plan_scan({"path": str(logs), "subscribePattern": "ord"})
    with pytest.raises(InvalidOptionError, match="partition.s. orders-7 not found"):
        plan_scan({"path": str(logs), "assign": '{"orders": [0, 7]}'})
    with pytest.raises(InvalidOptionError, match=r"no partition \[5\]"):
        kl.read_log(logs, partitions=[5])


def test_a_stray_symlink_in_a_log_dir_is_skipped_with_a_warning(logs, tmp_path, caplog):
    (tmp_path / "elsewhere").mkdir()
    (logs / "current").symlink_to(tmp_path / "elsewhere")
    (logs / "dangling").symlink_to(tmp_path / "gone")
    with caplog.at_level(logging.WARNING, logger="kafkalog_spark.log"):
        assert kl.read_log(logs).num_rows == 600
    assert "current: a symlink that is not part of the log dir; not followed" in caplog.text
    info = CliRunner().invoke(cli, ["info", str(logs)])
    assert info.exit_code == 0 and "current" in info.output


def test_dump_of_a_partition_dir_dumps_its_segments(logs):
    done = CliRunner().invoke(cli, ["dump", str(logs / "orders-0")])
    assert done.exit_code == 0, done.output
    dumped = [line.split(" ", 1)[1] for line in done.output.splitlines()
              if line.startswith("Dumping ")]
    segs = sorted((logs / "orders-0").glob("*.log"))
    assert dumped[0] == str(segs[0]) and str(segs[0].with_suffix(".index")) in dumped
    assert all(str(s) in dumped for s in segs) and "Ignoring unknown file" not in done.output
    log_dir = CliRunner().invoke(cli, ["dump", str(logs)])
    assert "a log dir; name a partition dir or files" in log_dir.output


@pytest.mark.parametrize("command", ["info", "verify", "rebuild-index", "recover", "retain",
                                     "compact", "migrate"])
def test_every_command_names_a_folder_without_kafka_data(tmp_path, capsys, command):
    from kafkalog_spark.cli import main

    odd = tmp_path / "odd"
    odd.mkdir()
    (odd / "notes.txt").write_text("x")
    args = [command, str(odd)] + ([str(tmp_path / "dest")] if command == "migrate" else [])
    code = main(args)
    out, err = capsys.readouterr()
    if command in ("info", "verify"):  # reports: they say what is (not) there
        assert "notes.txt" in out + err or "no partition dirs" in out + err
        return
    assert code == 2 and err.startswith("Error: no Kafka data here") and str(odd) in err, err
