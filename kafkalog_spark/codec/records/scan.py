"""Shallow walk over a ``.log`` buffer (codec layer): one row per entry, headers only.

An *entry* is a v2 record batch or a legacy v0/v1 message (a compressed wrapper counts as one
entry). The walk follows ``FileLogInputStream.nextBatch`` (KAFKA_FORMATS §2): fewer than 18 bytes
left ends the data, ``size < 14`` is corrupt, an entry running past the end is a partial tail.
Nothing is decompressed and no CRC is checked here; see :mod:`kafkalog_spark.codec.records.crc`.

The result, :class:`EntryTable`, is a struct of numpy arrays that index building, verification,
dumping and record decoding all share.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ...errors import (CorruptRecordError, KafkaLogError, Location, TruncatedDataError,
                       UnsupportedFormatError)
from .. import layout as L
from .._bytes import load_i8, load_i16, load_i32, load_i64, load_u32
from .._jit import njit

# Why a walk stopped. ``STOP_END`` is the only clean outcome.
STOP_END = 0  # reached the end (or fewer than 18 bytes remain and none do)
STOP_SHORT_TAIL = 1  # 1..17 bytes remain: too short to be an entry header
STOP_PARTIAL_ENTRY = 2  # the entry's declared size runs past the end
STOP_SIZE_TOO_SMALL = 3  # size < 14 (a zero-filled preallocated tail reads as size 0)
STOP_BAD_MAGIC = 4  # magic outside 0..2
STOP_V2_TOO_SMALL = 5  # magic 2 with size < 49 (a v2 batch header is 61 bytes)
STOP_LIMIT = 6  # the caller's entry limit was reached (not an error)
STOP_LEGACY_TOO_SMALL = 7  # v1 message with size < 22

STOP_REASONS = {
    STOP_END: "end of data",
    STOP_SHORT_TAIL: "trailing bytes too short for an entry header",
    STOP_PARTIAL_ENTRY: "entry size runs past the end of the data (partial trailing entry)",
    STOP_SIZE_TOO_SMALL: "entry size is smaller than the minimum message size 14",
    STOP_BAD_MAGIC: "unknown magic byte",
    STOP_V2_TOO_SMALL: "record batch length is smaller than the 61-byte v2 header",
    STOP_LIMIT: "entry limit reached",
    STOP_LEGACY_TOO_SMALL: "v1 message size is smaller than the minimum 22",
}
_STOP_ERRORS = {STOP_SHORT_TAIL: TruncatedDataError, STOP_PARTIAL_ENTRY: TruncatedDataError,
                STOP_BAD_MAGIC: UnsupportedFormatError}


def stop_error(stop_code: int, location: Location) -> KafkaLogError:
    """The typed error a read raises where a walk stopped before the end of its data (a
    reader, and a planner that only walked the headers, raise the same one)."""
    return _STOP_ERRORS.get(stop_code, CorruptRecordError)(STOP_REASONS[stop_code], location)


@njit(cache=True, nogil=True)
def _walk(buf, start, end, limit, fill, position, entry_size, offset, magic, attributes, crc,
          leader_epoch, last_offset_delta, base_timestamp, max_timestamp, producer_id,
          producer_epoch, base_sequence, count):
    """Walk entries in ``buf[start:end]``; when ``fill`` is set, write one row per entry.

    Returns ``(n_entries, stop_position, stop_code)``.
    """
    p = start
    n = 0
    while True:
        remaining = end - p
        if remaining == 0:
            return n, p, STOP_END
        if remaining < L.HEADER_SIZE_UP_TO_MAGIC + 1:
            return n, p, STOP_SHORT_TAIL
        if n >= limit:
            return n, p, STOP_LIMIT
        size = load_i32(buf, p + L.SIZE_OFFSET)
        mg = load_i8(buf, p + L.MAGIC_OFFSET)
        if size < L.RECORD_OVERHEAD_V0:
            return n, p, STOP_SIZE_TOO_SMALL
        if mg < 0 or mg > 2:
            return n, p, STOP_BAD_MAGIC
        if mg == 2 and size < L.RECORD_BATCH_OVERHEAD - L.LOG_OVERHEAD:
            return n, p, STOP_V2_TOO_SMALL
        if mg == 1 and size < L.RECORD_OVERHEAD_V1:
            return n, p, STOP_LEGACY_TOO_SMALL
        if size > remaining - L.LOG_OVERHEAD:
            return n, p, STOP_PARTIAL_ENTRY
        if fill:
            position[n] = p
            entry_size[n] = size + L.LOG_OVERHEAD
            offset[n] = load_i64(buf, p)
            magic[n] = mg
            if mg == 2:
                attributes[n] = load_i16(buf, p + L.ATTRIBUTES_OFFSET)
                crc[n] = load_u32(buf, p + L.CRC_OFFSET)
                leader_epoch[n] = load_i32(buf, p + L.PARTITION_LEADER_EPOCH_OFFSET)
                last_offset_delta[n] = load_i32(buf, p + L.LAST_OFFSET_DELTA_OFFSET)
                base_timestamp[n] = load_i64(buf, p + L.BASE_TIMESTAMP_OFFSET)
                max_timestamp[n] = load_i64(buf, p + L.MAX_TIMESTAMP_OFFSET)
                producer_id[n] = load_i64(buf, p + L.PRODUCER_ID_OFFSET)
                producer_epoch[n] = load_i16(buf, p + L.PRODUCER_EPOCH_OFFSET)
                base_sequence[n] = load_i32(buf, p + L.BASE_SEQUENCE_OFFSET)
                count[n] = load_i32(buf, p + L.RECORDS_COUNT_OFFSET)
            else:
                attributes[n] = load_i8(buf, p + L.LEGACY_ATTRIBUTES_OFFSET) & 0xFF
                crc[n] = load_u32(buf, p + L.LEGACY_CRC_OFFSET)
                leader_epoch[n] = -1
                last_offset_delta[n] = 0
                ts = -1
                if mg == 1:
                    ts = load_i64(buf, p + L.LEGACY_TIMESTAMP_OFFSET)
                base_timestamp[n] = ts
                max_timestamp[n] = ts
                producer_id[n] = -1
                producer_epoch[n] = -1
                base_sequence[n] = -1
                # an uncompressed legacy entry is one message; a wrapper's count needs decompression
                count[n] = 1 if (attributes[n] & L.LEGACY_CODEC_MASK) == 0 else -1
        n += 1
        p += size + L.LOG_OVERHEAD


@dataclass
class EntryTable:
    """Headers of consecutive entries of one buffer (struct of arrays, one row per entry).

    For legacy entries ``offset`` is the message (wrapper) offset, which is the entry's last
    offset; ``base_offset``/``last_offset`` give the v2 meaning where it is known without
    decompression. ``stop_position``/``stop_code`` say where and why the walk ended.
    """

    position: np.ndarray  # int64, byte position of the entry in the buffer/file
    entry_size: np.ndarray  # int32, bytes including the 12-byte prefix
    offset: np.ndarray  # int64, v2 baseOffset / legacy message offset
    magic: np.ndarray  # int8
    attributes: np.ndarray  # int16 (legacy: the attributes byte)
    crc: np.ndarray  # uint32 stored checksum
    leader_epoch: np.ndarray  # int32 (-1 for legacy)
    last_offset_delta: np.ndarray  # int32 (0 for legacy)
    base_timestamp: np.ndarray  # int64
    max_timestamp: np.ndarray  # int64 (v1: the message timestamp; v0: -1)
    producer_id: np.ndarray  # int64
    producer_epoch: np.ndarray  # int16
    base_sequence: np.ndarray  # int32
    count: np.ndarray  # int32 (-1: a legacy wrapper, unknown before decompression)
    stop_position: int
    stop_code: int
    end: int

    def __len__(self) -> int:
        return len(self.position)

    @property
    def clean(self) -> bool:
        return self.stop_code in (STOP_END, STOP_LIMIT)

    @property
    def stop_reason(self) -> str:
        return STOP_REASONS[self.stop_code]

    @cached_property
    def codec(self) -> np.ndarray:
        """Each entry's codec id (computed once: decoders ask per entry)."""
        return (self.attributes & L.CODEC_MASK).astype(np.int8)

    @property
    def last_offset(self) -> np.ndarray:
        """Last offset of each entry (v2: base + lastOffsetDelta; legacy: the message offset)."""
        return np.where(self.magic == 2, self.offset + self.last_offset_delta, self.offset)

    @property
    def next_position(self) -> int:
        return self.stop_position

    def timestamp_type(self) -> np.ndarray:
        """-1 NoTimestampType (v0), 0 CreateTime, 1 LogAppendTime."""
        t = ((self.attributes & L.TIMESTAMP_TYPE_MASK) != 0).astype(np.int32)
        return np.where(self.magic == 0, -1, t).astype(np.int32)

    def is_transactional(self) -> np.ndarray:
        return (self.magic == 2) & ((self.attributes & L.TRANSACTIONAL_FLAG_MASK) != 0)

    def is_control(self) -> np.ndarray:
        return (self.magic == 2) & ((self.attributes & L.CONTROL_FLAG_MASK) != 0)

    def has_delete_horizon(self) -> np.ndarray:
        return (self.magic == 2) & ((self.attributes & L.DELETE_HORIZON_FLAG_MASK) != 0)


def _alloc(n: int) -> tuple[np.ndarray, ...]:
    return (
        np.empty(n, np.int64), np.empty(n, np.int32), np.empty(n, np.int64), np.empty(n, np.int8),
        np.empty(n, np.int16), np.empty(n, np.uint32), np.empty(n, np.int32),
        np.empty(n, np.int32), np.empty(n, np.int64), np.empty(n, np.int64),
        np.empty(n, np.int64), np.empty(n, np.int16), np.empty(n, np.int32),
        np.empty(n, np.int32),
    )


def as_uint8(data) -> np.ndarray:
    """A read-only ``uint8`` view of bytes / bytearray / memoryview / mmap / numpy array."""
    if isinstance(data, np.ndarray):
        return data if data.dtype == np.uint8 else data.view(np.uint8)
    return np.frombuffer(data, dtype=np.uint8)


def scan_entries(data, start: int = 0, end: int | None = None,
                 max_entries: int | None = None) -> EntryTable:
    """Walk the entries of ``data[start:end]`` and return their headers.

    Positions are relative to ``data`` (not to ``start``). ``max_entries`` bounds the walk
    (``stop_code == STOP_LIMIT`` then). Never raises for bad data: the stop code says why the
    walk ended, and callers decide whether that is an error.
    """
    buf = as_uint8(data)
    end = len(buf) if end is None else min(end, len(buf))
    limit = np.iinfo(np.int64).max if max_entries is None else max_entries
    dummy = _alloc(0)
    n, _, _ = _walk(buf, start, end, limit, False, *dummy)
    arrays = _alloc(n)
    n2, stop_pos, stop_code = _walk(buf, start, end, n, True, *arrays)
    if stop_code == STOP_LIMIT and (max_entries is None or n < max_entries):
        # the fill pass stopped at exactly n entries; recompute the true reason
        _, stop_pos, stop_code = _walk(buf, stop_pos, end, limit, False, *dummy)
    assert n2 == n
    return EntryTable(*arrays, stop_position=int(stop_pos), stop_code=int(stop_code), end=end)


def scan_segment(data, file: str | None) -> EntryTable:
    """:func:`scan_entries` of a whole segment about to be read record by record or rewritten:
    a walk that stops before the end raises the typed error a read raises there
    (:func:`stop_error`), so damage is never taken for the end of the segment and dropped."""
    table = scan_entries(data)
    if not table.clean:
        raise stop_error(table.stop_code, Location(file, table.stop_position))
    return table
