"""recover: every kind of damage cut at the right byte, nothing lost (records and quarantine
checked byte for byte), idempotent, and a run killed at any step completed by the next one."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner

import kafkalog_spark as kl
from kafkalog_spark.cli import cli
from kafkalog_spark.codec.files import checkpoints as C
from kafkalog_spark.codec.files.snapshot import read_snapshot
from kafkalog_spark.codec.records.scan import scan_entries
from kafkalog_spark.errors import InvalidOptionError, LogDirLockedError
from kafkalog_spark.codec.files import naming as N
from kafkalog_spark.log.swap import NewSegment, replace_segments
from kafkalog_spark.inspect.verify import verify
from kafkalog_spark.recovery.quarantine import read_manifests
from kafkalog_spark.recovery.rebuild import rebuild_indexes
from kafkalog_spark.recovery.recover import recover

from test_index import marker, txn_batch
from test_read_write import records
from test_verify import REAL_LOG_DIRS

COLS = ["topic", "partition", "offset", "key", "value", "timestamp"]


class Crash(BaseException):
    """Stands for a killed process: nothing after it runs, no cleanup code is special-cased."""


@pytest.fixture()
def log_dir(tmp_path: Path) -> Path:
    kl.write_log(records(1200), tmp_path / "logs", codec="none", segment_bytes=24 * 1024,
                 max_batch_records=40)
    return tmp_path / "logs"


def segments(log_dir: Path) -> list[Path]:
    return sorted((log_dir / "orders-0").glob("*.log"))


def rows(path: Path) -> list[dict]:
    return kl.read_log(path).select(COLS).to_pylist()


def snapshot_files(log_dir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(log_dir)): p.read_bytes() for p in sorted(log_dir.rglob("*"))
            if p.is_file() and p.name != N.LOCK_FILE}


def quarantined(log_dir: Path) -> list[dict]:
    root = log_dir.with_name(log_dir.name + ".kafkalog-quarantine")
    out = []
    for doc in read_manifests(root):
        for e in doc["entries"]:
            data = (Path(doc["run"]) / e["stored"]).read_bytes()
            assert hashlib.sha256(data).hexdigest() == e["sha256"]
            out.append({**e, "data": data})
    return out


def crashed(root: Path) -> None:
    """A crash with nothing flushed: no recovery point and no clean-shutdown marker in the log
    dirs under ``root``, so a broker's load recovers (and checks) every segment."""
    for name in (N.RECOVERY_POINT_CHECKPOINT, N.CLEAN_SHUTDOWN_FILE):
        for path in [root / name, *root.rglob(name)]:
            path.unlink(missing_ok=True)


def damage(seg: Path, kind: str) -> tuple[int, int]:
    """Damage one segment; returns (cut position, first offset lost)."""
    data = bytearray(seg.read_bytes())
    t = scan_entries(bytes(data))
    pos, off = int(t.position[3]), int(t.offset[3])
    if kind == "payload-bit":
        data[pos + 150] ^= 0x04
    elif kind == "header-bit":
        data[pos + 23] ^= 0x01  # attributes: inside the CRC-covered header
    elif kind == "absurd-length":
        data[pos + 8:pos + 12] = struct.pack(">i", 0x7FFFFFF0)
    elif kind == "truncated":
        pos, off = int(t.position[-1]), int(t.offset[-1])
        data = data[:-25]
    elif kind == "garbage":
        pos, off = len(data), int(t.last_offset[-1]) + 1
        data += b"\x07not a batch at all, just junk"
    elif kind == "zero-tail":
        pos, off = len(data), int(t.last_offset[-1]) + 1
        data += bytes(8192)
    elif kind == "offset-order":
        data[pos:pos + 8] = struct.pack(">q", int(t.offset[1]))
    seg.write_bytes(data)
    return pos, off


@pytest.mark.parametrize("kind", ["payload-bit", "header-bit", "absurd-length", "truncated",
                                  "garbage", "zero-tail", "offset-order"])
def test_damage_is_cut_losing_nothing(log_dir: Path, kind: str) -> None:
    before = rows(log_dir)
    segs = segments(log_dir)
    target = segs[1]
    original = {p: p.read_bytes() for p in segs}
    pos, lost_from = damage(target, kind)
    damaged = target.read_bytes()
    report = verify(log_dir)
    assert not report.ok
    assert any(p.file == str(target.resolve()) and p.position == pos for p in report.errors()), report.errors()
    # below the recovery point (write_log leaves it at the log end) the broker's load does not
    # look: recover leaves the damage too, and names it
    kept = recover(log_dir, execute_plan=True)
    assert kept.partitions[0].cut is None and target.read_bytes() == damaged
    assert [line for line in kept.partitions[0].left if line.startswith(f"{target.name}: ")
            and f" at byte {pos} (base offset " in line and "--salvage" in line]
    crashed(log_dir)

    plan = recover(log_dir)
    assert plan.changed and not plan.executed
    assert snapshot_files(log_dir)[str(target.relative_to(log_dir))] == damaged  # dry run
    done = recover(log_dir, execute_plan=True)
    assert done.partitions[0].cut["position"] == pos
    assert verify(log_dir, deep=True).ok, verify(log_dir).problems
    assert rows(log_dir) == [r for r in before if r["offset"] < lost_from]
    assert target.read_bytes() == damaged[:pos]
    # the quarantine holds exactly the cut bytes and the later segments
    q = quarantined(log_dir)
    cut = [e for e in q if e["kind"] == "range"]
    assert len(cut) == 1 and cut[0]["data"] == damaged[pos:] and cut[0]["start"] == pos
    moved = {Path(e["file"]).name: e["data"] for e in q if e["kind"] == "file"}
    for later in segs[2:]:
        assert moved[later.name] == original[later]
    # idempotent
    state = snapshot_files(log_dir)
    again = recover(log_dir, execute_plan=True)
    assert not again.changed and snapshot_files(log_dir) == state


def test_clean_dir_gets_only_what_a_brokers_load_adds(log_dir: Path) -> None:
    """write_log leaves no clean-shutdown marker and the recovery point at the log end: a
    broker's load recovers the active segment (the one holding the recovery point), whose
    producer-state rebuild takes snapshots at the last two segment bases. recover adds those
    and nothing else, quarantines nothing, and a second run finds nothing to do."""
    state = snapshot_files(log_dir)
    bases = [int(s.name[:20]) for s in segments(log_dir)]
    done = recover(log_dir, execute_plan=True)
    added = {str(Path("orders-0") / N.segment_file_name(o, N.SNAPSHOT)) for o in bases[-2:]}
    assert {str(Path(a.path).relative_to(log_dir)) for a in done.actions} == added
    after = snapshot_files(log_dir)
    assert {n: c for n, c in after.items() if n not in added} == state
    assert not log_dir.with_name("logs.kafkalog-quarantine").exists()
    assert not recover(log_dir, execute_plan=True).changed and snapshot_files(log_dir) == after


def test_producer_snapshots_where_a_brokers_load_leaves_them(log_dir: Path) -> None:
    """After a crash the loader recovers every segment from the one holding the recovery point
    and leaves a snapshot at each one's base and at the log end; it deletes those at or below
    the log start and those at no segment base (found against a real 4.1 broker:
    tests/oracle/test_loader_oracle.py)."""
    pdir = log_dir / "orders-0"
    bases = [int(s.name[:20]) for s in segments(log_dir)]
    end = next(pdir.glob("*.snapshot"))
    state = end.read_bytes()
    (pdir / N.segment_file_name(0, N.SNAPSHOT)).write_bytes(state)  # at the log start
    (pdir / N.segment_file_name(bases[1] + 1, N.SNAPSHOT)).write_bytes(state)  # a stray
    points = log_dir / N.RECOVERY_POINT_CHECKPOINT
    points.write_text(C.format_offset_checkpoint({("orders", 0): bases[2] + 1}))
    (log_dir / N.CLEAN_SHUTDOWN_FILE).write_text("")  # a clean shutdown: no segment recovered
    recover(log_dir, execute_plan=True)
    assert sorted(pdir.glob("*.snapshot")) == [end]
    (log_dir / N.CLEAN_SHUTDOWN_FILE).unlink()  # a crash: segments from bases[2] on recovered
    recover(log_dir, execute_plan=True)
    assert sorted(int(p.name[:20]) for p in pdir.glob("*.snapshot")) == [*bases[2:], 1200]
    points.write_text(C.format_offset_checkpoint({("orders", 0): 0}))
    report = recover(log_dir, execute_plan=True)
    assert sorted(int(p.name[:20]) for p in pdir.glob("*.snapshot")) == [*bases[1:], 1200]
    assert {a.kind for a in report.actions} == {"write-file"}  # only the snapshots
    assert verify(log_dir).ok and not verify(log_dir).problems
    assert not recover(log_dir, execute_plan=True).changed
    names = {Path(e["file"]).name for e in quarantined(log_dir)}
    assert names == {N.segment_file_name(0, N.SNAPSHOT), N.segment_file_name(bases[1] + 1, N.SNAPSHOT)}


def test_indexes_and_checkpoints_repaired(log_dir: Path) -> None:
    segs = segments(log_dir)
    good_index = segs[0].with_suffix(".index").read_bytes()
    segs[0].with_suffix(".index").unlink()
    segs[1].with_suffix(".timeindex").write_bytes(b"\x01" * 24)
    segs[-2].with_suffix(".index").write_bytes(segs[-2].with_suffix(".index").read_bytes() + bytes(800))
    rp = log_dir / N.RECOVERY_POINT_CHECKPOINT
    rp.write_text(C.format_offset_checkpoint({("orders", 0): 999_999}))
    (log_dir / N.CLEANER_OFFSET_CHECKPOINT).write_text(C.format_offset_checkpoint({("orders", 0): 5_000}))
    report = verify(log_dir)
    checks = {p.check for p in report.errors()}
    assert {"timeindex", "index", "checkpoint"} <= checks
    # the broker's load recovers segment 0 (no .index) and the active one; it trusts the
    # others' indexes, and so does recover, which names them
    done = recover(log_dir, execute_plan=True)
    assert segs[0].with_suffix(".index").read_bytes() == good_index
    assert [line.split(":")[0] for p in done.partitions for line in p.left] == [
        segs[1].with_suffix(".timeindex").name, segs[-2].with_suffix(".index").name]
    assert {p.check for p in verify(log_dir).errors()} == {"timeindex", "index"}
    assert not recover(log_dir, execute_plan=True).changed
    rebuild_indexes(log_dir, execute_plan=True)  # what the left lines advise
    assert verify(log_dir).ok and not verify(log_dir).problems
    assert C.parse_offset_checkpoint(rp.read_text()) == {("orders", 0): 1200}
    assert C.parse_offset_checkpoint((log_dir / N.CLEANER_OFFSET_CHECKPOINT).read_text()) == {("orders", 0): 0}
    replaced = [e for e in quarantined(log_dir) if e["kind"] == "replaced"]
    assert any(e["data"] == b"\x01" * 24 for e in replaced)


def test_leftovers_and_corrupt_snapshot(log_dir: Path) -> None:
    pdir = log_dir / "orders-0"
    (pdir / "00000000000000099999.index").write_bytes(bytes(16))  # orphan
    (pdir / "leader-epoch-checkpoint.tmp").write_text("junk")
    snap = next(pdir.glob("*.snapshot"))
    good = snap.read_bytes()
    snap.write_bytes(good[:2] + bytes([good[2] ^ 0xFF]) + good[3:])
    assert any(p.check == "snapshot" for p in verify(log_dir).errors())
    recover(log_dir, execute_plan=True)
    report = verify(log_dir)
    assert report.ok and not report.problems
    assert snap.read_bytes() == good  # rebuilt from the batch headers
    names = {Path(e["file"]).name for e in quarantined(log_dir)}
    assert {"00000000000000099999.index", "leader-epoch-checkpoint.tmp", snap.name} <= names


def test_interrupted_swap_is_completed(log_dir: Path) -> None:
    before = rows(log_dir)
    pdir = log_dir / "orders-0"
    segs = segments(log_dir)
    merged = segs[1].read_bytes() + segs[2].read_bytes()
    new = [NewSegment(int(segs[1].name[:20]), merged)]
    steps: list[str] = []

    def crash(label: str) -> None:
        steps.append(label)
        if "-> 00000000000000000" in label and label.startswith("rename") and ".deleted" in label:
            raise Crash

    with pytest.raises(Crash):
        replace_segments(pdir, new, [int(segs[1].name[:20]), int(segs[2].name[:20])], step=crash)
    assert list(pdir.glob("*.swap")) and any(p.check == "files" for p in verify(log_dir).problems)
    state = snapshot_files(log_dir)
    plan = recover(log_dir)  # the dry run plans the rest on the outcome of the swap passes
    assert any(a.kind == "rename" for a in plan.actions) and snapshot_files(log_dir) == state
    recover(log_dir, execute_plan=True)
    assert not list(pdir.glob("*.swap")) and not list(pdir.glob("*.deleted"))
    assert segs[1].read_bytes() == merged and not segs[2].exists()
    assert verify(log_dir).ok and rows(log_dir) == before


def test_marker_damage_and_txn_index(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    pdir = log_dir / "txn-0"
    pdir.mkdir(parents=True)
    log = (txn_batch(0, 7, 0, 3) + txn_batch(3, 8, 0, 2) + marker(5, 7, 0, 0, 4)
           + marker(6, 8, 0, 1, 4) + txn_batch(7, 7, 0, 2))
    (pdir / "00000000000000000000.log").write_bytes(log)
    (log_dir / N.RECOVERY_POINT_CHECKPOINT).write_text(C.format_offset_checkpoint({}))
    report = verify(log_dir)
    assert any(p.check == "txnindex" and "missing" in p.message for p in report.errors())
    recover(log_dir, execute_plan=True)
    assert verify(log_dir).ok, verify(log_dir).problems
    from kafkalog_spark.codec.files.index import read_txn_index
    txn = read_txn_index((pdir / "00000000000000000000.txnindex").read_bytes(), 0)
    assert (txn.producer_id.tolist(), txn.first_offset.tolist(), txn.last_offset.tolist(),
            txn.last_stable_offset.tolist()) == ([7], [0], [5], [3])
    # a marker whose record cannot be parsed: Kafka stops there, so do we
    data = bytearray((pdir / "00000000000000000000.log").read_bytes())
    t = scan_entries(bytes(data))
    pos = int(t.position[3])
    bad = bytearray(marker(6, 8, 0, 9, 4))  # control type 9 is not a transaction marker
    data[pos:pos + len(bad)] = bad
    (pdir / "00000000000000000000.log").write_bytes(data)
    assert not verify(log_dir).ok
    done = recover(log_dir, execute_plan=True)
    assert done.partitions[0].cut["position"] == pos
    assert verify(log_dir).ok, verify(log_dir).problems


def test_refuses_locked_dir_and_bad_paths(log_dir: Path, tmp_path: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from kafkalog_spark.storage.lock import hold_lock\n"
        f"with hold_lock({str(log_dir)!r}):\n    print('held', flush=True); time.sleep(60)")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(LogDirLockedError):
            recover(log_dir)
        result = CliRunner().invoke(cli, ["recover", str(log_dir)])
        assert result.exit_code != 0
    finally:
        holder.kill()
        holder.wait()
    with pytest.raises(InvalidOptionError):
        recover(log_dir / "orders-0")
    with pytest.raises(InvalidOptionError):
        recover(log_dir, quarantine_dir=log_dir / "q")


def _crash_run(log_dir: Path, crash_at: int) -> None:
    count = 0

    def step(label: str) -> None:
        nonlocal count
        count += 1
        if count == crash_at:
            raise Crash(label)

    with pytest.raises(Crash):
        recover(log_dir, execute_plan=True, step=step)


def test_killed_at_every_step_then_completed(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    kl.write_log(records(500), log_dir, segment_bytes=16 * 1024, max_batch_records=40)
    assert len(segments(log_dir)) >= 3
    damage(segments(log_dir)[1], "payload-bit")
    crashed(log_dir)
    pdir = log_dir / "orders-0"
    (pdir / "00000000000000099999.index").write_bytes(bytes(16))
    segments(log_dir)[0].with_suffix(".index").unlink()
    reference = tmp_path / "reference" / "logs"
    shutil.copytree(log_dir, reference)
    labels: list[str] = []
    recover(reference, execute_plan=True, step=labels.append)
    expected = snapshot_files(reference)
    expected_cut = {(Path(e["file"]).name, e["start"], e["end"], e["sha256"]) for e in quarantined(reference)}
    assert len(labels) > 10
    for k in range(1, len(labels) + 1):
        work = tmp_path / f"run{k}" / "logs"
        shutil.copytree(log_dir, work)
        _crash_run(work, k)
        recover(work, execute_plan=True)
        assert snapshot_files(work) == {n: c for n, c in expected.items()}, labels[k - 1]
        got = {(Path(e["file"]).name, e["start"], e["end"], e["sha256"]) for e in quarantined(work)}
        assert got == expected_cut, labels[k - 1]
        docs = read_manifests(work.with_name("logs.kafkalog-quarantine"))
        assert len(docs) == 1 and docs[0]["complete"]
        shutil.rmtree(work.parent)


def test_killed_process_with_os_exit(log_dir: Path) -> None:
    damage(segments(log_dir)[1], "garbage")
    crashed(log_dir)
    script = (
        "import os, sys\nfrom kafkalog_spark.recovery.recover import recover\n"
        "n = 0\ndef step(label):\n    global n\n    n += 1\n"
        "    if n == int(sys.argv[2]) and 'truncate' in label or n > 50: os._exit(86)\n"
        "recover(sys.argv[1], execute_plan=True, step=step)\n")
    labels: list[str] = []
    shutil.copytree(log_dir, log_dir.with_name("probe"))
    recover(log_dir.with_name("probe"), execute_plan=True, step=labels.append)
    k = next(i for i, label in enumerate(labels, 1) if label.startswith("truncate"))
    proc = subprocess.run([sys.executable, "-c", script, str(log_dir), str(k)], env=os.environ)
    assert proc.returncode == 86
    assert not verify(log_dir).ok  # killed before the truncation
    recover(log_dir, execute_plan=True)
    assert verify(log_dir).ok


def test_cli_dry_run_and_json(log_dir: Path) -> None:
    damage(segments(log_dir)[2], "truncated")
    crashed(log_dir)
    runner = CliRunner()
    dry = runner.invoke(cli, ["recover", str(log_dir)])
    assert dry.exit_code == 1 and "--execute" in dry.output and "cut" in dry.output
    done = runner.invoke(cli, ["recover", "--execute", "--json", str(log_dir)])
    assert done.exit_code == 0
    doc = json.loads(done.output)
    assert doc["executed"] and doc["partitions"][0]["cut"]["reason"]
    assert runner.invoke(cli, ["recover", str(log_dir)]).exit_code == 0


@pytest.mark.fixtures
@pytest.mark.parametrize("name", REAL_LOG_DIRS)
def test_real_dirs_recover_and_damage(shared_fixtures: Path, tmp_path: Path, name: str) -> None:
    work = tmp_path / "logs"
    shutil.copytree(shared_fixtures / name, work)
    for lock in work.rglob(N.LOCK_FILE):
        lock.unlink()
    recover(work, execute_plan=True)
    assert verify(work, deep=True).ok
    assert not recover(work).changed
    # damage the biggest segment's last batch and recover again
    seg = max(work.rglob("*.log"), key=lambda p: p.stat().st_size)
    data = bytearray(seg.read_bytes())
    t = scan_entries(bytes(data))
    before = kl.read_log(seg.parent, include_control=True).select(["offset"]).to_pylist()
    pos = int(t.position[-1])
    data[pos + t.entry_size[-1] - 1] ^= 0xFF
    seg.write_bytes(data)
    crashed(work)
    done = recover(work, execute_plan=True)
    assert verify(work, deep=True).ok
    after = kl.read_log(seg.parent, include_control=True).select(["offset"]).to_pylist()
    assert after == [r for r in before if r["offset"] < int(t.offset[-1])]
    cut = [e for e in quarantined(work) if e["kind"] == "range"]
    assert cut[-1]["data"] == bytes(data[pos:]) and done.changed


def test_leader_epochs_rebuilt_from_batch_headers(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    kl.write_log(records(300), log_dir, segment_bytes=8 * 1024, leader_epoch=2, max_batch_records=20)
    kl.write_log(records(300, seed=2), log_dir, segment_bytes=8 * 1024, leader_epoch=5,
                 max_batch_records=20)
    epochs = log_dir / "orders-0" / N.LEADER_EPOCH_CHECKPOINT
    good = epochs.read_text()
    assert C.parse_leader_epoch_checkpoint(good) == [C.EpochEntry(2, 0), C.EpochEntry(5, 300)]
    epochs.write_text(C.format_leader_epoch_checkpoint([C.EpochEntry(2, 0), C.EpochEntry(7, 900)]))
    assert "beyond the log end" in [p for p in verify(log_dir).errors() if p.check == "checkpoint"][0].message
    recover(log_dir, execute_plan=True)
    assert epochs.read_text() == good and verify(log_dir).ok
    epochs.unlink()
    recover(log_dir, execute_plan=True)
    assert epochs.read_text() == good
    # cut inside the epoch-5 part: its entry stays; cut before it: the entry goes
    crashed(log_dir)
    seg = [p for p in segments(log_dir) if int(p.name[:20]) >= 300][0]
    seg.write_bytes(seg.read_bytes()[:-7])
    recover(log_dir, execute_plan=True)
    assert C.parse_leader_epoch_checkpoint(epochs.read_text())[-1].epoch == 5
    seg.write_bytes(b"\x00" * 3)  # nothing valid left from offset 300 on
    recover(log_dir, execute_plan=True)
    assert C.parse_leader_epoch_checkpoint(epochs.read_text()) == [C.EpochEntry(2, 0)]
    assert verify(log_dir).ok


def test_a_recovered_segments_indexes_follow_the_topics_index_interval(tmp_path: Path) -> None:
    """The broker's load rebuilds the active segment's indexes with the topic's
    index.interval.bytes, which the KRaft metadata log records: a log written at 1024 keeps its
    index when the metadata says 1024, and gets Kafka's 4096 when it says nothing."""
    from test_tiered_maintenance import _topic_config

    rows = [{"key": f"k{i % 7}".encode(), "value": (b"v%05d" % i) * 20} for i in range(600)]
    for name, configured in (("told", True), ("untold", False)):
        log_dir = tmp_path / name
        kl.write_log(pa.Table.from_pylist(rows), log_dir, topic="orders", segment_bytes=8 << 10,
                     max_batch_records=20, index_interval_bytes=1024)
        if configured:
            _topic_config(log_dir, "orders", "index.interval.bytes", "1024")
        active = segments(log_dir)[-1].with_suffix(".index")
        written = active.read_bytes()
        done = recover(log_dir, execute_plan=True)
        rebuilt = [a for a in done.actions if a.path == str(active)]
        assert bool(rebuilt) != configured, name
        assert (active.read_bytes() == written) == configured
        assert len(active.read_bytes()) < len(written) or configured
        assert not recover(log_dir, execute_plan=True).changed


def test_a_snapshot_load_expires_idle_producers_as_the_broker_does(tmp_path: Path) -> None:
    """ProducerStateManager.loadFromSnapshot leaves out a producer idle for
    producer.id.expiration.ms (1 day) with no transaction open. After a crash with everything
    flushed the load recovers the active segment from the snapshot at its base: the snapshot it
    takes at the log end then lacks producer 7 (idle 2 days), keeps 9 (an hour) and 11 (idle 2
    days, but a transaction open). As of the data's own time nobody expires."""
    from test_compaction import build_partition, rec
    from test_recover_loaded_segments import _stopped

    now = 1_800_000_000_000
    day = 86_400_000
    old = dict(producer_epoch=0, base_sequence=0)
    log_dir = tmp_path / "logs"
    pdir = build_partition(log_dir, [
        [rec(0, b"a", b"1", now - 2 * day, producer_id=7, **old),
         rec(1, b"b", b"2", now - 3600_000, producer_id=9, **old),
         rec(2, b"c", b"3", now - 2 * day, producer_id=11, is_transactional=True, **old)],
        [rec(3, b"d", b"4", now - 3600_000)]])
    _stopped(log_dir, 4, clean=False)
    recover(log_dir, execute_plan=True, now_ms=now - 3 * day)  # no producer idle yet
    end = pdir / N.segment_file_name(4, N.SNAPSHOT)
    ids = lambda p: sorted(e.producer_id for e in read_snapshot(p.read_bytes()).entries)
    assert ids(pdir / N.segment_file_name(3, N.SNAPSHOT)) == ids(end) == [7, 9, 11]
    assert not recover(log_dir, now_ms=now - 3 * day).changed
    done = recover(log_dir, execute_plan=True, now_ms=now)
    assert [Path(a.path).name for a in done.actions] == [end.name]
    assert ids(end) == [9, 11] and ids(pdir / N.segment_file_name(3, N.SNAPSHOT)) == [7, 9, 11]
    assert not recover(log_dir, now_ms=now).changed  # the broker's next restart: the same
    report = verify(log_dir)
    assert report.ok and [p.message for p in report.problems] == [
        "producer 7 of the log is not in the snapshot (expired?)"]
