"""Log dir discovery over real broker data, crash leftovers, special dirs, JBOD and symlinks."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from kafkalog_spark.codec.records.scan import (STOP_END, STOP_PARTIAL_ENTRY, STOP_SIZE_TOO_SMALL,
                                               scan_entries)
from kafkalog_spark.errors import KafkaLogError, LogDirError
from kafkalog_spark.log.discovery import discover
from kafkalog_spark.log.segment_info import describe_segment, log_tail, next_offset

ANCHOR = "anchor123__kafka/tmp/kafka-logs"
TUYEN = "tuyen-nnt__kafka_2.13-3.0.0/data/kafka"
KRAFT = "ItumelengMogase__Real-Time-Data-Pipeline-for-Patient-Admissions/kafka-data"
DONALD = "DonaldY__kafka-2.7.1/kafka-logs"
YUAN = "yuanliubei__kafka-source-code/kafka-logs"
ALL_LOG_DIRS = [ANCHOR, "anchor123__kafka/tmp/kafka-logs-1", TUYEN, KRAFT, DONALD, YUAN]
UUID = "0123456789abcdef0123456789abcdef"


def copy_writable(src: Path, dst: Path) -> Path:
    """Copy fixture data (stored read-only) so a test can add files to it."""
    shutil.copytree(src, dst, copy_function=shutil.copyfile, symlinks=True)
    for root, dirs, _ in os.walk(dst):
        for d in dirs:
            os.chmod(Path(root) / d, 0o755)
    os.chmod(dst, 0o755)
    return dst


def names(parts) -> list[str]:
    return [p.name for p in parts]


def test_anchor_log_dir(shared_fixtures: Path) -> None:
    found = discover(shared_fixtures / ANCHOR)
    (d,) = found.log_dirs
    got = names(d.partitions)
    assert {"test-0", "__consumer_offsets-20", "__consumer_offsets-21"} <= set(got)
    assert len(got) == 52 and got == sorted(got, key=lambda n: (n.rsplit("-", 1)[0],
                                                                int(n.rsplit("-", 1)[1])))
    assert d.meta_properties == {"broker.id": "0", "version": "0"}
    assert d.lock_file and d.lock_holder is None and not d.clean_shutdown
    assert len(d.checkpoints) == 4 and d.metadata_log is None
    assert not (d.special or d.leftovers or d.unknown or found.duplicates)
    (test0,) = [p for p in d.partitions if p.name == "test-0"]
    assert [s.base_offset for s in test0.segments] == [0]
    assert test0.leader_epoch_checkpoint and not test0.partition_metadata
    info = describe_segment(test0.segments[0])
    assert (info.first_offset, info.last_offset, info.next_offset, info.batches) == (0, 8, 9, 9)
    assert info.magics == (2,) and info.codecs == ("none",) and info.clean


def test_tuyen_log_dir(shared_fixtures: Path) -> None:
    (d,) = discover(shared_fixtures / TUYEN).log_dirs
    by_name = {p.name: p for p in d.partitions}
    for n in ("my-first-topic-0", "my-first-topic-1", "my-first-topic-2",
              "__consumer_offsets-13"):
        assert n in by_name
    assert by_name["my-first-topic-0"].partition_metadata
    assert names(by_name["__consumer_offsets-13"].snapshots) == ["00000000000000003093.snapshot"]
    info = describe_segment(by_name["__consumer_offsets-13"].segments[0])
    assert (info.next_offset, info.records) == (3093, 3093)
    assert d.meta_properties is not None and d.meta_properties["cluster.id"]


def test_kraft_log_dir(shared_fixtures: Path) -> None:
    (d,) = discover(shared_fixtures / KRAFT).log_dirs
    assert d.meta_properties is not None and d.meta_properties["version"] == "1"
    assert d.meta_properties["directory.id"] == "ROP8qUaSlk7r55i85yz4Cg"
    assert d.clean_shutdown and not d.unknown
    meta = d.metadata_log
    assert meta is not None and meta.name == "__cluster_metadata-0"
    assert "__cluster_metadata-0" not in names(d.partitions)
    assert names(meta.kraft_snapshots) == [
        "00000000000000007364-0000000001.checkpoint",
        "00000000000000021265-0000000006.checkpoint",
        "00000000000000060500-0000000025.checkpoint",
    ]
    assert names(meta.snapshots) == ["00000000000000053298.snapshot",
                                     "00000000000000066046.snapshot"]
    # the fixture leaves the metadata .log out, so its indexes are orphans
    assert not meta.segments
    assert names(meta.orphan_indexes) == ["00000000000000000000.index",
                                          "00000000000000000000.timeindex"]
    assert "__transaction_state-44" in names(d.partitions)


def test_donald_compacted_offsets_topics(shared_fixtures: Path) -> None:
    (d,) = discover(shared_fixtures / DONALD).log_dirs
    by_name = {p.name: p for p in d.partitions}
    bases = {n: [s.base_offset for s in by_name[n].segments]
             for n in ("__consumer_offsets-17", "__consumer_offsets-28", "__consumer_offsets-39")}
    assert bases == {"__consumer_offsets-17": [0, 1], "__consumer_offsets-28": [0, 2],
                     "__consumer_offsets-39": [0, 18]}
    seg = by_name["__consumer_offsets-28"].segments
    assert seg[0].index_size == 0 and seg[0].timeindex_size == 12 and seg[1].index is None
    # compaction removed offset 0: the first batch starts above the segment's base offset
    info = describe_segment(seg[0])
    assert (info.base_offset, info.first_offset, info.next_offset) == (0, 1, 2)
    assert names(by_name["__consumer_offsets-28"].snapshots) == [
        "00000000000000000002.snapshot", "00000000000000000003.snapshot"]


@pytest.mark.parametrize("rel", ALL_LOG_DIRS)
def test_ranges_match_the_entry_walk(shared_fixtures: Path, rel: str) -> None:
    found = discover(shared_fixtures / rel)
    n = 0
    for part in found.all_partition_dirs():
        prev_next = None
        for seg in part.segments:
            data = np.fromfile(seg.log, dtype=np.uint8)
            table = scan_entries(data)
            info = describe_segment(seg)
            assert info.size == seg.log_size == len(data)
            assert info.batches == len(table)
            assert info.valid_bytes == table.stop_position and info.stop_code == table.stop_code
            if len(table):
                assert info.first_offset == int(table.offset[0])
                assert info.last_offset == int(table.last_offset[-1])
                assert info.next_offset == info.last_offset + 1
                assert info.first_offset >= seg.base_offset
            else:
                assert info.next_offset == seg.base_offset
            if prev_next is not None:
                assert seg.base_offset >= prev_next  # segments do not overlap
            prev_next = info.next_offset
            n += 1
    assert n > 0 or rel.endswith("kafka-logs-1")


def test_leftovers_orphans_and_special_dirs(shared_fixtures: Path, tmp_path: Path) -> None:
    root = tmp_path / "logs"
    root.mkdir()
    (root / ".lock").touch()
    part = copy_writable(shared_fixtures / DONALD / "__consumer_offsets-17",
                         root / "__consumer_offsets-17")
    for leftover in ("00000000000000000001.log.deleted", "00000000000000000001.index.cleaned",
                     "00000000000000000001.log.swap", "00000000000000000001.snapshot.deleted",
                     "leader-epoch-checkpoint.tmp"):
        (part / leftover).write_bytes(b"")
    (part / "00000000000000000099.index").write_bytes(b"")  # no 99.log: orphaned
    (part / "notes.txt").write_text("x")
    copy_writable(part, root / f"__consumer_offsets-17.{UUID}-delete")
    copy_writable(part, root / f"orders-3.{UUID}-stray")
    (root / "remote-log-index-cache").mkdir()
    (root / "not a partition").mkdir()
    (root / "recovery-point-offset-checkpoint.tmp").write_text("0\n0\n")

    (d,) = discover(root).log_dirs
    (p,) = d.partitions
    assert names(p.leftovers) == [
        "00000000000000000001.index.cleaned", "00000000000000000001.log.deleted",
        "00000000000000000001.log.swap", "00000000000000000001.snapshot.deleted",
        "leader-epoch-checkpoint.tmp"]
    assert names(p.orphan_indexes) == ["00000000000000000099.index"]
    assert names(p.unknown) == ["notes.txt"]
    assert [s.base_offset for s in p.segments] == [0, 1]
    assert [(s.topic, s.partition, s.kind, s.uuid) for s in d.special] == [
        ("__consumer_offsets", 17, "delete", UUID), ("orders", 3, "stray", UUID)]
    assert names(d.skipped) == ["remote-log-index-cache"]
    assert names(d.unknown) == ["not a partition"]
    assert names(d.leftovers) == ["recovery-point-offset-checkpoint.tmp"]
    assert d.lock_file and d.lock_holder is None and d.meta_properties is None
    assert not discover(root).duplicates  # -delete/-stray copies are not replicas


def test_jbod_duplicates_and_future_replica(shared_fixtures: Path, tmp_path: Path) -> None:
    a, b, c = (tmp_path / n for n in ("a", "b", "c"))
    for d in (a, b, c):
        d.mkdir()
        (d / "meta.properties").write_text("version=0\nbroker.id=1\n")
    src = shared_fixtures / ANCHOR / "test-0"
    copy_writable(src, a / "test-0")
    copy_writable(src, b / f"test-0.{UUID}-future")
    found = discover([b, a])
    assert [d.path for d in found.log_dirs] == [a, b]  # deterministic order
    (dup,) = found.duplicates
    assert (dup.topic, dup.partition, dup.kinds, dup.is_move) == ("test", 0, (None, "future"),
                                                                  True)
    copy_writable(src, c / "test-0")
    (dup,) = discover([a, b, c]).duplicates
    assert dup.kinds == (None, "future", None) and not dup.is_move
    # the same dir named twice is one dir
    assert len(discover([a, str(a)]).log_dirs) == 1


def test_single_partition_dir_and_single_file(shared_fixtures: Path) -> None:
    part = shared_fixtures / DONALD / "__consumer_offsets-39"
    found = discover(part)
    assert not found.log_dirs
    (p,) = found.partitions
    assert (p.topic, p.partition, [s.base_offset for s in p.segments]) == (
        "__consumer_offsets", 39, [0, 18])
    one = discover(part / "00000000000000000018.log")
    (p,) = one.partitions
    assert [s.base_offset for s in p.segments] == [18] and not p.snapshots
    both = discover([part / "00000000000000000018.log", part / "00000000000000000000.log"])
    assert [s.base_offset for s in both.partitions[0].segments] == [0, 18]
    assert both.partitions[0].segments[0].timeindex == part / "00000000000000000000.timeindex"


def test_bad_inputs_raise(shared_fixtures: Path, tmp_path: Path) -> None:
    with pytest.raises(LogDirError, match="no such file"):
        discover(tmp_path / "missing")
    with pytest.raises(LogDirError):
        discover(shared_fixtures / DONALD / "__consumer_offsets-39" / "leader-epoch-checkpoint")
    with pytest.raises(LogDirError):
        discover(shared_fixtures / DONALD / "__consumer_offsets-39" /
                 "00000000000000000018.snapshot")


def test_symlinks_out_of_the_log_dir_are_rejected(shared_fixtures: Path,
                                                  tmp_path: Path) -> None:
    outside = copy_writable(shared_fixtures / ANCHOR / "test-0", tmp_path / "outside-0")
    root = tmp_path / "logs"
    root.mkdir()
    (root / "meta.properties").write_text("version=0\n")
    (root / "test-0").symlink_to(outside)
    with pytest.raises(LogDirError, match="symlink leads outside"):
        discover(root)
    (root / "test-0").unlink()
    inner = copy_writable(shared_fixtures / ANCHOR / "test-0", root / "test-0")
    (inner / "00000000000000000005.log").symlink_to(outside / "00000000000000000000.log")
    with pytest.raises(LogDirError, match="symlink leads outside"):
        discover(root)
    # a link that stays inside the log dir is fine
    (inner / "00000000000000000005.log").unlink()
    (root / "alias-0").symlink_to(inner)
    found = discover(root)
    assert names(found.log_dirs[0].partitions) == ["alias-0", "test-0"]


def test_zero_tail_and_partial_tail(shared_fixtures: Path, tmp_path: Path) -> None:
    src = shared_fixtures / ANCHOR / "test-0" / "00000000000000000000.log"
    data = src.read_bytes()
    pre = tmp_path / "00000000000000000000.log"
    pre.write_bytes(data + bytes(4096))  # a preallocated file after a crash
    info = describe_segment(pre)
    assert (info.stop_code, info.zero_tail, info.valid_bytes) == (STOP_SIZE_TOO_SMALL, True,
                                                                  len(data))
    assert not info.clean and info.next_offset == 9
    cut = tmp_path / "00000000000000000007.log"
    cut.write_bytes(data[:-5])
    info = describe_segment(cut)
    assert (info.stop_code, info.zero_tail, info.batches) == (STOP_PARTIAL_ENTRY, False, 8)
    assert info.base_offset == 7 and info.last_offset == 7


def test_empty_segment(tmp_path: Path) -> None:
    empty = tmp_path / "00000000000000000042.log"
    empty.touch()
    info = describe_segment(empty)
    assert (info.batches, info.next_offset, info.records, info.stop_code) == (0, 42, 0, STOP_END)
    assert info.first_offset is None and info.min_timestamp is None and info.magics == ()


def test_bad_meta_properties_is_reported_not_fatal(tmp_path: Path) -> None:
    (tmp_path / "meta.properties").write_text("version=1\nnode.id=\\u12\n")
    (d,) = discover(tmp_path).log_dirs
    assert d.meta_properties is None and "\\uxxxx" in (d.meta_properties_error or "")


def test_index_files_pair_with_the_log_of_the_same_name(tmp_path: Path) -> None:
    """Index paths are derived from the ``.log`` name: a short spelling of the offset pairs with
    its own ``.index``; an index spelling the offset differently from its ``.log`` is an orphan."""
    part = tmp_path / "t-0"
    part.mkdir()
    for name in ("5.log", "5.index", "00000000000000000009.log", "9.timeindex",
                 "00000000000000000009.index"):
        (part / name).write_bytes(b"")
    found = discover(part).partitions[0]
    short, canonical = found.segments
    assert (short.log.name, short.index.name, short.timeindex) == ("5.log", "5.index", None)
    assert canonical.index == part / "00000000000000000009.index"
    assert canonical.timeindex is None and canonical.txnindex is None
    assert names(found.orphan_indexes) == ["9.timeindex"]


def test_segments_pickle_and_share_their_folder(shared_fixtures: Path) -> None:
    """Segments travel to Spark tasks by pickle; the partition folder is one shared object."""
    import pickle

    part = discover(shared_fixtures / DONALD / "__consumer_offsets-17").partitions[0]
    assert all(s.dir is part.path for s in part.segments)
    back = pickle.loads(pickle.dumps(part.segments))
    assert back == part.segments
    assert [s.log for s in back] == [s.log for s in part.segments]
    assert back[0].timeindex == part.path / "00000000000000000000.timeindex"


def test_next_offset_is_kafka_s_walk_from_the_last_index_entry(shared_fixtures: Path,
                                                               tmp_path: Path) -> None:
    """``next_offset`` (a partition's log end, read by migrate's planner) walks only from the
    offset index's last entry, as Kafka's readNextOffset: the same answer as walking the whole
    segment for every real broker's last segments, and the codec of the last entry with it
    (``log_tail``); an index entry that does not fit the log sends it back to byte 0; a torn
    tail is refused where it starts."""
    import kafkalog_spark as kl
    from test_read_write import records

    codecs = set()
    for log_dir in ALL_LOG_DIRS:
        for d in discover(shared_fixtures / log_dir).log_dirs:
            for part in d.partitions:
                if part.segments:
                    seg = part.segments[-1]
                    assert next_offset(seg) == describe_segment(seg).next_offset, seg.log
                    # the tail's codec is the last entry's of a walk of the whole segment
                    whole = scan_entries(np.frombuffer(seg.log.read_bytes(), np.uint8))
                    tail = log_tail(seg)
                    assert tail.codec == (int(whole.codec[-1]) if len(whole) else None)
                    codecs.add(tail.codec)
    assert 0 in codecs
    for codec, cid in (("gzip", 1), ("lz4", 3), ("zstd", 4)):
        kl.write_log(records(50), tmp_path / codec, codec=codec)
        (part,) = discover(tmp_path / codec).log_dirs[0].partitions
        tail = log_tail(part.segments[-1])
        assert (tail.next_offset, tail.codec) == (50, cid)
    kl.write_log(records(3000), tmp_path, max_batch_records=20, index_interval_bytes=1024)
    (part,) = discover(tmp_path).log_dirs[0].partitions
    seg = part.segments[-1]
    index = seg.index.read_bytes()
    assert len(index) >= 8 * 20 and next_offset(seg) == 3000
    # only the tail is read: a batch length broken before the last index entry is not seen
    # (a whole walk stops there) — the read refuses it where it is
    last = int.from_bytes(index[-4:], "big")
    first = int.from_bytes(index[4:8], "big")  # the position of an indexed batch
    assert first < last
    good = seg.log.read_bytes()
    log = bytearray(good)
    log[first + 8:first + 12] = (2**31 - 1).to_bytes(4, "big")
    seg.log.write_bytes(bytes(log))
    assert next_offset(seg) == 3000 and not describe_segment(seg).clean
    with pytest.raises(KafkaLogError):
        kl.read_log(tmp_path)
    seg.log.write_bytes(good)
    # the last index entry moved into the middle of a batch: it does not fit, walk from 0
    seg.index.write_bytes(index[:-4] + (last + 7).to_bytes(4, "big"))
    assert next_offset(seg) == 3000
    # a torn tail: the last batch cut short
    seg.index.write_bytes(index)
    info = describe_segment(seg)
    with seg.log.open("r+b") as f:
        f.truncate(info.size - 10)
    with pytest.raises(KafkaLogError) as err:
        next_offset(seg)
    assert str(seg.log) in str(err.value)
    assert describe_segment(seg).read_error() is not None


def test_a_read_planned_from_an_earlier_discovery_is_the_read_planned_by_listing(
        shared_fixtures: Path, tmp_path: Path) -> None:
    """``found_again`` (migrate plans each table's read from the run's one discovery of its
    log dirs): for every real broker's partition dirs, a read planned from it is the read
    planned by listing them; a path the discovery does not hold as a partition dir (a log
    dir, another folder) is listed instead."""
    import json

    from kafkalog_spark.datasource.plan import plan_scan
    from kafkalog_spark.log.discovery import found_again

    planned = 0
    for log_dir in ALL_LOG_DIRS:
        found = discover(shared_fixtures / log_dir)
        parts = [p for d in found.log_dirs for p in d.partitions if p.segments]
        paths = [str(p.path) for p in reversed(parts)]  # any order, as discover takes them
        again = found_again(found, paths)
        assert again == discover(paths)
        for part in parts:
            options = {"path": str(part.path),
                       "assign": json.dumps({part.topic: [part.partition]})}
            from_found = plan_scan(options, found=found_again(found, [str(part.path)]))
            assert from_found == plan_scan(options), part.path
            planned += bool(from_found.splits)
        assert found_again(found, [str(shared_fixtures / log_dir)]) is None
        assert found_again(found, [*paths, str(tmp_path)]) is None
    assert planned >= 20
