"""Kafka's one-block lz4 frames decoded without the per-payload frame walk
(``framings.lz4_single_blocks`` + ``codecs.lz4_block_decoder``, used by the record decoder):
found exactly where the walk would read one block, and decoded into the same records and the
same errors as through :func:`~kafkalog_spark.codec.compression.codecs.decompress`."""

from __future__ import annotations

import lz4.frame
import numpy as np
import pyarrow as pa
import pytest

from kafkalog_spark.codec import layout as L
from kafkalog_spark.codec.compression.codecs import compress, decompress
from kafkalog_spark.codec.compression.framings import (LZ4_KAFKA_BLOCK_SIZE as LZ4_BLOCK,
                                                       LZ4_KAFKA_HEADER, lz4_single_blocks)
from kafkalog_spark.codec.records.decode import DecodeOptions, decode_entries, decode_to_table
from kafkalog_spark.codec.records.encode import encode_record_batches
from kafkalog_spark.codec.records.scan import scan_entries
from kafkalog_spark.errors import CompressionError


def _text(n: int, seed: int = 1) -> bytes:
    rng = np.random.default_rng(seed)
    return bytes(rng.integers(97, 105, n, dtype=np.uint8))


def _found(payloads: list[bytes]) -> list[int]:
    """lz4_single_blocks over payloads laid end to end after 3 bytes of padding: block
    positions relative to each payload, -1 where none."""
    buf = np.frombuffer(b"pad" + b"".join(payloads), np.uint8)
    starts = np.cumsum([3] + [len(p) for p in payloads[:-1]])
    ends = starts + [len(p) for p in payloads]
    return [int(b - s) if b >= 0 else -1 for b, s in zip(lz4_single_blocks(buf, starts, ends),
                                                         starts)]


def test_found_only_for_kafkas_one_block_frame() -> None:
    one = compress(L.CODEC_LZ4, _text(20_000))
    two = compress(L.CODEC_LZ4, _text(70_000))  # two 64 KiB blocks
    stored = compress(L.CODEC_LZ4, np.random.default_rng(2).bytes(5_000))  # incompressible
    magic0 = compress(L.CODEC_LZ4, _text(500), magic=0)  # pre-KIP-57 header checksum
    framed = lz4.frame.compress(_text(500), block_linked=False, content_checksum=True)
    stored_end = one[:-4] + b"\x00\x00\x00\x80"  # end mark with the stored flag: still the end
    assert _found([one, two, stored, magic0, framed, one + b"x", one[:-1], stored_end,
                   LZ4_KAFKA_HEADER + b"\x00" * 4, b""]) == [
        11, -1, -1, -1, -1, -1, -1, 11, -1, -1]


def _lz4_log(n: int, per_batch: int) -> bytes:
    values = [_text(100, i) for i in range(n)]
    table = pa.table({"key": pa.array([b"k%d" % i for i in range(n)]),
                      "value": pa.array(values)})
    return bytes(encode_record_batches(table, codec=L.CODEC_LZ4,
                                       max_batch_records=per_batch).data)


@pytest.mark.parametrize("per_batch", [1, 150, 1000])  # 1000 x 100 bytes: two blocks a batch
def test_records_as_through_the_frame_walk(per_batch: int) -> None:
    data = _lz4_log(3000, per_batch)
    table = decode_to_table(data, topic="t", partition=0)
    assert table.column("value").to_pylist() == [_text(100, i) for i in range(3000)]
    assert table.column("offset").to_pylist() == list(range(3000))
    if per_batch <= 150:  # a bound below one block's 64 KiB takes the frame walk: same rows
        walked = decode_to_table(data, topic="t", partition=0,
                                 options=DecodeOptions(max_decompressed=LZ4_BLOCK - 1))
        assert walked.equals(table)


def test_corrupt_block_is_the_walks_error_at_its_batch() -> None:
    data = bytearray(_lz4_log(600, 150))
    entries = scan_entries(bytes(data))
    p, size = int(entries.position[2]), int(entries.entry_size[2])
    payload = slice(p + L.RECORDS_OFFSET, p + size)
    data[payload.start + 11:payload.stop - 4] = b"\xff" * (size - L.RECORDS_OFFSET - 15)
    with pytest.raises(CompressionError) as walked:
        decompress(L.CODEC_LZ4, bytes(data[payload]))
    options = DecodeOptions(verify_crc=False)
    with pytest.raises(CompressionError) as info:
        decode_to_table(bytes(data), topic="t", partition=0, file="x.log", options=options)
    assert info.value.reason == walked.value.reason
    assert (info.value.file, info.value.position, info.value.base_offset) == ("x.log", p, 300)
    skipped = decode_entries(bytes(data), topic="t", partition=0,
                             options=DecodeOptions(verify_crc=False, on_error="skip"))
    assert sum(b.num_rows for b in skipped) == 450
    assert [(r.start, r.end) for r in skipped.bad_ranges] == [(p, p + size)]
