"""Wire layouts (codec layer): the one definition of every fixed-size structure's byte offsets.

Kernels and Python code both take their offsets from here. Integers are big-endian.

Common entry prefix (every .log entry, every format)::

    0  int64  offset        v0/v1: the (wrapper) message's offset = its LAST offset; v2: baseOffset
    8  int32  size          bytes that follow this field (entry length - 12)
    12 int32  crc | PLE     v0/v1: CRC32 of [16, 12+size); v2: partitionLeaderEpoch
    16 int8   magic         0, 1 or 2

Legacy message v0 / v1 (after the 12-byte prefix)::

    12 uint32 crc           CRC32 (zlib) over [16, end)
    16 int8   magic
    17 int8   attributes    bits 0-2 codec, bit 3 timestamp type (v1)
    18 int64  timestamp     v1 only
    18|26 int32 key length  -1 = null, then key bytes, then int32 value length, value bytes

Record batch v2 (61-byte header)::

    0  int64  baseOffset
    8  int32  batchLength           bytes after this field
    12 int32  partitionLeaderEpoch
    16 int8   magic = 2
    17 uint32 crc                   CRC32C over [21, end)
    21 int16  attributes            0-2 codec, 3 ts type, 4 transactional, 5 control, 6 delete horizon
    23 int32  lastOffsetDelta
    27 int64  baseTimestamp
    35 int64  maxTimestamp
    43 int64  producerId
    51 int16  producerEpoch
    53 int32  baseSequence
    57 int32  recordsCount
    61        records (compressed as a whole when the codec is not none)
"""

from __future__ import annotations

import struct

# --- common prefix -------------------------------------------------------------------------
OFFSET_OFFSET = 0
SIZE_OFFSET = 8
LOG_OVERHEAD = 12
MAGIC_OFFSET = 16
HEADER_SIZE_UP_TO_MAGIC = 17
ENTRY_PREFIX = struct.Struct(">qiib")  # offset, size, crc|PLE, magic

# --- legacy v0/v1 --------------------------------------------------------------------------
LEGACY_CRC_OFFSET = 12
LEGACY_ATTRIBUTES_OFFSET = 17
LEGACY_TIMESTAMP_OFFSET = 18
LEGACY_KEY_LENGTH_OFFSET_V0 = 18
LEGACY_KEY_LENGTH_OFFSET_V1 = 26
RECORD_OVERHEAD_V0 = 14  # crc 4 + magic 1 + attributes 1 + key len 4 + value len 4
RECORD_OVERHEAD_V1 = 22  # + timestamp 8
LEGACY_CODEC_MASK = 0x07
LEGACY_TIMESTAMP_TYPE_MASK = 0x08

# --- v2 record batch -----------------------------------------------------------------------
BATCH_LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
PRODUCER_EPOCH_OFFSET = 51
BASE_SEQUENCE_OFFSET = 53
RECORDS_COUNT_OFFSET = 57
RECORDS_OFFSET = 61
RECORD_BATCH_OVERHEAD = 61
BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")

CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG_MASK = 0x10
CONTROL_FLAG_MASK = 0x20
DELETE_HORIZON_FLAG_MASK = 0x40

# --- codecs and timestamp types --------------------------------------------------------------
CODEC_NONE, CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
CODEC_IDS = {name: cid for cid, name in CODEC_NAMES.items()}

NO_TIMESTAMP_TYPE = -1
CREATE_TIME = 0
LOG_APPEND_TIME = 1
TIMESTAMP_TYPE_NAMES = {-1: "NoTimestampType", 0: "CreateTime", 1: "LogAppendTime"}

# --- sentinels (CR/RecordBatch.java) ---------------------------------------------------------
NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
INT32_MAX = 2**31 - 1
