"""Regression tests for what the fuzzer (tests/fuzz) found: each input once made a parser, verify
or recover fail with something other than a result or a typed ``KafkaLogError``."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

import kafkalog_spark as kl
from kafkalog_spark.inspect.verify import verify


def small_log_dir(root: Path) -> Path:
    """One partition ``fz-0`` with several batches and a non-empty ``.index``."""
    values = [b"v%03d" % i * 20 for i in range(200)]
    kl.write_log(pa.table({"value": values}), root, topic="fz", max_batch_records=10,
                 index_interval_bytes=512)
    return root / "fz-0"


def test_verify_index_entries_over_an_empty_log(tmp_path: Path) -> None:
    # fuzz seed 2 case 8979: the .log cut to nothing while its .index kept entries made
    # check_offset_index index an empty entry table (IndexError instead of a problem)
    part = small_log_dir(tmp_path / "logs")
    (log,) = part.glob("*.log")
    assert (part / log.name.replace(".log", ".index")).stat().st_size > 0
    log.write_bytes(b"")
    report = verify(tmp_path / "logs", deep=True)
    assert not report.ok
    assert any(p.check == "index" and "not the start of an entry" in p.message
               for p in report.errors()), report.errors()


def negative_last_offset_delta(part: Path, k: int = 2) -> tuple[int, int]:
    """Batch ``k`` of the first segment given lastOffsetDelta -1 (its last offset before its base
    offset) with a valid CRC-32C; returns (position, base offset) of that batch."""
    import struct

    import crc32c

    from kafkalog_spark.codec.records.scan import scan_entries

    log = sorted(part.glob("*.log"))[0]
    data = bytearray(log.read_bytes())
    t = scan_entries(bytes(data))
    pos, end = int(t.position[k]), int(t.position[k] + t.entry_size[k])
    struct.pack_into(">i", data, pos + 23, -1)
    struct.pack_into(">I", data, pos + 17, crc32c.crc32c(bytes(data[pos + 21:end])))
    log.write_bytes(bytes(data))
    return pos, int(t.offset[k])


def test_verify_flags_a_batch_whose_last_offset_precedes_its_base(tmp_path: Path) -> None:
    # fuzz seed 5 case 54299: lastOffsetDelta -1 under a valid CRC passed the offset-order
    # check (only first offset vs the previous last offset was compared)
    part = small_log_dir(tmp_path / "logs")
    pos, base = negative_last_offset_delta(part)
    problems = [p for p in verify(tmp_path / "logs").errors() if p.check == "offsets"]
    assert [(p.position, p.base_offset) for p in problems] == [(pos, base)], problems


def test_recover_cuts_at_a_batch_whose_last_offset_precedes_its_base(tmp_path: Path) -> None:
    from kafkalog_spark.recovery.recover import recover

    part = small_log_dir(tmp_path / "logs")
    pos, _ = negative_last_offset_delta(part)
    report = recover(tmp_path / "logs", execute_plan=True, quarantine_dir=tmp_path / "q")
    cuts = [a for a in report.actions if a.kind == "cut-tail"]
    assert [a.start for a in cuts] == [pos]
    assert verify(tmp_path / "logs", deep=True).errors() == []


def producer_batch(base_offset: int) -> bytes:
    """A 10-record idempotent v2 batch (lastOffsetDelta 9) moved to ``base_offset`` (the base
    offset is outside the CRC, so the batch stays valid)."""
    import struct

    from kafkalog_spark.codec.records.encode import encode_record_batches

    data = bytearray(encode_record_batches(pa.table({"value": [b"v"] * 10}), producer_id=5,
                                           producer_epoch=0, base_sequence=0).tobytes())
    struct.pack_into(">q", data, 0, base_offset)
    return bytes(data)


def test_producer_state_offset_delta_is_the_batch_header_delta() -> None:
    # fuzz seed 6 case 120146 (harness of commit 18de8c1): a base offset near 2^63 made
    # base + lastOffsetDelta wrap, offset_delta became last - base in Python ints (~ -2^64) and
    # snapshot().to_bytes() died with struct.error; Kafka stores the header's int32 delta
    from kafkalog_spark.codec.files.snapshot import ProducerStateTracker, read_snapshot

    tracker = ProducerStateTracker()
    tracker.apply(producer_batch(2**63 - 5))
    snap = tracker.snapshot()
    assert [e.offset_delta for e in snap.entries] == [9]
    assert read_snapshot(snap.to_bytes()) == snap


def test_sequence_arithmetic_wraps_like_java_ints() -> None:
    # found alongside the case above: a negative lastOffsetDelta (or offsetDelta) under a valid
    # CRC pushed increment/decrement_sequence out of int32 (struct.error on snapshot encode);
    # DefaultRecordBatch's int arithmetic wraps
    from kafkalog_spark.codec.files.snapshot import (ProducerStateTracker, decrement_sequence,
                                                     increment_sequence)

    assert increment_sequence(-5, -(2**31)) == 2**31 - 5
    assert increment_sequence(2**31 - 1, 5) == 4 and increment_sequence(3, 4) == 7
    assert decrement_sequence(5, -(2**31)) == -(2**31) + 5
    assert decrement_sequence(2, 5) == 2**31 - 3 and decrement_sequence(7, 4) == 3
    import struct

    import crc32c

    data = bytearray(producer_batch(0))
    struct.pack_into(">i", data, 53, -5)  # baseSequence
    struct.pack_into(">i", data, 23, -(2**31))  # lastOffsetDelta
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    tracker = ProducerStateTracker()
    tracker.apply(bytes(data))
    tracker.snapshot().to_bytes()
