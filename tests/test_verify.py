"""verify: clean logs pass; every kind of damage is reported at the right file and byte."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import crc32c
import pytest
from click.testing import CliRunner

import kafkalog_spark as kl
from kafkalog_spark.cli import cli
from kafkalog_spark.codec import layout as L
from kafkalog_spark.codec.records.scan import scan_entries
from kafkalog_spark.inspect.verify import verify

from test_read_write import records

REAL_LOG_DIRS = ["anchor123__kafka/tmp/kafka-logs", "tuyen-nnt__kafka_2.13-3.0.0/data/kafka",
                 "DonaldY__kafka-2.7.1/kafka-logs", "yuanliubei__kafka-source-code/kafka-logs",
                 "ItumelengMogase__Real-Time-Data-Pipeline-for-Patient-Admissions/kafka-data"]


@pytest.fixture()
def log_dir(tmp_path: Path) -> Path:
    kl.write_log(records(2000), tmp_path / "logs", codec="none", segment_bytes=24 * 1024,
                 max_batch_records=40)
    return tmp_path / "logs"


def segment(log_dir: Path, i: int = 1) -> Path:
    return sorted((log_dir / "orders-0").glob("*.log"))[i]


def only(report, check: str):
    found = [p for p in report.problems if p.check == check and p.severity == "error"]
    assert found, report.problems
    return found[0]


@pytest.mark.parametrize("name", REAL_LOG_DIRS)
def test_real_broker_dirs_verify(shared_fixtures: Path, name: str) -> None:
    report = verify(shared_fixtures / name, deep=True)
    assert report.ok, report.errors()
    assert report.partitions > 0


def test_clean_written_dir(log_dir: Path) -> None:
    report = verify(log_dir, deep=True)
    assert report.ok and not report.problems
    assert report.records == 2000


def test_bit_flip_in_payload_is_a_crc_error(log_dir: Path) -> None:
    seg = segment(log_dir)
    data = bytearray(seg.read_bytes())
    entries = scan_entries(bytes(data))
    pos = int(entries.position[3])
    data[pos + 100] ^= 0x10
    seg.write_bytes(data)
    problem = only(verify(log_dir), "crc")
    assert (problem.file, problem.position, problem.base_offset) == (
        str(seg.resolve()), pos, int(entries.offset[3]))


def test_truncated_tail_and_garbage(log_dir: Path) -> None:
    seg = segment(log_dir)
    data = seg.read_bytes()
    seg.write_bytes(data[:-30])
    problem = only(verify(log_dir, check_indexes=False), "structure")
    last = scan_entries(data)
    assert problem.position == int(last.position[-1])
    seg.write_bytes(data + b"\x01garbage-after-the-end")
    assert only(verify(log_dir, check_indexes=False), "structure").position == len(data)
    seg.write_bytes(data + bytes(4096))
    assert "zero-filled" in only(verify(log_dir, check_indexes=False), "structure").message


def test_absurd_length_field(log_dir: Path) -> None:
    seg = segment(log_dir)
    data = bytearray(seg.read_bytes())
    pos = int(scan_entries(bytes(data)).position[5])
    data[pos + 8:pos + 12] = struct.pack(">i", 0x7FFFFFF0)
    seg.write_bytes(data)
    assert only(verify(log_dir, check_indexes=False), "structure").position == pos


def test_offsets_out_of_order(log_dir: Path) -> None:
    seg = segment(log_dir)
    data = bytearray(seg.read_bytes())
    entries = scan_entries(bytes(data))
    pos = int(entries.position[4])
    # base offset is outside the v2 CRC: rewriting it keeps the batch valid
    data[pos:pos + 8] = struct.pack(">q", int(entries.offset[1]))
    seg.write_bytes(data)
    problem = only(verify(log_dir, check_indexes=False), "offsets")
    assert problem.position == pos


def test_record_damage_found_only_by_deep(log_dir: Path) -> None:
    seg = segment(log_dir)
    data = bytearray(seg.read_bytes())
    entries = scan_entries(bytes(data))
    pos, size = int(entries.position[2]), int(entries.entry_size[2])
    data[pos + L.RECORDS_COUNT_OFFSET:pos + L.RECORDS_OFFSET] = struct.pack(">i", 41)  # was 40
    crc = crc32c.crc32c(bytes(data[pos + L.ATTRIBUTES_OFFSET:pos + size]))
    data[pos + L.CRC_OFFSET:pos + L.CRC_OFFSET + 4] = struct.pack(">I", crc)
    seg.write_bytes(data)
    assert verify(log_dir).ok
    problem = only(verify(log_dir, deep=True), "records")
    assert problem.position == pos and problem.base_offset == int(entries.offset[2])


def test_index_problems(log_dir: Path) -> None:
    seg = segment(log_dir)
    index = seg.with_suffix(".index")
    good = index.read_bytes()
    bad = bytearray(good)
    bad[4:8] = struct.pack(">i", struct.unpack(">i", good[4:8])[0] + 3)  # not an entry start
    index.write_bytes(bad)
    problem = only(verify(log_dir), "index")
    assert problem.file == str(index.resolve()) and problem.position == 0
    index.write_bytes(good + bytes(80))  # preallocated tail on an inactive segment
    assert "zero-filled" in only(verify(log_dir), "index").message
    index.write_bytes(good)
    tindex = seg.with_suffix(".timeindex")
    tindex.write_bytes(tindex.read_bytes()[:-12])  # final max-timestamp entry missing
    assert "largest timestamp" in only(verify(log_dir), "timeindex").message


def test_leftovers_and_missing_dir(log_dir: Path, tmp_path: Path) -> None:
    (log_dir / "orders-0" / "00000000000000000000.log.swap").write_bytes(b"")
    report = verify(log_dir)
    assert report.ok and any(p.check == "files" for p in report.problems)
    (log_dir / "orders-0.0123456789abcdef0123456789abcdef-delete").mkdir()
    (log_dir / "not a partition").mkdir()
    report = verify(log_dir)
    assert any("queued for deletion" in p.message for p in report.problems)
    assert "offline" in only(report, "files").message
    empty = tmp_path / "empty"
    empty.mkdir()
    assert any("no partition dirs" in p.message for p in verify(empty).problems)


def test_cli_exit_codes_and_json(log_dir: Path) -> None:
    runner = CliRunner()
    ok = runner.invoke(cli, ["verify", str(log_dir)])
    assert ok.exit_code == 0 and "OK: no problems found" in ok.output
    seg = segment(log_dir)
    data = bytearray(seg.read_bytes())
    data[200] ^= 1
    seg.write_bytes(data)
    bad = runner.invoke(cli, ["verify", "--json", str(log_dir)])
    assert bad.exit_code == 1
    doc = json.loads(bad.output)
    assert doc["ok"] is False and doc["problems"][0]["check"] == "crc"
    table = runner.invoke(cli, ["verify", str(log_dir)])
    assert table.exit_code == 1 and "FAILED: 1 errors" in table.output


def test_verify_is_read_only(log_dir: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(log_dir, copy)
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in copy.rglob("*") if p.is_file()}
    verify(copy, deep=True)
    after = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in copy.rglob("*") if p.is_file()}
    assert before == after


# --- partition and log-dir level checks ---------------------------------------------------


def _txn_partition(log_dir: Path) -> Path:
    from test_index import marker, txn_batch

    pdir = log_dir / "txn-0"
    pdir.mkdir(parents=True)
    log = (txn_batch(0, 7, 0, 3) + txn_batch(3, 8, 0, 2) + marker(5, 7, 0, 0, 4)
           + marker(6, 8, 0, 1, 4))
    (pdir / "00000000000000000000.log").write_bytes(log)
    return pdir


def test_txn_index_against_markers(tmp_path: Path) -> None:
    from kafkalog_spark.codec.files.index import TxnIndex

    pdir = _txn_partition(tmp_path / "logs")
    txn = pdir / "00000000000000000000.txnindex"
    problem = only(verify(pdir), "txnindex")
    assert "missing" in problem.message
    txn.write_bytes(TxnIndex.from_entries(0, [(7, 0, 5, 3)]).to_bytes())
    assert not [p for p in verify(pdir).problems if p.check == "txnindex"]
    txn.write_bytes(TxnIndex.from_entries(0, [(7, 0, 5, 6)]).to_bytes())  # wrong LSO
    problem = only(verify(pdir), "txnindex")
    assert (problem.file, problem.position) == (str(txn.resolve()), 0) and "(7, 0, 5, 3)" in problem.message
    txn.write_bytes(TxnIndex.from_entries(0, [(7, 0, 5, 3), (8, 3, 6, 7)]).to_bytes())
    assert only(verify(pdir), "txnindex").position == 34


def test_txn_index_of_a_cleaned_segment(tmp_path: Path) -> None:
    """Kafka's cleaner removes an aborted transaction's data, keeps its ABORT marker and, in
    that round, its .txnindex entry (a later round drops both): found by the oracle tests on a
    real 4.1 broker's compacted topic (tests/oracle). Either state verifies; an entry for no
    marker does not."""
    from kafkalog_spark.codec.files.index import TxnIndex
    from test_index import marker, txn_batch

    pdir = tmp_path / "logs" / "txn-0"
    pdir.mkdir(parents=True)
    (pdir / "00000000000000000000.log").write_bytes(
        txn_batch(3, 8, 0, 2) + marker(5, 7, 0, 0, 4) + marker(6, 8, 0, 1, 4))
    txn = pdir / "00000000000000000000.txnindex"
    for entries in ([(7, 0, 5, 3)], []):
        txn.write_bytes(TxnIndex.from_entries(0, entries).to_bytes())
        assert not [p for p in verify(pdir).problems if p.check == "txnindex"], entries
    txn.write_bytes(TxnIndex.from_entries(0, [(7, 0, 4, 3)]).to_bytes())
    assert "1 aborted transactions indexed" in only(verify(pdir), "txnindex").message


def test_producer_snapshot_crc_and_contents(tmp_path: Path) -> None:
    from kafkalog_spark.codec.files.snapshot import (ProducerEntry, ProducerSnapshot,
                                                     rebuild_producer_snapshot)

    pdir = _txn_partition(tmp_path / "logs")
    log = (pdir / "00000000000000000000.log").read_bytes()
    good = rebuild_producer_snapshot([log])
    snap = pdir / "00000000000000000007.snapshot"
    snap.write_bytes(good.to_bytes())
    assert not [p for p in verify(pdir, check_indexes=False).problems if p.check == "snapshot"]
    wrong = ProducerSnapshot((good.entries[0].__class__(**{**good.entries[0].__dict__, "last_sequence": 99}),
                              *good.entries[1:]))
    snap.write_bytes(wrong.to_bytes())
    problem = only(verify(pdir, check_indexes=False), "snapshot")
    assert problem.position == 10 and "last_sequence 99" in problem.message
    ghost = ProducerSnapshot((*good.entries, ProducerEntry(42, 0, 5, 3, 0, 1, -1, -1)))
    snap.write_bytes(ghost.to_bytes())
    assert "producer 42" in only(verify(pdir, check_indexes=False), "snapshot").message
    data = bytearray(good.to_bytes())
    data[20] ^= 1
    snap.write_bytes(data)
    assert "checksum" in only(verify(pdir, check_indexes=False), "snapshot").message
    (pdir / "00000000000000000099.snapshot").write_bytes(good.to_bytes())
    snap.unlink()
    assert "beyond the log end" in only(verify(pdir, check_indexes=False), "snapshot").message


def test_checkpoint_sanity(log_dir: Path) -> None:
    from kafkalog_spark.codec.files.checkpoints import format_offset_checkpoint

    def write(name: str, offset: int) -> Path:
        p = log_dir / name
        p.write_text(format_offset_checkpoint({("orders", 0): offset}))
        return p

    rp = write("recovery-point-offset-checkpoint", 2001)
    problem = only(verify(log_dir), "checkpoint")
    assert problem.file == str(rp.resolve()) and "2000" in problem.message
    write("recovery-point-offset-checkpoint", 2000)
    write("log-start-offset-checkpoint", 5000)
    assert "delete every segment" in only(verify(log_dir), "checkpoint").message
    write("log-start-offset-checkpoint", 10)
    write("cleaner-offset-checkpoint", 3000)
    assert "cleaner" in only(verify(log_dir), "checkpoint").message
    write("cleaner-offset-checkpoint", 5)
    report = verify(log_dir)
    assert report.ok and any("below the log start" in p.message for p in report.problems)
    (log_dir / "replication-offset-checkpoint").write_text("0\n1\nbad line\n")
    assert only(verify(log_dir), "checkpoint").file == str((log_dir / "replication-offset-checkpoint").resolve())


def test_offsets_across_segments(log_dir: Path) -> None:
    seg = segment(log_dir, 2)
    data = bytearray(seg.read_bytes())
    data[0:8] = struct.pack(">q", 5)  # below the previous segment's last offset (and its base)
    seg.write_bytes(data)
    problems = [p for p in verify(log_dir, check_indexes=False).errors() if p.check == "offsets"]
    assert {p.position for p in problems} == {0} and any("previous segment" in p.message for p in problems)


def test_snapshot_timestamp_after_the_cleaner_rebuilt_the_batch():
    """A snapshot taken before the cleaner removed the record carrying a producer's last
    timestamp keeps that timestamp; the rebuilt batch has its kept records' largest (seen on a
    Kafka 4.1 broker). Only a snapshot timestamp below the log's is a problem."""
    from dataclasses import replace

    from kafkalog_spark.codec.files.snapshot import (ProducerEntry, ProducerSnapshot,
                                                     ProducerStateTracker)
    from kafkalog_spark.inspect.verify_partitions import compare_snapshot

    entry = ProducerEntry(16, 0, last_sequence=9, last_offset=277, offset_delta=0,
                          timestamp=1_795_704_235_440)
    tracker = ProducerStateTracker()
    tracker.load_snapshot(ProducerSnapshot((entry,)))
    later = ProducerSnapshot((replace(entry, timestamp=entry.timestamp + 1),))
    assert compare_snapshot(later, tracker, 0, "277.snapshot") == []
    earlier = ProducerSnapshot((replace(entry, timestamp=entry.timestamp - 1),))
    [problem] = compare_snapshot(earlier, tracker, 0, "277.snapshot")
    assert "timestamp 1795704235439 (log says 1795704235440)" in problem.message
