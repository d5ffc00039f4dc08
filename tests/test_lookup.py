"""Offset and timestamp lookups: index-assisted answers equal a plain walk, bad indexes are caught."""

from __future__ import annotations

import struct
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from kafkalog_spark.codec.files.index import offset_index_bytes, read_offset_index, time_index_bytes
from kafkalog_spark.codec.files.index_rebuild import build_indexes
from kafkalog_spark.codec.records.scan import scan_entries
from kafkalog_spark.log.discovery import discover
from kafkalog_spark.log.model import Segment
from kafkalog_spark.log import lookup
from kafkalog_spark.log.lookup import LogBytes, find_offset, find_timestamp, position_for_offset
from kafkalog_spark.codec.files.naming import segment_file_name

KRAFT = "ItumelengMogase__Real-Time-Data-Pipeline-for-Patient-Admissions/kafka-data"


def batch(base_offset: int, timestamps: list[int], value_size: int = 40) -> bytes:
    """A v2 batch written by kafka-python's builder, placed at ``base_offset``."""
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0,
                                  producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                  batch_size=1 << 20)
    for i, ts in enumerate(timestamps):
        b.append(i, timestamp=ts, key=None, value=b"v" * value_size, headers=[])
    data = bytearray(b.build())
    struct.pack_into(">q", data, 0, base_offset)  # baseOffset is outside the CRC
    return bytes(data)


def write_segment(folder: Path, base: int, batches: list[bytes], interval: int = 100) -> Path:
    """Write ``.log`` + ``.index`` + ``.timeindex`` as a broker's recovery would."""
    log = folder / segment_file_name(base, "log")
    data = b"".join(batches)
    log.write_bytes(data)
    rebuilt = build_indexes(data, base, index_interval_bytes=interval, verify_crc=False)
    (folder / segment_file_name(base, "index")).write_bytes(rebuilt.offset_index.to_bytes())
    (folder / segment_file_name(base, "timeindex")).write_bytes(rebuilt.time_index.to_bytes())
    return log


@pytest.fixture
def partition(tmp_path: Path) -> Path:
    """Two segments; offsets 20..24 missing (compacted away); timestamps rise with a plateau."""
    part = tmp_path / "orders-0"
    part.mkdir()
    first = [batch(0, [1000, 1001]), batch(2, [1002]), batch(3, [1003, 1010, 1004]),
             batch(6, [1010]), batch(7, [1020] * 4), batch(11, [1030])]
    second = [batch(12, [1040]), batch(13, [1050, 1051]), batch(15, [1050]),
              batch(25, [1060, 1061, 1062]), batch(28, [1070])]
    write_segment(part, 0, first)
    write_segment(part, 12, second)
    return part


def walk(segments: list[Segment]) -> list[tuple[int, int, int, int]]:
    """(segment base, position, last offset, max timestamp) of every entry, by plain walking."""
    rows = []
    for s in sorted(segments, key=lambda s: s.base_offset):
        t = scan_entries(np.fromfile(s.log, np.uint8))
        rows += [(s.base_offset, int(t.position[i]), int(t.last_offset[i]),
                  int(t.max_timestamp[i])) for i in range(len(t))]
    return rows


def expected_offset(rows, target):
    return next(((b, p) for b, p, last, _ in rows if last >= target), None)


def expected_time(rows, target):
    return next(((b, p) for b, p, _, ts in rows if ts >= target), None)


def where(hit):
    return None if hit is None else (hit.segment.base_offset, hit.position)


def test_lookups_equal_a_plain_walk(partition: Path) -> None:
    (part,) = discover(partition).partitions
    assert all(s.index_size for s in part.segments)  # the indexes are really used
    rows = walk(list(part.segments))
    used = 0
    for target in range(-2, 32):
        hit = find_offset(part, target)
        assert where(hit) == expected_offset(rows, target), target
        if hit is not None:
            assert hit.index_problem is None and hit.last_offset >= target
            used += hit.index_used
    assert used > 5
    used = 0
    for target in range(990, 1080):
        hit = find_timestamp(part, target)
        assert where(hit) == expected_time(rows, target), target
        if hit is not None:
            assert hit.index_problem is None and hit.max_timestamp >= target
            used += hit.index_used
    assert used > 5


def test_walks_that_fetch_as_they_go_answer_the_same(tmp_path: Path, monkeypatch) -> None:
    """Lookups over a segment whose bytes arrive only as walks ask for them (an object
    store's LogBytes) answer as the plain walk does, and fetch a small part of the segment."""
    part = tmp_path / "big-0"
    part.mkdir()
    write_segment(part, 0, [batch(3 * b, [5000 + 10 * b] * 3, value_size=60)
                            for b in range(2000)], interval=4096)
    (p,) = discover(part).partitions
    (seg,) = p.segments
    rows = walk([seg])
    fetched: list[tuple[int, int]] = []

    @contextmanager
    def remote(s: Segment):
        data = np.fromfile(s.log, np.uint8)

        def fetch(ranges):
            fetched.extend(ranges)
            return [data[lo:hi].tobytes() for lo, hi in ranges]

        yield LogBytes(np.zeros(len(data), np.uint8), fetch)

    monkeypatch.setattr(lookup, "log_bytes", remote)
    for target in (4990, 5000, 5000 + 10 * 700 + 5, 5000 + 10 * 1999, 5000 + 10 * 2000):
        fetched.clear()
        assert where(find_timestamp(p, target)) == expected_time(rows, target), target
        assert 0 < sum(hi - lo for lo, hi in fetched) < seg.log_size / 3, (target, fetched)
    end = scan_entries(np.fromfile(seg.log, np.uint8)).stop_position
    for target in (0, 1, 3 * 1000 + 2, 5999, 6000):
        expected = expected_offset(rows, target)
        for lookup_of in (lambda: where(find_offset(p, target)),
                          lambda: position_for_offset(seg, target)):
            fetched.clear()
            got = lookup_of()
            assert got in (expected, expected[1] if expected else end), target
            assert len(set(fetched)) == len(fetched)  # no byte range fetched twice
            if expected is not None:
                assert sum(hi - lo for lo, hi in fetched) < seg.log_size / 3, (target, fetched)


def test_offset_semantics(partition: Path) -> None:
    (part,) = discover(partition).partitions
    inside = find_offset(part, 4)  # inside the batch 3..5: the batch is returned
    assert (inside.offset, inside.last_offset) == (3, 5)
    gap = find_offset(part, 20)  # compacted away: the next entry
    assert (gap.segment.base_offset, gap.offset, gap.last_offset) == (12, 25, 27)
    assert find_offset(part, 29) is None  # log end offset
    assert find_offset(part.segments, 28).last_offset == 28
    assert find_timestamp(part, 1071) is None
    assert find_timestamp(part, 1005).offset == 3  # batch 3..5 reaches 1010


def _corrupt(part_dir: Path, base: int, kind: str, data: bytes) -> list[Segment]:
    (part_dir / segment_file_name(base, kind)).write_bytes(data)
    return list(discover(part_dir).partitions[0].segments)


# the first segment's batches start at 0, 155, 263, 465, 573, 822 and end at offsets
# 1, 2, 5, 6, 10, 11; a correct index is [(2, 155), (5, 263), (6, 465), (10, 573), (11, 822)]
@pytest.mark.parametrize("entries, target, message", [
    ([(2, 155), (5, 10_000)], 5, "past the end"),
    ([(2, 155), (5, 264)], 5, "no valid entry starts there"),
    ([(2, 155), (4, 263)], 4, "no entry from that position ends at offset 4"),
    ([(5, 155), (6, 263)], 6, "not after the previous index entry's offset 5"),
])
def test_bad_offset_index_falls_back(partition: Path, entries: list[tuple[int, int]],
                                     target: int, message: str) -> None:
    segs = list(discover(partition).partitions[0].segments)
    rows = walk(segs)
    assert [p for b, p, _, _ in rows if b == 0] == [0, 155, 263, 465, 573, 822]
    segs = _corrupt(partition, 0, "index", offset_index_bytes(*zip(*entries)))
    hit = find_offset(segs, target)
    assert where(hit) == expected_offset(rows, target)
    assert not hit.index_used and message in hit.index_problem


def test_bad_time_index_falls_back(partition: Path) -> None:
    segs = list(discover(partition).partitions[0].segments)
    rows = walk(segs)
    rebuilt = build_indexes(np.fromfile(segs[0].log, np.uint8), 0, index_interval_bytes=100,
                            verify_crc=False).time_index
    t, o = rebuilt.timestamps.copy(), rebuilt.offsets.copy()
    t[0] += 3  # no entry carries this timestamp
    segs = _corrupt(partition, 0, "timeindex", time_index_bytes(t, o))
    for target in range(995, 1035):
        hit = find_timestamp(segs, target)
        assert where(hit) == expected_time(rows, target), target
    hit = find_timestamp(segs, 1005)
    assert "max timestamp" in hit.index_problem and not hit.index_used


def test_time_index_understating_the_segment_is_caught(partition: Path) -> None:
    segs = list(discover(partition).partitions[0].segments)
    rows = walk(segs)
    # a last entry claiming the segment ends at timestamp 1002 would hide 1003..1030
    segs = _corrupt(partition, 0, "timeindex", time_index_bytes([1002], [2]))
    hit = find_timestamp(segs, 1015)
    assert where(hit) == expected_time(rows, 1015) and hit.segment.base_offset == 0
    assert "time index ends at timestamp 1002 but the log reaches 1030" in hit.index_problem


def test_preallocated_index_tail_and_multi_batch_append(partition: Path) -> None:
    segs = list(discover(partition).partitions[0].segments)
    rows = walk(segs)
    idx = read_offset_index(np.fromfile(segs[0].index, np.uint8), 0)
    raw = idx.to_bytes() + bytes(8 * 64)  # zero tail of a file left at its preallocated size
    segs = _corrupt(partition, 0, "index", raw)
    for target in range(0, 12):
        hit = find_offset(segs, target)
        assert where(hit) == expected_offset(rows, target) and hit.index_problem is None
    # <=3.9 follower append: one entry (last offset of the 2nd batch, start of the 1st)
    t = scan_entries(np.fromfile(segs[0].log, np.uint8))
    entry = offset_index_bytes([int(t.last_offset[3])], [int(t.position[2])])
    segs = _corrupt(partition, 0, "index", entry)
    hit = find_offset(segs, int(t.last_offset[3]))
    assert hit.index_used and hit.index_problem is None
    assert hit.position == int(t.position[3])


def test_segment_without_indexes(partition: Path) -> None:
    for kind in ("index", "timeindex"):
        (partition / segment_file_name(12, kind)).unlink()
    segs = list(discover(partition).partitions[0].segments)
    rows = walk(segs)
    for target in (12, 14, 20, 28):
        hit = find_offset(segs, target)
        assert where(hit) == expected_offset(rows, target)
        assert hit.index_problem is None
    assert where(find_timestamp(segs, 1061)) == expected_time(rows, 1061)


def test_real_segments_with_indexes(shared_fixtures: Path) -> None:
    (d,) = discover(shared_fixtures / KRAFT).log_dirs
    parts = [p for p in d.partitions if any(s.index_size for s in p.segments)]
    assert parts
    used = 0
    for part in parts:
        rows = walk(list(part.segments))
        for b, p, last, ts in rows:
            hit = find_offset(part, last)
            assert where(hit) == (b, p) and hit.index_problem is None
            used += hit.index_used
            if ts >= 0:
                hit = find_timestamp(part, ts)
                assert where(hit) == expected_time(rows, ts) and hit.index_problem is None
    assert used > 0


def test_position_for_offset(partition: Path) -> None:
    segs = list(discover(partition).partitions[0].segments)
    rows = walk(segs)
    for seg in segs:
        for target in range(0, 30):
            inside = [p for b, p, last, _ in rows if b == seg.base_offset and last >= target]
            expected = inside[0] if inside else seg.log_size
            assert position_for_offset(seg, target) == expected, (seg.base_offset, target)
