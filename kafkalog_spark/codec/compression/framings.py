"""Kafka's compression framings (codec layer): gzip members, xerial snappy streams, Kafka's lz4
frame subset and zstd frames, each decoded (bounded by ``max_size``) and encoded.

Each codec has a framing of its own on top of the raw algorithm::

    gzip    RFC 1952 members, possibly concatenated (java GZIPInputStream accepts several)
    snappy  xerial snappy-java stream:
              0  8  magic 82 53 4E 41 50 50 59 00
              8  4  int32 BE version (>= 1)
              12 4  int32 BE minimum compatible version
              16 .. blocks: int32 BE length + raw snappy block (<= 32 KiB input each);
                    a length equal to 0x82534E41 starts another concatenated stream
            or, without the magic (or shorter than 16 bytes), ONE raw snappy block
    lz4     LZ4 frame, Kafka subset (KIP-57), little-endian:
              0  4  magic 04 22 4D 18
              4  1  FLG  version 01, independent blocks, [block checksum], [content size],
                          [content checksum]; no dictionary id
              5  1  BD   block max size code 4..7 (64 KiB .. 4 MiB)
              6  8  content size, only if FLG bit 3
              .  1  HC   (xxh32(FLG BD [size]) >> 8) & 0xFF; magic 0 hashed the magic too and
                         Kafka does not verify it for magic 0 data
              .. blocks: uint32 size (bit 31 = stored uncompressed), data, [xxh32 if flagged];
                 size 0 = end mark, then [content checksum]
    zstd    one or more zstd frames, written by a streaming encoder so without content size

The decoders and encoders here take the codec library :mod:`.codecs` loaded for them;
:data:`_DECODERS` / :data:`_ENCODERS` map a codec id to them.
"""

from __future__ import annotations

import struct
import zlib
from typing import Any

import numpy as np

from kafkalog_spark.codec.compression.sink import Sink
from kafkalog_spark.errors import CompressionError, Location

_INT32_BE = struct.Struct(">i")
_UINT32_LE = struct.Struct("<I")

# --- snappy (xerial) -----------------------------------------------------------------------
XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + b"\x00\x00\x00\x01\x00\x00\x00\x01"
XERIAL_HEADER_SIZE = 16
XERIAL_BLOCK_SIZE = 32 * 1024
XERIAL_MAGIC_AS_INT32 = _INT32_BE.unpack(XERIAL_MAGIC[:4])[0]  # 0x82534E41 read as int32

# --- lz4 frame -----------------------------------------------------------------------------
LZ4_MAGIC = b"\x04\x22\x4d\x18"
LZ4_FLG_VERSION_MASK = 0xC0
LZ4_FLG_VERSION = 0x40
LZ4_FLG_BLOCK_INDEPENDENT = 0x20
LZ4_FLG_BLOCK_CHECKSUM = 0x10
LZ4_FLG_CONTENT_SIZE = 0x08
LZ4_FLG_CONTENT_CHECKSUM = 0x04
LZ4_FLG_RESERVED = 0x03  # bit 0 is the dictionary-id flag, bit 1 reserved; Kafka wants both 0
LZ4_BD_RESERVED = 0x8F
LZ4_STORED_BLOCK = 0x80000000
LZ4_KAFKA_BLOCK_SIZE = 64 * 1024
LZ4_KAFKA_HEADER = LZ4_MAGIC + b"\x60\x40\x82"  # FLG 0x60, BD 0x40 (64 KiB), correct HC
LZ4_KAFKA_HEADER_MAGIC0 = LZ4_MAGIC + b"\x60\x40\x1a"  # pre-KIP-57 HC, hashed with the magic
LZ4_DEFAULT_LEVEL = 9  # Kafka's default; level 9 means lz4-java's fast compressor

GZIP_DEFAULT_LEVEL = 6  # java.util.zip.Deflater.DEFAULT_COMPRESSION is zlib's 6
# java.util.zip.GZIPOutputStream header: magic, deflate, no flags, mtime 0, XFL 0, OS 255 (JDK 16+)
_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"


def _too_large(codec: str, max_size: int, location: Location | None) -> CompressionError:
    return CompressionError(f"{codec} payload decompresses to more than {max_size} bytes", location)


# --- gzip ----------------------------------------------------------------------------------


def _gzip_decode(_lib: None, view: memoryview, _magic: int, max_size: int,
                 location: Location | None, sink: Sink) -> None:
    if len(view) == 0:
        raise CompressionError("gzip payload is empty", location)
    produced = 0
    rest: memoryview | bytes = view
    while True:
        member = zlib.decompressobj(16 + zlib.MAX_WBITS)
        # max_length one past the budget: a larger member is detected without being inflated
        out = member.decompress(rest, max_size - produced + 1)
        produced += len(out)
        if produced > max_size:
            raise _too_large("gzip", max_size, location)
        if not member.eof:
            raise CompressionError("gzip payload is truncated (no end of member)", location)
        sink.append(out)
        rest = member.unused_data
        # GZIPInputStream reads another member only when a gzip header follows; other trailing
        # bytes end the stream
        if not rest.startswith(b"\x1f\x8b"):
            break


def _gzip_encode(_lib: None, view: memoryview, _magic: int, level: int | None) -> bytes:
    deflater = zlib.compressobj(GZIP_DEFAULT_LEVEL if level is None else level,
                                zlib.DEFLATED, -zlib.MAX_WBITS)
    body = deflater.compress(view) + deflater.flush()
    trailer = struct.pack("<II", zlib.crc32(view) & 0xFFFFFFFF, len(view) & 0xFFFFFFFF)
    return b"".join((_GZIP_HEADER, body, trailer))


# --- snappy --------------------------------------------------------------------------------


def _snappy_raw_length(block: memoryview, location: Location | None) -> int:
    """The uncompressed length a raw snappy block declares (its uvarint preamble, <= 2^32-1)."""
    result = 0
    for i in range(min(5, len(block))):
        byte = block[i]
        result |= (byte & 0x7F) << (7 * i)
        if byte < 0x80:
            if result > 0xFFFFFFFF:
                break
            return result
    raise CompressionError("snappy block has an invalid length preamble", location)


def _snappy_decode(snappy: Any, view: memoryview, _magic: int, max_size: int,
                   location: Location | None, sink: Sink) -> None:
    if len(view) == 0:
        raise CompressionError("snappy payload is empty", location)
    if len(view) < XERIAL_HEADER_SIZE or view[:8] != XERIAL_MAGIC:
        blocks = [view]  # snappy-java's fallback: the whole input is one raw block
    else:
        blocks = _xerial_blocks(view, location)
    lengths = []
    total = 0
    for block in blocks:
        n = _snappy_raw_length(block, location)
        total += n
        if total > max_size:
            raise _too_large("snappy", max_size, location)
        lengths.append(n)
    target = sink.reserve(total)  # the preambles give the exact size: decoded in place
    pos = 0
    for block, n in zip(blocks, lengths):
        written = snappy.decompress_raw_into(block, target[pos:pos + n])
        if written != n:
            raise CompressionError(
                f"snappy block declares {n} bytes but decodes to {written}", location)
        pos += n
    sink.commit(total)


def _xerial_blocks(view: memoryview, location: Location | None) -> list[memoryview]:
    blocks = []
    pos = _check_xerial_header(view, 0, location)
    end = len(view)
    while pos < end:
        if end - pos < 4:
            raise CompressionError(f"snappy stream ends inside a block length at {pos}", location)
        length = _INT32_BE.unpack_from(view, pos)[0]
        if length == XERIAL_MAGIC_AS_INT32:
            pos = _check_xerial_header(view, pos, location)  # a concatenated xerial stream
            continue
        if length < 0:
            raise CompressionError(f"snappy block length {length} at {pos} is negative", location)
        pos += 4
        if end - pos < length:
            raise CompressionError(
                f"snappy block of {length} bytes at {pos} is truncated ({end - pos} left)",
                location)
        blocks.append(view[pos:pos + length])
        pos += length
    return blocks


def _check_xerial_header(view: memoryview, pos: int, location: Location | None) -> int:
    if len(view) - pos < XERIAL_HEADER_SIZE or view[pos:pos + 8] != XERIAL_MAGIC:
        raise CompressionError(f"snappy stream header at {pos} is truncated or corrupt", location)
    version, compatible = struct.unpack_from(">ii", view, pos + 8)
    if version < 1 or compatible < 1:
        raise CompressionError(
            f"snappy stream version {version}/{compatible} at {pos} is incompatible", location)
    return pos + XERIAL_HEADER_SIZE


def _snappy_encode(snappy: Any, view: memoryview, _magic: int, _level: int | None) -> bytes:
    parts = [XERIAL_HEADER]
    for start in range(0, len(view), XERIAL_BLOCK_SIZE):
        block = bytes(snappy.compress_raw(view[start:start + XERIAL_BLOCK_SIZE]))
        parts.append(_INT32_BE.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


# --- lz4 -----------------------------------------------------------------------------------


def _lz4_decode(lib: Any, view: memoryview, magic: int, max_size: int,
                location: Location | None, sink: Sink) -> None:
    _, block_into, xxh32 = lib
    end = len(view)
    if end < 7 or view[:4] != LZ4_MAGIC:
        raise CompressionError("lz4 payload does not start with an lz4 frame magic", location)
    pos, max_block = _lz4_header(view, magic, xxh32, location)
    checksummed = bool(view[4] & LZ4_FLG_BLOCK_CHECKSUM)
    produced = 0
    while True:
        if end - pos < 4:
            raise CompressionError(f"lz4 frame ends prematurely at {pos} (no end mark)", location)
        word = _UINT32_LE.unpack_from(view, pos)[0]
        pos += 4
        size = word & ~LZ4_STORED_BLOCK
        if size == 0:  # end mark (Kafka also ends on a stored-flagged zero size)
            break
        if size > max_block:
            raise CompressionError(f"lz4 block of {size} bytes exceeds max {max_block}", location)
        if end - pos < size + (4 if checksummed else 0):
            raise CompressionError(f"lz4 block at {pos - 4} is truncated", location)
        block = view[pos:pos + size]
        pos += size
        if checksummed:
            if xxh32(block, 0) != _UINT32_LE.unpack_from(view, pos)[0]:
                raise CompressionError(f"lz4 block checksum mismatch at {pos - size}", location)
            pos += 4
        if word & LZ4_STORED_BLOCK:
            sink.append(block)
        else:  # decoded in place; the library fails rather than write past max_block bytes
            size = block_into(block, sink.reserve(max_block), output_len=max_block)
            sink.commit(size)
        produced += size
        if produced > max_size:
            raise _too_large("lz4", max_size, location)


def _lz4_header(view: memoryview, magic: int, xxh32: Any,
                location: Location | None) -> tuple[int, int]:
    """Check an lz4 frame descriptor; returns where the blocks start and the largest block."""
    flg, bd = view[4], view[5]
    if view[4:6] == LZ4_KAFKA_HEADER[4:6] and (magic == 0 or view[6] == LZ4_KAFKA_HEADER[6]):
        return 7, LZ4_KAFKA_BLOCK_SIZE  # what Kafka writes: FLG, BD and HC known good
    if flg & LZ4_FLG_VERSION_MASK != LZ4_FLG_VERSION:
        raise CompressionError(f"lz4 frame version in FLG {flg:#04x} is not 1", location)
    if flg & LZ4_FLG_RESERVED:
        raise CompressionError(f"lz4 FLG {flg:#04x}: dictionary id / reserved bits set", location)
    if not flg & LZ4_FLG_BLOCK_INDEPENDENT:
        raise CompressionError("lz4 dependent (linked) blocks are unsupported by Kafka", location)
    size_code = (bd >> 4) & 0x07
    if bd & LZ4_BD_RESERVED or size_code < 4:
        raise CompressionError(f"lz4 BD {bd:#04x}: bad block size code or reserved bits", location)
    pos = 6 + (8 if flg & LZ4_FLG_CONTENT_SIZE else 0)
    if len(view) < pos + 1:
        raise CompressionError("lz4 frame header is truncated", location)
    # magic 0 data was written with the magic bytes inside the hash; Kafka skips the check then
    if magic >= 1 and (xxh32(view[4:pos], 0) >> 8) & 0xFF != view[pos]:
        raise CompressionError("lz4 frame descriptor checksum (HC) mismatch", location)
    return pos + 1, 1 << (2 * size_code + 8)


def lz4_single_blocks(buf: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Where ``buf[start:end]`` is exactly the lz4 frame Kafka writes for a small batch — its
    header (``LZ4_KAFKA_HEADER``), ONE compressed block of at most 64 KiB, the end mark and
    nothing after — the block's position; elsewhere -1. Vectorised over many payloads: those
    found decode with one library call each and no frame walk in Python, exactly as
    :func:`_lz4_decode` would decode them (no option, checksum or stored block is skipped);
    the others take :func:`_lz4_decode`."""
    start = np.asarray(start, np.int64)
    n = np.asarray(end, np.int64) - start
    ok = n >= 15  # header 7, block size 4, end mark 4
    at = np.where(ok, start, 0)
    for i, byte in enumerate(LZ4_KAFKA_HEADER):
        ok &= buf[at + i] == byte
    size = np.zeros(len(at), np.int64)
    for i in range(4):
        size |= buf[at + 7 + i].astype(np.int64) << (8 * i)
    ok &= (size > 0) & (size <= LZ4_KAFKA_BLOCK_SIZE) & (n == 15 + size)
    mark = np.where(ok, at + 11 + size, 0)
    ok &= (buf[mark] == 0) & (buf[mark + 1] == 0) & (buf[mark + 2] == 0)
    ok &= (buf[mark + 3] & 0x7F) == 0  # Kafka also ends on a stored-flagged zero size
    return np.where(ok, at + 11, -1)


def _lz4_encode(lib: Any, view: memoryview, magic: int, level: int | None) -> bytes:
    block_codec, _, _ = lib
    if level is None or level == LZ4_DEFAULT_LEVEL:
        options: dict[str, Any] = {"mode": "default"}
    else:
        options = {"mode": "high_compression", "compression": level}
    parts = [LZ4_KAFKA_HEADER_MAGIC0 if magic == 0 else LZ4_KAFKA_HEADER]
    for start in range(0, len(view), LZ4_KAFKA_BLOCK_SIZE):
        raw = view[start:start + LZ4_KAFKA_BLOCK_SIZE]
        packed = block_codec.compress(raw, store_size=False, **options)
        if len(packed) >= len(raw):  # incompressible: stored, flagged by the high bit
            parts.append(_UINT32_LE.pack(len(raw) | LZ4_STORED_BLOCK))
            parts.append(raw.tobytes())
        else:
            parts.append(_UINT32_LE.pack(len(packed)))
            parts.append(packed)
    parts.append(b"\x00\x00\x00\x00")
    return b"".join(parts)
