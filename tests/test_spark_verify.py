"""Spark verify job: same report as the local verify, segments as tasks, problems DataFrame."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner

import kafkalog_spark as kl
from kafkalog_spark.cli import cli
from kafkalog_spark.codec.records.scan import scan_entries
from kafkalog_spark.inspect.verify import verify
from kafkalog_spark.recovery.verify_job import (balance, plan_bins, problems_dataframe,
                                                verify_spark)

from test_read_write import records
from test_recover import crashed
from test_verify import REAL_LOG_DIRS



@pytest.fixture()
def damaged(tmp_path: Path) -> Path:
    kl.write_log(records(1500, partitions=2), tmp_path / "logs", codec="none",
                 segment_bytes=16 * 1024, max_batch_records=30)
    seg = sorted((tmp_path / "logs" / "orders-1").glob("*.log"))[2]
    data = bytearray(seg.read_bytes())
    data[int(scan_entries(bytes(data)).position[2]) + 90] ^= 0x40
    seg.write_bytes(data + b"\x01tail")
    (tmp_path / "logs" / "orders-0" / "00000000000000000000.index").unlink()
    crashed(tmp_path / "logs")  # nothing flushed: a broker's load checks every segment
    return tmp_path / "logs"


@pytest.mark.spark
@pytest.mark.parametrize("tasks", [2, 3])  # whole partitions in one job; segments, two jobs
def test_spark_report_equals_local(spark, damaged: Path, tasks: int) -> None:
    from kafkalog_spark.log.discovery import discover

    shape = plan_bins(discover(damaged).all_partition_dirs(), tasks)[0]
    assert shape == {2: "partitions", 3: "segments"}[tasks]
    local = verify(damaged, deep=True)
    sc = spark.sparkContext
    sc.setJobGroup(f"verify-{tasks}", "verify_spark")
    try:
        distributed = verify_spark(spark, damaged, deep=True, tasks=tasks)
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    assert len(sc.statusTracker().getJobIdsForGroup(f"verify-{tasks}")) == {2: 1, 3: 2}[tasks]
    assert not local.ok
    assert distributed.to_dict() == local.to_dict()
    df = problems_dataframe(spark, distributed)
    errors = df.filter("severity = 'error'").select("check", "file", "position").collect()
    assert {(r.check, r.position) for r in errors} == {(p.check, p.position) for p in local.errors()}


@pytest.mark.spark
def test_spark_on_real_dirs(spark, shared_fixtures: Path, tmp_path: Path) -> None:
    dirs = []
    for i, name in enumerate(REAL_LOG_DIRS[:3]):
        dirs.append(tmp_path / f"d{i}")
        shutil.copytree(shared_fixtures / name, dirs[-1])
    report = verify_spark(spark, dirs)  # as JBOD: the same __consumer_offsets in several dirs
    assert report.to_dict() == verify(dirs).to_dict()
    assert {p.message.split(" is present")[0] for p in report.errors()} <= {
        f"__consumer_offsets-{n}" for n in range(50)}


@pytest.mark.spark
def test_cli_spark_flag_and_threshold(spark, damaged: Path) -> None:
    runner = CliRunner()
    by_flag = runner.invoke(cli, ["verify", "--spark", str(damaged)])
    by_size = runner.invoke(cli, ["verify", "--spark-threshold", "1", str(damaged)])
    local = runner.invoke(cli, ["verify", "--local", str(damaged)])
    assert by_flag.exit_code == by_size.exit_code == local.exit_code == 1
    assert by_flag.output == by_size.output == local.output
    assert runner.invoke(cli, ["verify", "--spark", "--local", str(damaged)]).exit_code == 2


@pytest.mark.spark
def test_spark_submit_entry_point(spark, damaged: Path, capsys) -> None:
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "jobs" / "recover.py"
    spec = importlib.util.spec_from_file_location("jobs_recover", path)
    job = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(job)
    assert job.main([str(damaged)]) == 1  # dry run: still damaged
    assert not verify(damaged).ok
    assert job.main([str(damaged), "--execute"]) == 0
    assert verify(damaged).ok and "FAILED" in capsys.readouterr().out


def test_balance_spreads_bytes_evenly() -> None:
    sizes = [100, 90, 50, 40, 30, 5, 5]
    bins = balance(sizes, 2, size=lambda u: u)
    assert sorted(u for b in bins for u in b) == sorted(sizes)
    loads = sorted(sum(b) for b in bins)
    assert loads == [150, 170]  # greedy, largest first into the lightest bin
    assert balance([1, 2], 8, size=lambda u: u) == [[2], [1]]
    assert balance([], 4) == []


def test_plan_bins_prefers_whole_partitions_when_they_balance(tmp_path: Path) -> None:
    from kafkalog_spark.log.discovery import discover

    kl.write_log(records(1200, partitions=4), tmp_path / "even", segment_bytes=8 * 1024)
    parts = discover(tmp_path / "even").all_partition_dirs()
    shape, bins = plan_bins(parts, 2)
    assert shape == "partitions" and len(bins) == 2
    assert sorted(u[0] for b in bins for u in b) == [0, 1, 2, 3]
    # one partition holds most bytes: whole partitions would idle a core, so segments
    big = records(1200, partitions=1)
    small = records(30, partitions=1).set_column(1, "partition", pa.array([1] * 30, pa.int32()))
    kl.write_log(pa.concat_tables([big, small]), tmp_path / "skewed", segment_bytes=8 * 1024)
    parts = discover(tmp_path / "skewed").all_partition_dirs()
    shape, bins = plan_bins(parts, 2)
    assert shape == "segments" and len(bins) == 2
    assert sorted((u[0], u[1]) for b in bins for u in b) == sorted(
        (pi, si) for pi, p in enumerate(parts) for si in range(len(p.segments)))
    assert plan_bins([], 2) == ("segments", [])


def test_plan_bins_caps_segments_per_task(tmp_path: Path) -> None:
    """Many segments make more tasks than cores, so a task's memory does not grow with the
    log dir; every segment is still planned exactly once."""
    from kafkalog_spark.log.discovery import discover

    kl.write_log(records(1200, partitions=6), tmp_path / "many", segment_bytes=2 * 1024,
                 max_batch_records=20)
    parts = discover(tmp_path / "many").all_partition_dirs()
    segments = sum(len(p.segments) for p in parts)
    assert segments >= 60
    shape, bins = plan_bins(parts, 2, max_segments=10)
    assert len(bins) >= segments // 10

    def count(unit) -> int:
        return len(unit[2]) if shape == "partitions" else 1

    planned = sorted((u[0], v[1]) for b in bins for u in b
                     for v in (u[2] if shape == "partitions" else [u]))
    assert planned == sorted((pi, si) for pi, p in enumerate(parts)
                             for si in range(len(p.segments)))
    assert max(sum(count(u) for u in b) for b in bins) <= 2 * 10
    assert len(plan_bins(parts, 2)[1]) == 2  # under the default cap: one task per core


@pytest.mark.spark
def test_a_partition_with_a_snapshot_and_no_segment(spark, damaged: Path) -> None:
    """Tasks get partitions through their segments (the whole-partition bins hold only those
    with segments); one with none still gets its producer snapshots checked, as the local
    verify checks them, in either shape."""
    snapshot = next((damaged / "orders-0").glob("*.snapshot"), None)
    empty = damaged / "orders-2"
    empty.mkdir()
    if snapshot is not None:
        shutil.copy(snapshot, empty / snapshot.name)
    (empty / "00000000000000009999.snapshot").write_bytes(b"not a snapshot")
    local = verify(damaged, deep=True)
    assert any("orders-2" in (p.file or "") for p in local.problems)
    for tasks in (2, 3):
        assert verify_spark(spark, damaged, deep=True, tasks=tasks).to_dict() == \
            local.to_dict(), tasks
