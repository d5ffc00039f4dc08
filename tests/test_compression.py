"""Tests for kafkalog_spark.codec.compression.codecs: round trips, real broker payloads, the quirks
Kafka tolerates (raw snappy, concatenated xerial streams, magic-0 lz4 HC, multi-frame zstd,
multi-member gzip), size bounds and corrupt input, cross-checked with kafka-python/aiokafka."""

from __future__ import annotations

import gzip
import io
import struct
import subprocess
import sys
from pathlib import Path

import aiokafka.codec as aio_codec
import kafka.codec as kp_codec
import lz4.block
import lz4.frame
import numpy as np
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog_spark.codec.compression.codecs import (DEFAULT_MAX_DECOMPRESSED, compress, decompress,
                                                     decompress_into, require_codec)
from kafkalog_spark.codec.compression.framings import (LZ4_KAFKA_HEADER, LZ4_KAFKA_HEADER_MAGIC0,
                                                       XERIAL_HEADER)
from kafkalog_spark.codec.compression.sink import Sink
from kafkalog_spark.codec.layout import (CODEC_GZIP, CODEC_LZ4, CODEC_NONE, CODEC_SNAPPY,
                                         CODEC_ZSTD)
from kafkalog_spark.errors import CompressionError, Location, MissingCodecError

CODECS = [CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD]
KAFKA_PYTHON = {
    CODEC_GZIP: (kp_codec.gzip_encode, kp_codec.gzip_decode),
    CODEC_SNAPPY: (kp_codec.snappy_encode, kp_codec.snappy_decode),
    CODEC_LZ4: (kp_codec.lz4_encode, kp_codec.lz4_decode),
    CODEC_ZSTD: (kp_codec.zstd_encode, kp_codec.zstd_decode),
}
AIOKAFKA = {
    CODEC_GZIP: (aio_codec.gzip_encode, aio_codec.gzip_decode),
    CODEC_SNAPPY: (aio_codec.snappy_encode, aio_codec.snappy_decode),
    CODEC_LZ4: (aio_codec.lz4_encode, aio_codec.lz4_decode),
    CODEC_ZSTD: (aio_codec.zstd_encode, aio_codec.zstd_decode),
}


def _sample(size: int) -> bytes:
    """Half random, half repetitive: some blocks compress, some are stored."""
    rng = np.random.default_rng(size)
    noise = rng.integers(0, 256, size // 2, dtype=np.uint8).tobytes()
    return noise + (b"kafka record " * (size // 13 + 1))[: size - len(noise)]


SIZES = [0, 1, 100, 32 * 1024, 32 * 1024 + 1, 64 * 1024, 64 * 1024 + 1, 300_000]


# --- round trips ---------------------------------------------------------------------------


@pytest.mark.parametrize("codec", [CODEC_NONE, *CODECS])
@pytest.mark.parametrize("size", SIZES)
def test_round_trip_sizes(codec: int, size: int) -> None:
    data = _sample(size)
    blob = compress(codec, data)
    assert isinstance(blob, bytes)
    out = decompress(codec, blob)
    assert isinstance(out, bytes) and out == data
    # numpy uint8, bytearray and memoryview inputs are read the same way
    assert decompress(codec, np.frombuffer(blob, dtype=np.uint8)) == data
    assert decompress(codec, bytearray(blob)) == data
    assert decompress(codec, memoryview(blob)) == data
    assert compress(codec, np.frombuffer(data, dtype=np.uint8)) == blob


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=2000), codec=st.sampled_from(CODECS), magic=st.sampled_from([0, 1, 2]),
       level=st.sampled_from([None, 1, 5]))
def test_round_trip_property(data: bytes, codec: int, magic: int, level: int | None) -> None:
    if codec == CODEC_ZSTD:
        magic = 2
    assert decompress(codec, compress(codec, data, magic=magic, level=level), magic=magic) == data


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), codec=st.sampled_from(CODECS),
       size=st.integers(64 * 1024, 200_000))
def test_round_trip_multi_block_property(seed: int, codec: int, size: int) -> None:
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 4, size, dtype=np.uint8).tobytes()  # compressible, multi-block
    assert decompress(codec, compress(codec, data)) == data


def test_non_contiguous_numpy_input() -> None:
    data = _sample(5000)
    blob = np.frombuffer(compress(CODEC_LZ4, data) * 2, dtype=np.uint8)[::2]
    # a strided view is copied, not misread
    assert compress(CODEC_NONE, blob) == bytes(blob)


# --- exact framing as Kafka writes it ------------------------------------------------------


@pytest.mark.parametrize("size", [0, 10, 65536, 65537, 200_000])
def test_lz4_matches_lz4_frame_with_kafka_options(size: int) -> None:
    data = _sample(size)
    expected = lz4.frame.compress(
        data, block_linked=False, block_size=lz4.frame.BLOCKSIZE_MAX64KB,
        content_checksum=False, store_size=False)
    ours = compress(CODEC_LZ4, data)
    assert ours == expected
    assert ours[:7] == LZ4_KAFKA_HEADER == bytes.fromhex("04224d18604082")
    assert ours[-4:] == b"\x00\x00\x00\x00"


def test_lz4_incompressible_block_is_stored_with_high_bit() -> None:
    data = np.random.default_rng(1).integers(0, 256, 1000, dtype=np.uint8).tobytes()
    blob = compress(CODEC_LZ4, data)
    assert struct.unpack_from("<I", blob, 7)[0] == 0x80000000 | 1000
    assert blob[11:1011] == data


def test_lz4_magic0_broken_header_checksum() -> None:
    data = _sample(5000)
    blob = compress(CODEC_LZ4, data, magic=0)
    assert blob[:7] == LZ4_KAFKA_HEADER_MAGIC0 == bytes.fromhex("04224d1860401a")
    assert decompress(CODEC_LZ4, blob, magic=0) == data
    for magic in (1, 2):
        with pytest.raises(CompressionError, match="HC"):
            decompress(CODEC_LZ4, blob, magic=magic)
    # magic 0 skips HC verification entirely, so a correct HC is fine too
    assert decompress(CODEC_LZ4, compress(CODEC_LZ4, data), magic=0) == data


def test_snappy_header_and_32k_blocks() -> None:
    data = _sample(70_000)
    blob = compress(CODEC_SNAPPY, data)
    assert blob[:16] == XERIAL_HEADER == bytes.fromhex("82534e41505059000000000100000001")
    assert blob == kp_codec.snappy_encode(data)
    pos, blocks = 16, 0
    while pos < len(blob):
        (length,) = struct.unpack_from(">i", blob, pos)
        pos += 4 + length
        blocks += 1
    assert pos == len(blob) and blocks == 3


def test_zstd_frame_has_no_content_size() -> None:
    blob = compress(CODEC_ZSTD, _sample(1000))
    assert blob[:4] == b"\x28\xb5\x2f\xfd"
    assert zstandard.get_frame_parameters(blob).content_size == zstandard.CONTENTSIZE_UNKNOWN
    with pytest.raises(zstandard.ZstdError):  # why Kafka data needs more than decompress()
        zstandard.ZstdDecompressor().decompress(blob)


def test_gzip_header_like_java() -> None:
    blob = compress(CODEC_GZIP, b"abc")
    assert blob[:10] == bytes.fromhex("1f8b08000000000000ff")
    assert gzip.decompress(blob) == b"abc"


# --- cross implementation ------------------------------------------------------------------


@pytest.mark.parametrize("impl", [KAFKA_PYTHON, AIOKAFKA], ids=["kafka-python", "aiokafka"])
@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("size", [1, 1000, 40_000, 150_000])
def test_cross_implementation(impl: dict, codec: int, size: int) -> None:
    encode, decode = impl[codec]
    data = _sample(size)
    assert decode(compress(codec, data)) == data
    assert decompress(codec, encode(data)) == data


def test_kafka_python_raw_snappy_and_lz4_variants() -> None:
    data = _sample(50_000)
    assert decompress(CODEC_SNAPPY, kp_codec.snappy_encode(data, xerial_compatible=False)) == data
    # lz4.frame defaults: content size stored, content checksum present
    framed = lz4.frame.compress(data, block_linked=False, store_size=True, content_checksum=True)
    assert decompress(CODEC_LZ4, framed) == data


# --- real broker payloads ------------------------------------------------------------------


def _wrapper_values(log: bytes) -> list[tuple[int, bytes]]:
    """(codec, value) of each v0 message in a message set (shallow)."""
    out, pos = [], 0
    while pos + 12 <= len(log):
        (size,) = struct.unpack_from(">i", log, pos + 8)
        if pos + 12 + size > len(log):
            break
        msg = log[pos + 12: pos + 12 + size]
        attributes = msg[5]
        (key_len,) = struct.unpack_from(">i", msg, 6)
        vpos = 10 + max(key_len, 0)
        (value_len,) = struct.unpack_from(">i", msg, vpos)
        out.append((attributes & 7, msg[vpos + 4: vpos + 4 + value_len]))
        pos += 12 + size
    return out


@pytest.mark.parametrize("name", [
    "fetch1.mytopic.1p.gzip.kafka.0821", "fetch1.mytopic.1p.snappy.kafka.0821",
    "fetch1.mytopic.1p.snappy.kafka.0822"])
def test_kafka_rust_broker_payloads(shared_fixtures: Path, name: str) -> None:
    root = shared_fixtures / "kafka-rust__kafka-rust"
    log = (root / "derived_message_sets" / f"{name}.my-topic-0.log").read_bytes()
    lines = (root / "test-data" / "fetch1.txt").read_bytes().split(b"\n")
    values = []
    wrappers = _wrapper_values(log)
    assert wrappers and all(codec != CODEC_NONE for codec, _ in wrappers)
    for codec, value in wrappers:
        inner = decompress(codec, value, magic=0, location=Location(file=name))
        assert inner == KAFKA_PYTHON[codec][1](value)
        values += [v for c, v in _wrapper_values(inner)]
    assert values == [line for line in lines if line][: len(values)]
    assert len(values) == 42


def test_snappy_java_chunked_stream(shared_fixtures: Path) -> None:
    root = shared_fixtures / "kafka-rust__kafka-rust" / "test-data"
    blob = (root / "fetch1.snappy.chunked.4k").read_bytes()
    assert decompress(CODEC_SNAPPY, blob) == (root / "fetch1.txt").read_bytes()


# --- tolerated variants --------------------------------------------------------------------


def test_snappy_raw_block_without_header() -> None:
    import cramjam

    for data in (b"x", b"short", _sample(20_000)):
        raw = bytes(cramjam.snappy.compress_raw(data))
        assert decompress(CODEC_SNAPPY, raw) == data


def test_snappy_concatenated_xerial_streams() -> None:
    a, b = _sample(40_000), b"second stream"
    assert decompress(CODEC_SNAPPY, compress(CODEC_SNAPPY, a) + compress(CODEC_SNAPPY, b)) == a + b


def test_gzip_multi_member_and_trailing_bytes() -> None:
    a, b = _sample(3000), b"member two"
    two = compress(CODEC_GZIP, a) + gzip.compress(b)
    assert decompress(CODEC_GZIP, two) == a + b
    assert decompress(CODEC_GZIP, compress(CODEC_GZIP, a) + b"\x00\x00junk") == a


def test_zstd_multi_frame_with_and_without_content_size() -> None:
    a, b = _sample(200_000), _sample(5000)
    with_size = zstandard.ZstdCompressor(level=1).compress(b)
    buf = io.BytesIO()
    with zstandard.ZstdCompressor(level=3, write_checksum=True).stream_writer(
            buf, closefd=False) as writer:
        writer.write(a)
    streamed = buf.getvalue()
    skippable = struct.pack("<II", 0x184D2A50, 3) + b"abc"
    assert decompress(CODEC_ZSTD, streamed + skippable + with_size + streamed) == a + b + a


def test_lz4_optional_frame_features() -> None:
    data = _sample(150_000)
    checked = lz4.frame.compress(data, block_linked=False, block_checksum=True,
                                 block_size=lz4.frame.BLOCKSIZE_MAX256KB)
    assert decompress(CODEC_LZ4, checked) == data
    # decoding stops at the end mark; what follows is ignored, as in Lz4BlockInputStream
    assert decompress(CODEC_LZ4, compress(CODEC_LZ4, data) + b"garbage") == data


# --- size bound ----------------------------------------------------------------------------


@pytest.mark.parametrize("codec", [CODEC_NONE, *CODECS])
def test_max_size_bound(codec: int) -> None:
    bomb = compress(codec, bytes(1_000_000))
    assert decompress(codec, bomb, max_size=1_000_000) == bytes(1_000_000)
    with pytest.raises(CompressionError, match="1000") as info:
        decompress(codec, bomb, max_size=1000, location=Location("x.log", 99, 7))
    assert info.value.location == Location("x.log", 99, 7)
    assert DEFAULT_MAX_DECOMPRESSED >= 64 * 1024 * 1024


def test_bound_holds_for_foreign_framings() -> None:
    big = bytes(3_000_000)
    blobs = {
        CODEC_ZSTD: zstandard.ZstdCompressor().compress(big),  # with content size
        CODEC_LZ4: lz4.frame.compress(big, block_linked=False),
        CODEC_SNAPPY: kp_codec.snappy_encode(big, xerial_compatible=False),
        CODEC_GZIP: gzip.compress(big) + gzip.compress(big),
    }
    for codec, blob in blobs.items():
        with pytest.raises(CompressionError):
            decompress(codec, blob, max_size=100_000)


def test_zstd_lying_content_size_is_refused_before_allocation() -> None:
    blob = bytearray(zstandard.ZstdCompressor().compress(b"abc" * 10))
    fhd = blob[4]
    assert fhd >> 6 == 0 and fhd & 0x20  # single segment, 1-byte content size
    # rewrite as an 8-byte content size claiming 1 TiB
    claimed = bytes(blob[:4]) + bytes([0xE0 | (fhd & 0x1F)]) + (1 << 40).to_bytes(8, "little")
    with pytest.raises(CompressionError, match="declares"):
        decompress(CODEC_ZSTD, claimed + bytes(blob[6:]))


# --- corrupt input -------------------------------------------------------------------------


def _lz4_header(flg: int, bd: int) -> bytes:
    import xxhash

    return b"\x04\x22\x4d\x18" + bytes([flg, bd, (xxhash.xxh32_intdigest(bytes([flg, bd])) >> 8) & 0xFF])


CORRUPT = [
    (CODEC_GZIP, b"", "empty"),
    (CODEC_GZIP, b"\x1f\x8b\x08\x00", "truncated"),
    (CODEC_GZIP, b"not gzip at all", None),
    (CODEC_SNAPPY, b"", "empty"),
    (CODEC_SNAPPY, XERIAL_HEADER + struct.pack(">i", -5), "negative"),
    (CODEC_SNAPPY, XERIAL_HEADER + struct.pack(">i", 100) + b"abc", "truncated"),
    (CODEC_SNAPPY, XERIAL_HEADER + b"\x00\x00", "block length"),
    (CODEC_SNAPPY, XERIAL_HEADER + XERIAL_HEADER[:4] + b"xx", "header"),
    (CODEC_SNAPPY, XERIAL_HEADER[:8] + bytes(8), "version"),
    (CODEC_SNAPPY, b"\xff\xff\xff\xff\xff\xff", "preamble"),
    (CODEC_SNAPPY, b"\x05abc", None),
    (CODEC_LZ4, b"", "magic"),
    (CODEC_LZ4, b"\x04\x22\x4d\x19\x60\x40\x82\x00\x00\x00\x00", "magic"),
    (CODEC_LZ4, _lz4_header(0x40, 0x40) + bytes(4), "dependent"),
    (CODEC_LZ4, _lz4_header(0x61, 0x40) + bytes(8), "dictionary"),
    (CODEC_LZ4, _lz4_header(0xA0, 0x40) + bytes(4), "version"),
    (CODEC_LZ4, _lz4_header(0x60, 0x30) + bytes(4), "BD"),
    (CODEC_LZ4, _lz4_header(0x60, 0x41) + bytes(4), "BD"),
    (CODEC_LZ4, LZ4_KAFKA_HEADER, "end mark"),
    (CODEC_LZ4, LZ4_KAFKA_HEADER + struct.pack("<I", 70_000) + bytes(70_000), "exceeds"),
    (CODEC_LZ4, LZ4_KAFKA_HEADER + struct.pack("<I", 10) + b"abc", "truncated"),
    (CODEC_LZ4, LZ4_KAFKA_HEADER + struct.pack("<I", 3) + b"\xff\xff\xff" + bytes(4), None),
    (CODEC_LZ4, _lz4_header(0x70, 0x40) + struct.pack("<I", 0x80000003) + b"abc" + bytes(8),
     "checksum"),
    (CODEC_ZSTD, b"", "empty"),
    (CODEC_ZSTD, b"\x28\xb5\x2f\xfd\x00", "truncated"),
    (CODEC_ZSTD, b"garbage!garbage!", "magic"),
    (CODEC_ZSTD, b"\x28\xb5\x2f\xfd\x00\x58\x07\x00\x00", "reserved"),
    (7, b"abc", "unknown"),
]


@pytest.mark.parametrize("codec,blob,match", CORRUPT)
def test_corrupt_inputs(codec: int, blob: bytes, match: str | None) -> None:
    where = Location("00000000000000000000.log", 61, 0)
    with pytest.raises(CompressionError, match=match) as info:
        decompress(codec, blob, location=where)
    assert info.value.location == where


@pytest.mark.parametrize("codec", CODECS)
def test_truncations_are_errors(codec: int) -> None:
    blob = compress(codec, _sample(100_000))
    for cut in (1, 3, 10, len(blob) // 2, len(blob) - 1):
        try:
            out = decompress(codec, blob[:cut])
        except CompressionError:
            continue
        # a cut that still decodes (snappy's raw fallback, gzip) must not invent data
        assert _sample(100_000).startswith(out) and len(out) < 100_000


@settings(max_examples=150, deadline=None)
@given(codec=st.sampled_from(CODECS), data=st.data())
def test_mutated_payloads_raise_only_compression_error(codec: int, data: st.DataObject) -> None:
    blob = bytearray(compress(codec, _sample(3000)))
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(blob) - 1))
        blob[pos] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(blob)))
    try:
        out = decompress(codec, bytes(blob[:cut]), max_size=10_000)
    except CompressionError:
        return
    assert isinstance(out, bytes) and len(out) <= 10_000


def test_zstd_refused_below_magic_2() -> None:
    with pytest.raises(CompressionError, match="magic 1"):
        decompress(CODEC_ZSTD, compress(CODEC_ZSTD, b"x"), magic=1)
    with pytest.raises(CompressionError, match="magic 0"):
        compress(CODEC_ZSTD, b"x", magic=0)


def test_bad_level_is_compression_error() -> None:
    with pytest.raises(CompressionError):
        compress(CODEC_GZIP, b"x", level=42)
    with pytest.raises(CompressionError, match="unknown"):
        compress(9, b"x")


# --- library loading -----------------------------------------------------------------------


@pytest.mark.parametrize("codec,module,hint", [
    (CODEC_SNAPPY, "cramjam", "pip install cramjam"),
    (CODEC_LZ4, "lz4.block", "pip install lz4"),
    (CODEC_LZ4, "xxhash", "pip install lz4 xxhash"),
    (CODEC_LZ4, "cramjam", "'cramjam' is missing: pip install lz4 xxhash cramjam"),
    (CODEC_ZSTD, "zstandard", "pip install zstandard"),
])
def test_missing_library_gives_install_hint(monkeypatch: pytest.MonkeyPatch, codec: int,
                                            module: str, hint: str) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` raise ImportError
    with pytest.raises(MissingCodecError, match=hint):
        require_codec(codec)
    with pytest.raises(MissingCodecError, match=hint) as info:
        decompress(codec, b"\x00" * 20, location=Location("f.log", 5, 0))
    assert info.value.location.file == "f.log"
    # other codecs still work without it
    assert decompress(CODEC_GZIP, compress(CODEC_GZIP, b"ok")) == b"ok"


def test_require_codec_accepts_installed_and_rejects_unknown() -> None:
    for codec in (CODEC_NONE, *CODECS):
        require_codec(codec)
    with pytest.raises(CompressionError, match="unknown"):
        require_codec(5)


def test_import_loads_no_codec_library() -> None:
    code = (
        "import sys, kafkalog_spark.codec.compression.codecs\n"
        "bad = [m for m in ('cramjam', 'snappy', 'lz4', 'zstandard', 'xxhash') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# --- decompressing into a shared array (what a decode chunk does) ---------------------------


@pytest.mark.parametrize("codec", [CODEC_NONE, *CODECS])
def test_decompress_into_appends_payloads_side_by_side(codec: int) -> None:
    payloads = [_sample(n) for n in (0, 100, 70_000, 300_000, 5)]
    sink = Sink(16)  # far too small: grows, keeping what is written
    sizes = [decompress_into(sink, codec, compress(codec, p)) for p in payloads]
    assert sizes == [len(p) for p in payloads]
    assert sink.tobytes() == b"".join(payloads)
    assert bytes(sink.data()) == b"".join(payloads)


@pytest.mark.parametrize("codec", CODECS)
def test_decompress_into_error_leaves_written_bytes(codec: int) -> None:
    sink = Sink()
    decompress_into(sink, codec, compress(codec, b"first payload"))
    blob = compress(codec, _sample(200_000))
    for bad, match in ((blob[: len(blob) // 2], None), (blob, "more than 1000 bytes")):
        with pytest.raises(CompressionError, match=match) as info:
            decompress_into(sink, codec, bad, max_size=1000, location=Location("f.log", 9, 3))
        assert info.value.location == Location("f.log", 9, 3)
        assert sink.tobytes() == b"first payload"  # the failed payload is not counted
    decompress_into(sink, codec, compress(codec, b", second"))
    assert sink.tobytes() == b"first payload, second"


def test_lz4_header_shortcut_only_for_kafkas_exact_header() -> None:
    blob = bytearray(compress(CODEC_LZ4, _sample(1000)))
    assert bytes(blob[:7]) == LZ4_KAFKA_HEADER
    blob[6] = LZ4_KAFKA_HEADER_MAGIC0[6]  # the pre-KIP-57 checksum: only magic 0 accepts it
    assert decompress(CODEC_LZ4, bytes(blob), magic=0) == _sample(1000)
    with pytest.raises(CompressionError, match="HC"):
        decompress(CODEC_LZ4, bytes(blob), magic=1)
    blob[5] = 0x50  # 256 KiB blocks: the full check, its checksum now wrong for every magic > 0
    with pytest.raises(CompressionError, match="HC"):
        decompress(CODEC_LZ4, bytes(blob), magic=2)
    assert decompress(CODEC_LZ4, bytes(blob), magic=0) == _sample(1000)
