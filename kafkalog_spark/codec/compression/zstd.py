"""zstd payloads of Kafka batches (codec layer).

The frame and block header walk checks a payload is complete before decoding (the zstandard stream reader stops silently at a truncated
frame), bounded decompression with one decompressor per thread, and compression at Kafka's
default level. Registered with the other codecs in :mod:`.codecs`."""

from __future__ import annotations

import threading
from typing import Any

from ...errors import CompressionError, Location
from .framings import _UINT32_LE, _too_large
from .sink import Sink

ZSTD_MAGIC = 0xFD2FB528
ZSTD_SKIPPABLE_MASK = 0xFFFFFFF0
ZSTD_SKIPPABLE_MAGIC = 0x184D2A50
ZSTD_BLOCK_MAX = 128 * 1024
ZSTD_DEFAULT_LEVEL = 3
_ZSTD_DICT_ID_SIZES = (0, 1, 2, 4)
_ZSTD_FCS_SIZES = (0, 2, 4, 8)


def _zstd_frames(view: memoryview, location: Location | None) -> list[tuple[int, int, int]]:
    """Walk zstd frame and block headers: (start, end, bound on decompressed size) per data
    frame. The zstandard stream reader stops silently at a truncated frame, so completeness is
    checked here, before decoding."""
    frames = []
    pos, end = 0, len(view)
    if end == 0:
        raise CompressionError("zstd payload is empty", location)
    while pos < end:
        if end - pos < 8:
            raise CompressionError(f"zstd frame header at {pos} is truncated", location)
        frame_magic = _UINT32_LE.unpack_from(view, pos)[0]
        if frame_magic & ZSTD_SKIPPABLE_MASK == ZSTD_SKIPPABLE_MAGIC:
            pos += 8 + _UINT32_LE.unpack_from(view, pos + 4)[0]
            if pos > end:
                raise CompressionError("zstd skippable frame is truncated", location)
            continue
        if frame_magic != ZSTD_MAGIC:
            raise CompressionError(f"no zstd frame magic at {pos}", location)
        start = pos
        fhd = view[pos + 4]
        single_segment = (fhd >> 5) & 1
        fcs_code = fhd >> 6
        fcs_size = 1 if (fcs_code == 0 and single_segment) else _ZSTD_FCS_SIZES[fcs_code]
        pos += 5 + (0 if single_segment else 1) + _ZSTD_DICT_ID_SIZES[fhd & 3]
        if end - pos < fcs_size:
            raise CompressionError(f"zstd frame header at {start} is truncated", location)
        content_size = int.from_bytes(view[pos:pos + fcs_size], "little") if fcs_size else -1
        if fcs_size == 2:
            content_size += 256  # RFC 8878: the 2-byte field is stored minus 256
        pos += fcs_size
        bound = 0
        last = False
        while not last:
            if end - pos < 3:
                raise CompressionError(f"zstd frame at {start} is truncated", location)
            header = view[pos] | (view[pos + 1] << 8) | (view[pos + 2] << 16)
            last = bool(header & 1)
            block_type = (header >> 1) & 3
            size = header >> 3
            if block_type == 3:
                raise CompressionError(f"zstd reserved block type at {pos}", location)
            # raw: size bytes; RLE: one byte repeated size times; compressed: <= 128 KiB out
            bound += ZSTD_BLOCK_MAX if block_type == 2 else size
            pos += 3 + (1 if block_type == 1 else size)
        if fhd & 0x04:
            pos += 4  # content checksum
        if pos > end:
            raise CompressionError(f"zstd frame at {start} is truncated", location)
        if content_size > bound:
            # the library would allocate the declared size before noticing it is a lie
            raise CompressionError(
                f"zstd frame at {start} declares {content_size} bytes, its blocks hold at most "
                f"{bound}", location)
        frames.append((start, pos, bound))
    return frames


_THREAD_STATE = threading.local()


def _zstd_decompressor(zstandard: Any) -> Any:
    """One decompression context per thread, reused: creating one costs more than decoding a
    small batch, and a context must not be shared between threads."""
    dctx = getattr(_THREAD_STATE, "zstd_dctx", None)
    if dctx is None:
        dctx = _THREAD_STATE.zstd_dctx = zstandard.ZstdDecompressor()
    return dctx


def _zstd_decode(zstandard: Any, view: memoryview, _magic: int, max_size: int,
                 location: Location | None, sink: Sink) -> None:
    frames = _zstd_frames(view, location)
    dctx = _zstd_decompressor(zstandard)
    produced = 0
    for start, stop, bound in frames:
        budget = max_size - produced
        frame = view[start:stop]
        if bound <= budget:
            # decoded in place into room for the bound, which the library cannot exceed; a
            # one-shot decompress() would allocate the bound (128 KiB a block) every call
            # one readinto: it returns at the frame's end or when the room is full (the walk
            # above checked the frame is whole)
            with dctx.stream_reader(frame, read_size=len(frame)) as reader:
                got = reader.readinto(sink.reserve(bound))
            sink.commit(got)
        else:
            got = _zstd_read_bounded(dctx, frame, budget, max_size, location, sink)
        produced += got


def _zstd_read_bounded(dctx: Any, frame: memoryview, budget: int, max_size: int,
                       location: Location | None, sink: Sink) -> int:
    got = 0
    with dctx.stream_reader(frame, read_size=len(frame)) as reader:
        while True:
            chunk = reader.read(min(budget - got + 1, 4 * ZSTD_BLOCK_MAX))
            if not chunk:
                break
            got += len(chunk)
            if got > budget:
                raise _too_large("zstd", max_size, location)
            sink.append(chunk)
    return got


def _zstd_encode(zstandard: Any, view: memoryview, _magic: int, level: int | None) -> bytes:
    # write_content_size=False: zstd-jni's ZstdOutputStream streams, so its frame has no size
    cctx = zstandard.ZstdCompressor(
        level=ZSTD_DEFAULT_LEVEL if level is None else level, write_content_size=False)
    return cctx.compress(view)
