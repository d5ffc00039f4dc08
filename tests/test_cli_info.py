"""``kafkalog info``: table and JSON output over real log dirs; read-only; errors."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from kafkalog_spark.cli import cli, main

DONALD = "DonaldY__kafka-2.7.1/kafka-logs"
TUYEN = "tuyen-nnt__kafka_2.13-3.0.0/data/kafka"
KRAFT = "ItumelengMogase__Real-Time-Data-Pipeline-for-Patient-Admissions/kafka-data"


def run(*args: str) -> str:
    result = CliRunner().invoke(cli, ["info", *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def snapshot(root: Path) -> dict[str, tuple[str, int, int]]:
    """Content hash, mtime and size of every file and directory under ``root``."""
    out = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            p = Path(dirpath) / name
            st = p.lstat()
            digest = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            out[str(p.relative_to(root))] = (digest, st.st_mtime_ns, st.st_size)
    return out


def test_table(shared_fixtures: Path) -> None:
    out = run(str(shared_fixtures / DONALD))
    assert f"log dir {shared_fixtures / DONALD}" in out
    assert "lock: not locked; clean shutdown marker: no; checkpoints: 4/4" in out
    assert "broker.id=0" in out
    rows = {line.split()[0]: line.split() for line in out.splitlines()
            if line.startswith("  __consumer_offsets-")}
    assert rows["__consumer_offsets-17"][1:3] == ["2", "0..2"]  # two segments, offsets 0..2
    assert rows["__consumer_offsets-39"][1:3] == ["2", "0..19"]
    assert rows["__consumer_offsets-0"][2:4] == ["empty", "@0"]
    assert "2022-12-03T12:40:52Z .. 2023-06-03T12:23:09Z" in out  # __consumer_offsets-17


def test_table_kraft_shows_metadata_log(shared_fixtures: Path) -> None:
    out = run(str(shared_fixtures / KRAFT))
    assert "clean shutdown marker: yes" in out and "version=1" in out
    (meta,) = [line for line in out.splitlines() if line.startswith("  __cluster_metadata-0")]
    assert "2 orphan indexes" in meta and "3 kraft snapshots" in meta


def test_effective_config_and_sources(shared_fixtures: Path, tmp_path: Path) -> None:
    conf = tmp_path / "topics.json"
    conf.write_text(json.dumps({"patient_admissions": {"min.cleanable.dirty.ratio": 0.1}}))
    args = (str(shared_fixtures / KRAFT), "--config", "retention.ms=5",
            "--config-file", str(conf))
    out = run(*args)
    lines = {line.split(":")[0].strip(): line for line in out.splitlines()
             if line.startswith("    ")}
    assert lines["__consumer_offsets"].endswith(
        "__consumer_offsets: cleanup.policy=compact (metadata log), retention.ms=5 (option), "
        "segment.bytes=104857600 (metadata log)")
    assert "min.cleanable.dirty.ratio=0.1 (file)" in lines["patient_admissions"]
    assert "min.cleanable.dirty.ratio" not in lines["_schemas"]
    rep = json.loads(run(*args, "--json"))
    configs = rep["log_dirs"][0]["topic_configs"]
    assert configs["error"] is None
    schemas = configs["topics"]["_schemas"]
    assert schemas["cleanup.policy"] == {"value": "compact", "source": "metadata log"}
    assert schemas["retention.ms"] == {"value": 5, "source": "option"}
    assert schemas["delete.retention.ms"] == {"value": 86_400_000, "source": "default"}
    # no metadata log: internal topics get the settings Kafka creates them with
    plain = json.loads(run(str(shared_fixtures / DONALD), "--json"))["log_dirs"][0]
    offsets = plain["topic_configs"]["topics"]["__consumer_offsets"]
    assert offsets["cleanup.policy"] == {"value": "compact", "source": "internal topic"}
    # a partition dir given directly finds the metadata log in its parent
    one = json.loads(run(str(shared_fixtures / KRAFT / "_schemas-0"), "--json"))
    assert one["topic_configs"]["topics"]["_schemas"]["cleanup.policy"]["source"] == "metadata log"
    assert json.loads(run(str(shared_fixtures / KRAFT), "--json", "--shallow")
                      )["log_dirs"][0]["topic_configs"] is None


def test_bad_config_option_is_a_clean_error(shared_fixtures: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", str(shared_fixtures / DONALD), "--config", "retention.mss=1"]) == 2
    err = capsys.readouterr().err
    assert "unknown topic config 'retention.mss'" in err and err.count("\n") == 1


def test_json(shared_fixtures: Path) -> None:
    rep = json.loads(run(str(shared_fixtures / TUYEN), "--json"))
    (d,) = rep["log_dirs"]
    assert d["lock"] == {"file": True, "held_by_pid": None}
    parts = {p["name"]: p for p in d["partitions"]}
    co = parts["__consumer_offsets-13"]
    assert (co["start_offset"], co["next_offset"], co["records"]) == (0, 3093, 3093)
    assert co["magics"] == [2] and co["codecs"] == ["none"] and co["unclean_segments"] == []
    assert co["snapshots"] == ["00000000000000003093.snapshot"]
    for n in ("my-first-topic-0", "my-first-topic-1", "my-first-topic-2"):
        assert parts[n]["partition_metadata"] and parts[n]["segments"][0]["clean"]
    assert parts["my-first-topic-2"]["next_offset"] == 7
    assert rep["partitions"] == [] and rep["duplicates"] == []


def test_start_offset_is_the_log_start_a_consumer_sees(tmp_path: Path) -> None:
    """After DeleteRecords inside the first segment (its log-start-offset-checkpoint entry),
    a consumer and Kafka's loader start at the checkpointed offset, not at the first segment's
    base (found against a real broker: tests/oracle/test_retention_oracle.py)."""
    import kafkalog_spark as kl
    from kafkalog_spark.codec.files import checkpoints as C
    from kafkalog_spark.codec.files import naming as N
    from kafkalog_spark.storage.atomic import write_checkpoint_file

    from test_read_write import records

    log_dir = tmp_path / "logs"
    kl.write_log(records(300), log_dir, codec="none", segment_bytes=8 * 1024)
    rep = json.loads(run(str(log_dir), "--json"))["log_dirs"][0]["partitions"][0]
    assert (rep["start_offset"], rep["first_base_offset"], rep["log_start_offset"]) == (0, 0, None)
    write_checkpoint_file(log_dir / N.LOG_START_OFFSET_CHECKPOINT,
                          C.format_offset_checkpoint({("orders", 0): 7}))
    rep = json.loads(run(str(log_dir), "--json"))["log_dirs"][0]["partitions"][0]
    assert (rep["start_offset"], rep["first_base_offset"], rep["log_start_offset"]) == (7, 0, 7)
    (row,) = [line for line in run(str(log_dir)).splitlines() if line.startswith("  orders-0")]
    assert row.split()[2] == f"7..{rep['next_offset'] - 1}"


def test_shallow_reads_no_log(shared_fixtures: Path) -> None:
    rep = json.loads(run(str(shared_fixtures / DONALD / "__consumer_offsets-28"), "--json",
                         "--shallow"))
    (p,) = rep["partitions"]
    assert [s["base_offset"] for s in p["segments"]] == [0, 2]
    assert "next_offset" not in p and "batches" not in p["segments"][0]
    table = run(str(shared_fixtures / DONALD / "__consumer_offsets-28"), "--shallow")
    assert "partition dirs" in table and "__consumer_offsets-28" in table


def test_info_changes_nothing(shared_fixtures: Path, tmp_path: Path) -> None:
    root = tmp_path / "kafka-logs"
    shutil.copytree(shared_fixtures / KRAFT, root)
    before = snapshot(root)
    run(str(root))
    run(str(root), "--json")
    run(str(root / "__transaction_state-44" / "00000000000000000000.log"))
    assert snapshot(root) == before
    for dirpath, dirs, _ in os.walk(root):  # let tmp_path cleanup remove the read-only copy
        for d in dirs:
            os.chmod(Path(dirpath) / d, 0o755)


def test_lock_and_duplicates_are_reported(shared_fixtures: Path, tmp_path: Path,
                                         lock_holder) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        shutil.copytree(shared_fixtures / DONALD / "__consumer_offsets-17",
                        d / "__consumer_offsets-17", copy_function=shutil.copyfile)
        (d / ".lock").touch()
    holder = lock_holder(a)
    out = run(str(a), str(b))
    assert f"lock: LOCKED by pid {holder.pid}" in out
    assert "__consumer_offsets-17 is in 2 places (CONFLICT)" in out
    rep = json.loads(run(str(a), str(b), "--json"))
    assert rep["log_dirs"][0]["lock"]["held_by_pid"] == holder.pid
    assert rep["duplicates"][0]["replica_move"] is False


def test_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("Error: no such file or directory") and err.count("\n") == 1
    assert main(["info"]) == 2  # a path is required (click usage error)


def test_help() -> None:
    out = CliRunner().invoke(cli, ["info", "--help"]).output
    assert "--json" in out and "--shallow" in out and "read-only" in out
    assert "--config" in out and "--config-file" in out and "effective config" in out


def test_text_report_keeps_only_partition_totals(shared_fixtures: Path) -> None:
    """The text report is built without per-segment dicts (flat memory on big log dirs); its
    totals equal the JSON report's."""
    from kafkalog_spark.cli.info import render, report
    from kafkalog_spark.log.discovery import discover

    found = discover(shared_fixtures / DONALD)
    full, lean = report(found), report(found, segments=False)
    parts = lean["log_dirs"][0]["partitions"]
    assert parts and all(p["segments"] is None for p in parts)
    for a, b in zip(full["log_dirs"][0]["partitions"], parts):
        assert a["segment_count"] == len(a["segments"]) == b["segment_count"]
        assert {k: v for k, v in a.items() if k != "segments"} == \
            {k: v for k, v in b.items() if k != "segments"}
    assert render(full) == render(lean)
