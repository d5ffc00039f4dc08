"""Legacy message format v0/v1 specifics (codec layer): wrapper values and codec rules.

One v0/v1 log entry (KAFKA_FORMATS §3.1; offsets from :mod:`kafkalog_spark.codec.layout`)::

    0  int64  offset        a compressed wrapper's offset is its LAST inner offset
    8  int32  size          N = bytes from the CRC to the end of the value
    12 uint32 crc           CRC-32 over [16, 12+N)
    16 int8   magic         0 or 1
    17 int8   attributes    bits 0-2 codec (0 none, 1 gzip, 2 snappy, 3 lz4), bit 3 ts type (v1)
    18 int64  timestamp     v1 only
    18|26 int32 key length  negative = null, then the key bytes
    .. int32 value length   negative = null, then the value bytes

A compressed wrapper's value is a whole inner message set in this same layout (one level deep,
inner messages uncompressed). Record-level decoding of messages and inner sets lives in the
shared kernels (:mod:`kafkalog_spark.codec.records._decode_kernels`); this module holds what the Python
side needs before decompression.
"""

from __future__ import annotations

import numpy as np

from ...errors import CorruptRecordError, Location, UnsupportedFormatError
from .. import layout as L
from .._bytes import load_i32

# zstd (4) exists only for magic 2; 5-7 are unknown everywhere (CR/CompressionType.forId)
LEGACY_MAX_CODEC = L.CODEC_LZ4


def check_legacy_codec(codec: int, location: Location) -> None:
    """Reject a v0/v1 codec id that Kafka rejects (zstd and the unassigned ids 5-7).

    Raises
    ------
    UnsupportedFormatError
        The codec id is not valid for a legacy message.
    """
    if codec > LEGACY_MAX_CODEC:
        name = L.CODEC_NAMES.get(codec, f"unknown codec id {codec}")
        raise UnsupportedFormatError(f"compression {name} is not valid for message format "
                                     "v0/v1", location)


def wrapper_value_range(buf: np.ndarray, position: int, magic: int,
                        location: Location) -> tuple[int, int]:
    """Byte range ``[start, end)`` of a compressed wrapper's value (the compressed inner set).

    Parameters
    ----------
    buf
        The ``uint8`` buffer holding the entry.
    position
        Byte position of the entry (its offset field) in ``buf``.
    magic
        The wrapper's magic (0 or 1).
    location
        Where the wrapper sits, for errors.

    Raises
    ------
    CorruptRecordError
        Key/value lengths that do not fit the message, or a null value (Kafka:
        "Found invalid compressed record set with null value").
    """
    msg_end = position + L.LOG_OVERHEAD + int(load_i32(buf, position + L.SIZE_OFFSET))
    k = position + (L.LEGACY_KEY_LENGTH_OFFSET_V1 if magic == 1 else L.LEGACY_KEY_LENGTH_OFFSET_V0)
    key_length = int(load_i32(buf, k))
    v = k + 4 + max(key_length, 0)
    if v + 4 > msg_end:
        raise CorruptRecordError("wrapper message key length runs past the message", location)
    value_length = int(load_i32(buf, v))
    if value_length < 0:
        raise CorruptRecordError("compressed wrapper message has a null value", location)
    if v + 4 + value_length != msg_end:
        raise CorruptRecordError("wrapper message key/value lengths do not match its size",
                                 location)
    return v + 4, msg_end
