"""Record decoding of data written by real brokers (../shared/fixtures/real)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalog_spark.codec.records.crc import verify_crcs
from kafkalog_spark.codec.records.decode import DecodeOptions, decode_entries, decode_to_table
from kafkalog_spark.codec.records.scan import scan_entries
from kafkalog_spark.errors import CorruptRecordError, TruncatedDataError

ALL = DecodeOptions(include_headers=True, include_metadata=True, include_control=True)
RUST = "kafka-rust__kafka-rust/derived_message_sets"
KAFKAJS = "tulios__kafkajs/derived_message_sets"
# fetch responses cut at the broker's size limit end in a partial entry
PARTIAL = {f"{KAFKAJS}/v2_response_partial_messages_many_partitions.topic-partial-message-{n}.log"
           for n in (0, 3, 6, 9)} | {
    f"{KAFKAJS}/v2_response_index_out_of_range.test-topic-index-out-of-range-1.log"}
BAD_CRC = f"{RUST}/fetch2.mytopic.nocompression.invalid_crc.kafka.0900.my-topic-0.log"
# attributes say "none" but the records are a zstd frame (README: "not a zstd batch")
NOT_ZSTD = f"{KAFKAJS}/recordBatch_fixture.v0_recordbatch_zstd.log"
SPECIAL = PARTIAL | {BAD_CRC, NOT_ZSTD}


def _logs(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.log"))


def _decode(root: Path, rel: str, options: DecodeOptions = ALL):
    return decode_to_table((root / rel).read_bytes(), topic="t", partition=0,
                           options=options, file=rel)


def test_every_real_log_decodes(shared_fixtures):
    logs = _logs(shared_fixtures)
    assert len(logs) > 300 and SPECIAL <= set(logs)
    total = 0
    for rel in logs:
        if rel in SPECIAL:
            continue
        data = (shared_fixtures / rel).read_bytes()
        entries = scan_entries(data)
        assert verify_crcs(data, entries).all(), rel
        table = _decode(shared_fixtures, rel)
        total += table.num_rows
        offsets = table.column("offset").to_pylist()
        # one partition's records come out in strictly increasing offset order
        assert offsets == sorted(set(offsets)), rel
    assert total > 5000


def test_partial_tails(shared_fixtures):
    for rel in sorted(PARTIAL):
        with pytest.raises(TruncatedDataError) as info:
            _decode(shared_fixtures, rel)
        assert info.value.file == rel
        data = (shared_fixtures / rel).read_bytes()
        tail = scan_entries(data).stop_position
        assert info.value.position == tail
        _decode(shared_fixtures, rel, DecodeOptions(allow_partial_tail=True))
        res = decode_entries(data, topic="t", partition=0, file=rel,
                             options=DecodeOptions(on_error="skip"))
        list(res)
        assert [(r.start, r.end) for r in res.bad_ranges] == [(tail, len(data))]


def test_kafka_rust_gzip_set_equals_fetch1_txt(shared_fixtures):
    lines = (shared_fixtures / "kafka-rust__kafka-rust/test-data/fetch1.txt").read_bytes()
    expected = lines.rstrip(b"\n").split(b"\n")
    assert len(expected) == 42
    for codec in ("gzip.kafka.0821", "snappy.kafka.0821", "snappy.kafka.0822",
                  "nocompression.kafka.0821"):
        t = _decode(shared_fixtures, f"{RUST}/fetch1.mytopic.1p.{codec}.my-topic-0.log")
        assert t.column("value").to_pylist() == expected, codec
        assert t.column("offset").to_pylist() == list(range(42)), codec
        assert set(t.column("magic").to_pylist()) == {0}
        assert set(t.column("timestampType").to_pylist()) == {-1}
    gz = _decode(shared_fixtures, f"{RUST}/fetch1.mytopic.1p.gzip.kafka.0821.my-topic-0.log")
    assert set(gz.column("compression").to_pylist()) == {"gzip"}
    assert set(gz.column("batchLastOffset").to_pylist()) == {41}
    assert set(gz.column("batchBaseOffset").to_pylist()) == {0}


def test_kafka_rust_bad_crc_copy(shared_fixtures):
    good = _decode(shared_fixtures, f"{RUST}/fetch2.mytopic.nocompression.kafka.0900.my-topic-0.log")
    with pytest.raises(CorruptRecordError, match="CRC-32 mismatch") as info:
        _decode(shared_fixtures, BAD_CRC)
    assert info.value.file == BAD_CRC and info.value.position is not None
    unverified = _decode(shared_fixtures, BAD_CRC, DecodeOptions(verify_crc=False))
    assert unverified.num_rows == good.num_rows
    data = (shared_fixtures / BAD_CRC).read_bytes()
    res = decode_entries(data, topic="t", partition=0, file=BAD_CRC,
                         options=DecodeOptions(on_error="skip"))
    kept = sum(b.num_rows for b in res)
    bad = ~verify_crcs(data, scan_entries(data))
    assert len(res.bad_ranges) == int(bad.sum()) >= 1
    assert kept == good.num_rows - len(res.bad_ranges)
    assert all("CRC-32 mismatch" in r.reason for r in res.bad_ranges)


def test_kafka_go_mixed_v1_v2(shared_fixtures):
    rel = "segmentio__kafka-go/derived_message_sets/v1-v1c-v2-v2c-v2b-v2b-v2b-v2bc-v1b-v1bc.test-88-0.log"
    t = _decode(shared_fixtures, rel)
    assert set(t.column("magic").to_pylist()) == {1, 2}
    assert set(t.column("compression").to_pylist()) == {"none", "gzip"}
    offsets = t.column("offset").to_pylist()
    assert offsets == sorted(set(offsets)) and len(offsets) >= 10
    v1 = [r for r in t.to_pylist() if r["magic"] == 1]
    assert all(r["headers"] is None and r["timestampType"] in (0, 1) for r in v1)


def test_kafkajs_formats(shared_fixtures):
    v0 = _decode(shared_fixtures, next(r for r in _logs(shared_fixtures)
                                       if r.startswith(f"{KAFKAJS}/v0_response_gzip")))
    assert v0.num_rows == 3 and set(v0.column("magic").to_pylist()) == {0}
    mixed = _decode(shared_fixtures, next(r for r in _logs(shared_fixtures)
                                          if r.startswith(f"{KAFKAJS}/v4_response_mixed")))
    assert set(mixed.column("magic").to_pylist()) == {1, 2}
    assert mixed.num_rows > 1611
    snappy = _decode(shared_fixtures, f"{KAFKAJS}/v4_response_snappy.topic-test-3.log")
    assert set(snappy.column("compression").to_pylist()) == {"snappy"}


def test_mislabelled_zstd_fixture_is_corrupt(shared_fixtures):
    with pytest.raises(CorruptRecordError) as info:
        _decode(shared_fixtures, NOT_ZSTD)
    assert info.value.position == 61 and info.value.base_offset == 0


def test_transaction_marker_fixture(shared_fixtures):
    """The KRaft fixture's transactional batch is followed by a COMMIT marker."""
    root = shared_fixtures / "ItumelengMogase__Real-Time-Data-Pipeline-for-Patient-Admissions"
    found = False
    for path in sorted(root.rglob("*.log")):
        data = path.read_bytes()
        entries = scan_entries(data)
        if not entries.is_control().any() or not entries.is_transactional().any():
            continue
        everything = decode_to_table(data, topic="t", partition=0, options=ALL)
        visible = decode_to_table(data, topic="t", partition=0,
                                  options=DecodeOptions(include_metadata=True))
        control = [r for r in everything.to_pylist() if r["isControl"]]
        assert control and visible.num_rows == everything.num_rows - len(control)
        assert all(r["key"][:2] == b"\x00\x00" and r["key"][2:] in (b"\x00\x00", b"\x00\x01")
                   for r in control if r["isTransactional"])
        found = True
    assert found
