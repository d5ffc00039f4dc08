"""Retention (KAFKA_FORMATS §14): planning rules, execution order, crash safety, CLI."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest

from kafkalog_spark import read_log, verify, write_log
from kafkalog_spark.codec.files import checkpoints as C
from kafkalog_spark.errors import LogDirLockedError
from kafkalog_spark.codec.files import naming as N
from kafkalog_spark.storage.atomic import read_checkpoint_file, write_checkpoint_file
from kafkalog_spark.retention.retain import plan_retention, retain

T0 = 1_700_000_000_000
HOUR = 3_600_000


def make_log(tmp_path: Path, n: int = 60, per_segment_hours: bool = True) -> Path:
    """One partition ``t-0`` whose records are one hour apart, ~10 records per segment."""
    log_dir = tmp_path / "logs"
    table = pa.table({"key": [f"k{i}".encode() for i in range(n)],
                      "value": [b"x" * 100 for _ in range(n)],
                      "timestamp": pa.array([T0 + i * HOUR for i in range(n)], pa.int64())
                      .cast(pa.timestamp("ms"))})
    write_log(table, log_dir, topic="t", partition=0, segment_bytes=1500, max_batch_records=2)
    return log_dir


def segments(log_dir: Path) -> list[int]:
    return sorted(int(p.name.split(".")[0]) for p in (log_dir / "t-0").glob("*.log"))


def offsets(log_dir: Path) -> list[int]:
    return read_log(log_dir).column("offset").to_pylist()


def test_retention_ms_deletes_old_prefix_and_rolls_when_all_expired(tmp_path):
    log_dir = make_log(tmp_path)
    segs = segments(log_dir)
    assert len(segs) >= 5
    now = T0 + 59 * HOUR + 1
    # retention of 25 hours: segments whose newest record is older than now - 25h go
    plans = plan_retention(log_dir, now_ms=now, options={"retention.ms": 25 * HOUR})
    (plan,) = plans
    cut = [d.base_offset for d in plan.deletions]
    assert cut == segs[:len(cut)] and 0 < len(cut) < len(segs)
    first_kept = segs[len(cut)]
    # the last deleted segment's newest record is older than the horizon, the first kept is not
    assert first_kept - 1 < 59 - 25 + 1 <= segs[len(cut) + 1] - 1
    assert plan.new_log_start_offset == first_kept
    assert plan.rolled_at is None and plan.first_kept_base == first_kept
    # everything expired, the active segment too: as Kafka's deleteSegments, an empty segment
    # is rolled at the log end and every old one goes (UnifiedLog.deletableSegments, roll)
    (plan,) = plan_retention(log_dir, now_ms=now + 1000 * HOUR, options={"retention.ms": 1})
    assert [d.base_offset for d in plan.deletions] == segs
    assert plan.rolled_at == plan.new_log_start_offset == plan.first_kept_base == 60
    assert plan.to_dict()["rolled_segment"] == 60
    from click.testing import CliRunner

    from kafkalog_spark.cli import cli

    dry = CliRunner().invoke(cli, ["retain", str(log_dir), "--now", str(now + 1000 * HOUR),
                                   "--config", "retention.ms=1"])
    assert dry.exit_code == 1 and "would roll an empty segment at the log end offset 60" in \
        dry.output


def test_every_segment_expired_leaves_an_empty_segment_at_the_log_end(tmp_path):
    log_dir = make_log(tmp_path)
    pdir = log_dir / "t-0"
    snapshot = (pdir / N.segment_file_name(60, N.SNAPSHOT)).read_bytes()
    done = retain(log_dir, now_ms=T0 + 1000 * HOUR, options={"retention.ms": HOUR}, execute=True)
    assert done.metrics["segments_deleted"] == 6 and done.plans[0].rolled_at == 60
    assert sorted(p.name for p in pdir.iterdir() if p.name[0].isdigit()) == [
        N.segment_file_name(60, kind) for kind in (N.INDEX, N.LOG, N.SNAPSHOT, N.TIME_INDEX)]
    assert all((pdir / N.segment_file_name(60, k)).stat().st_size == 0
               for k in (N.LOG, N.INDEX, N.TIME_INDEX))
    assert (pdir / N.segment_file_name(60, N.SNAPSHOT)).read_bytes() == snapshot  # kept
    # the log starts at its first (only) segment's base: no checkpoint entry, as Kafka
    assert read_checkpoint_file(log_dir / N.LOG_START_OFFSET_CHECKPOINT,
                                C.parse_offset_checkpoint) == {}
    assert offsets(log_dir) == [] and verify(log_dir, deep=True).ok
    # an empty last segment is never deleted: a second run changes nothing
    again = retain(log_dir, now_ms=T0 + 2000 * HOUR, options={"retention.ms": HOUR},
                   execute=True)
    assert again.metrics["segments_deleted"] == 0 and segments(log_dir) == [60]
    # written without a snapshot at the log end: the roll writes the producer state there
    other = make_log(tmp_path / "other")
    (other / "t-0" / N.segment_file_name(60, N.SNAPSHOT)).unlink()
    retain(other, now_ms=T0 + 1000 * HOUR, options={"retention.ms": HOUR}, execute=True)
    assert (other / "t-0" / N.segment_file_name(60, N.SNAPSHOT)).read_bytes() == snapshot


def test_a_log_start_inside_the_first_kept_segment_stays_checkpointed(tmp_path):
    log_dir = make_log(tmp_path)
    segs = segments(log_dir)
    write_checkpoint_file(log_dir / N.LOG_START_OFFSET_CHECKPOINT,
                          C.format_offset_checkpoint({("t", 0): segs[2] + 1}))
    retain(log_dir, now_ms=T0, options={"retention.ms": -1}, execute=True)
    assert segments(log_dir) == segs[2:]
    assert read_checkpoint_file(log_dir / N.LOG_START_OFFSET_CHECKPOINT,
                                C.parse_offset_checkpoint) == {("t", 0): segs[2] + 1}


def test_retention_bytes_keeps_at_least_retention_bytes(tmp_path):
    log_dir = make_log(tmp_path)
    sizes = {int(p.name.split(".")[0]): p.stat().st_size for p in (log_dir / "t-0").glob("*.log")}
    total = sum(sizes.values())
    limit = total // 2
    (plan,) = plan_retention(log_dir, now_ms=T0, options={"retention.bytes": limit,
                                                          "retention.ms": -1})
    left = total - sum(d.size for d in plan.deletions)
    assert left >= limit
    nxt = segments(log_dir)[len(plan.deletions)]
    assert left - sizes[nxt] < limit  # one more would drop below retention.bytes
    (plan,) = plan_retention(log_dir, now_ms=T0, options={"retention.bytes": total + 1})
    assert plan.deletions == ()


def test_log_start_breach_and_compact_policy(tmp_path):
    log_dir = make_log(tmp_path)
    segs = segments(log_dir)
    write_checkpoint_file(log_dir / N.LOG_START_OFFSET_CHECKPOINT,
                          C.format_offset_checkpoint({("t", 0): segs[2] + 1}))
    (plan,) = plan_retention(log_dir, now_ms=T0 + 10**9 * HOUR,
                             options={"cleanup.policy": "compact"})
    assert [d.base_offset for d in plan.deletions] == segs[:2]
    assert all("log start" in d.reason for d in plan.deletions)
    assert plan.new_log_start_offset == segs[2] + 1


def test_high_watermark_guard(tmp_path):
    log_dir = make_log(tmp_path)
    segs = segments(log_dir)
    write_checkpoint_file(log_dir / N.REPLICATION_OFFSET_CHECKPOINT,
                          C.format_offset_checkpoint({("t", 0): segs[2]}))
    (plan,) = plan_retention(log_dir, now_ms=T0 + 1000 * HOUR, options={"retention.ms": 1})
    assert [d.base_offset for d in plan.deletions] == segs[:2]
    (log_dir / N.REPLICATION_OFFSET_CHECKPOINT).unlink()
    (plan,) = plan_retention(log_dir, now_ms=T0 + 1000 * HOUR, options={"retention.ms": 1})
    assert plan.deletions == () and plan.notes


def test_mtime_fallback_when_no_timestamps(tmp_path):
    log_dir = make_log(tmp_path)
    segs = segments(log_dir)
    # an empty time index with a -1 max timestamp everywhere is what v0 data gives; here we
    # drop the time index of the first segment and set its .log mtime far in the past
    first = log_dir / "t-0" / N.segment_file_name(segs[0], N.TIME_INDEX)
    first.write_bytes(b"")
    log = log_dir / "t-0" / N.segment_file_name(segs[0], N.LOG)
    os.utime(log, (1000, 1000))
    (plan,) = plan_retention(log_dir, now_ms=T0 + 1000, options={"retention.ms": HOUR})
    # first segment's newest record (from the .log headers) is T0 + ~9h: not expired at T0+1s
    assert plan.deletions == ()


def test_execute_updates_checkpoint_then_deletes(tmp_path):
    log_dir = make_log(tmp_path)
    before = offsets(log_dir)
    now = T0 + 59 * HOUR
    dry = retain(log_dir, now_ms=now, options={"retention.ms": 25 * HOUR})
    assert not dry.executed and dry.metrics["segments_deleted"] > 0
    assert offsets(log_dir) == before
    labels: list[str] = []
    done = retain(log_dir, now_ms=now, options={"retention.ms": 25 * HOUR}, execute=True,
                  step=labels.append)
    new_start = done.plans[0].new_log_start_offset
    # the new log start checkpointed before anything goes; once the segments are gone it is
    # the first segment's base, and Kafka checkpoints none then
    assert labels[0] == labels[-1] == f"write {N.LOG_START_OFFSET_CHECKPOINT}"
    assert all(not lab.startswith("remove") for lab in labels[:labels.index(
        next(lab for lab in labels if lab.startswith("remove")))])
    ckpt = read_checkpoint_file(log_dir / N.LOG_START_OFFSET_CHECKPOINT, C.parse_offset_checkpoint)
    assert ("t", 0) not in ckpt
    assert offsets(log_dir) == [o for o in before if o >= new_start]
    assert segments(log_dir)[0] == new_start
    assert not list((log_dir / "t-0").glob("*.deleted"))
    assert verify(log_dir, deep=True).ok
    assert done.metrics["segments_deleted"] == len(done.plans[0].deletions)


def test_delete_delay_leaves_deleted_files_until_later_run(tmp_path):
    log_dir = make_log(tmp_path)
    now = T0 + 59 * HOUR
    retain(log_dir, now_ms=now, options={"retention.ms": 25 * HOUR}, execute=True,
           delete_delay_ms=10**12)
    assert list((log_dir / "t-0").glob("*.log.deleted"))
    later = retain(log_dir, now_ms=int(1e15), options={"retention.ms": -1}, execute=True,
                   delete_delay_ms=60_000)
    assert later.removed_deleted_files > 0
    assert not list((log_dir / "t-0").glob("*.deleted"))


def test_refuses_a_locked_log_dir(tmp_path, lock_holder):
    log_dir = make_log(tmp_path)
    lock_holder(log_dir)
    with pytest.raises(LogDirLockedError):
        retain(log_dir, now_ms=T0, execute=True)
    with pytest.raises(LogDirLockedError):
        retain(log_dir, now_ms=T0)


class Crash(Exception):
    pass


@pytest.mark.parametrize("now", [T0 + 59 * HOUR, T0 + 1000 * HOUR], ids=["prefix", "all"])
def test_crash_at_every_step_then_recover(tmp_path, now):
    from kafkalog_spark.recovery.recover import recover

    ref = make_log(tmp_path / "ref")
    opts = {"retention.ms": 25 * HOUR}
    labels: list[str] = []
    plan = retain(ref, now_ms=now, options=opts, execute=True, step=labels.append).plans[0]
    expected = [o for o in range(60) if o >= plan.new_log_start_offset]
    for k in range(len(labels)):
        log_dir = make_log(tmp_path / f"crash{k}")

        def step(label: str, k=k, seen=[0]) -> None:
            if seen[0] == k:
                raise Crash(label)
            seen[0] += 1

        with pytest.raises(Crash):
            retain(log_dir, now_ms=now, options=opts, execute=True, step=step)
        recover(log_dir, execute_plan=True)
        got = offsets(log_dir)
        # records at or above the new start are all there; below it, only whole untouched
        # segments can remain (deleted on the next run), never a part of one
        assert [o for o in got if o >= plan.new_log_start_offset] == expected, labels[k]
        assert verify(log_dir, deep=True).ok, labels[k]
        retain(log_dir, now_ms=now, options=opts, execute=True)
        assert offsets(log_dir) == expected, labels[k]
        assert segments(log_dir) == segments(ref), labels[k]


def test_cli_retain(tmp_path):
    from click.testing import CliRunner

    from kafkalog_spark.cli import cli, main

    log_dir = make_log(tmp_path)
    before = offsets(log_dir)
    args = ["retain", str(log_dir), "--now", str(T0 + 59 * HOUR), "--config",
            f"retention.ms={25 * HOUR}"]
    dry = CliRunner().invoke(cli, args)
    assert dry.exit_code == 1 and "would delete 3 segments" in dry.output
    assert offsets(log_dir) == before
    done = CliRunner().invoke(cli, args + ["--execute", "--json"])
    assert done.exit_code == 0 and '"segments_deleted": 3' in done.output
    assert offsets(log_dir) == before[30:]
    assert main(["retain", str(log_dir), "--config", "retention.ms=abc"]) == 2
