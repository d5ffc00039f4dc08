"""Record-batch encoding kernels (codec layer): Arrow buffers in, v2 records sections out.

Two passes over all records of a write, each one call:

* :func:`plan_batches` walks the records once, cuts them into batches (record count, records
  section bytes, offset delta range) and sizes every record with its final deltas;
* :func:`fill_batches` writes every batch header (all fields but the CRC) and every record into
  one preallocated ``uint8`` output.

Record layout written (KAFKA_FORMATS §5)::

    varint  length          bytes from attributes to the end of the headers
    int8    attributes      0
    varlong timestampDelta  timestamp - batch baseTimestamp
    varint  offsetDelta     offset - batch baseOffset
    varint  keyLength       -1 = null key
    bytes   key
    varint  valueLength     -1 = null value (tombstone)
    bytes   value
    varint  headersCount
    per header: varint keyLength (>= 0), key (UTF-8), varint valueLength (-1 = null), value

Column arguments are numpy views of Arrow buffers: ``*_off`` int64 offsets already sliced to the
array (``off[i]..off[i+1]`` is element ``i`` in ``*_data``), ``*_bits`` the validity bitmap with
``*_bit0`` the array's bit offset (an empty bitmap means "no nulls"). Kernels never raise:
they return a status code and the index of the record at fault.
"""

from __future__ import annotations

import numpy as np

from .. import layout as L
from .._bytes import (size_of_varint, size_of_varlong, store_i16, store_i32, store_i64,
                      write_varint, write_varlong)
from .._jit import jit_disabled, njit

OK = 0
OFFSET_NOT_INCREASING = 1  # an offset <= the previous record's offset
OFFSET_DELTA_TOO_LARGE = 2  # offset - baseOffset > 2^31-1 inside a batch that may not be split
TIMESTAMP_DELTA_OVERFLOW = 3  # timestamp - baseTimestamp does not fit in int64
FIELD_TOO_LARGE = 4  # a key, value, header or record longer than 2^31-1 bytes
BATCH_TOO_LARGE = 5  # one batch's length field would exceed 2^31-1
NULL_HEADER = 6  # a null header struct or a null header key

INT64_MAX = np.int64(2**63 - 1)
INT64_MIN = np.int64(-(2**63))
# batchLength counts everything after itself: header bytes 12..61 plus the records section
_MAX_SECTION = L.INT32_MAX - (L.RECORD_BATCH_OVERHEAD - L.LOG_OVERHEAD)


def _make_memcpy():
    """``memcpy(dst + dst_pos, src + src_pos, n)`` as a numba intrinsic (made when
    :func:`copy_bytes` compiles: numba is imported then): numba's slice assignment checks for
    overlap and copies through a temporary, several times slower for ~100-byte values.
    Intrinsics exist only in compiled code: under ``NUMBA_DISABLE_JIT`` the plain-Python twin
    slices."""
    if jit_disabled():
        return _slice_copy
    from numba import types
    from numba.core import cgutils
    from numba.extending import intrinsic

    @intrinsic
    def memcpy(typingctx, dst, dst_pos, src, src_pos, n):
        sig = types.void(dst, dst_pos, src, src_pos, n)

        def codegen(context, builder, signature, args):
            d, dp, s, sp, cnt = args
            d_arr = context.make_array(signature.args[0])(context, builder, d)
            s_arr = context.make_array(signature.args[2])(context, builder, s)
            cgutils.raw_memcpy(builder, builder.gep(d_arr.data, [dp]),
                               builder.gep(s_arr.data, [sp]), cnt, 1)
            return context.get_dummy_value()

        return sig, codegen

    return memcpy


def _slice_copy(dst, dst_pos, src, src_pos, n):
    dst[dst_pos:dst_pos + n] = src[src_pos:src_pos + n]


_memcpy = None  # made by _make_memcpy when copy_bytes compiles (bind=)


@njit(cache=True, nogil=True, bind={"_memcpy": _make_memcpy})
def copy_bytes(dst, dst_pos, src, src_pos, n):
    _memcpy(dst, dst_pos, src, src_pos, n)


@njit(cache=True, nogil=True)
def _valid(bits, bit0, i):
    if bits.shape[0] == 0:
        return True
    j = bit0 + i
    return (bits[j >> 3] >> (j & 7)) & 1 == 1


@njit(cache=True, nogil=True)
def _field_length(off, bits, bit0, i):
    """Length of element ``i`` of a nullable bytes column; -1 when null (its wire value)."""
    if not _valid(bits, bit0, i):
        return np.int64(-1)
    return off[i + 1] - off[i]


@njit(cache=True, nogil=True)
def _bytes_size(off, bits, bit0, i):
    """Encoded size of a nullable bytes field (length varint + payload); -1 if too long."""
    n = _field_length(off, bits, bit0, i)
    if n < 0:
        return np.int64(1)
    if n > L.INT32_MAX:
        return np.int64(-1)
    return size_of_varint(n) + n


@njit(cache=True, nogil=True)
def _delta_overflows(ts, base):
    if base < 0 and ts >= 0:
        return ts > INT64_MAX + base
    if base > 0 and ts < 0:
        return ts < INT64_MIN + base
    return False


@njit(cache=True, nogil=True)
def payload_sizes(n, k_off, k_bits, k_bit0, v_off, v_bits, v_bit0, h_off, h_bits, h_bit0, s_bits,
                  s_bit0, hk_off, hk_bits, hk_bit0, hv_off, hv_bits, hv_bit0, has_headers, out):
    """Bytes of key, value and headers of every record (the part that does not depend on the
    batch it lands in). Returns ``(status, record index)``."""
    for i in range(n):
        ks = _bytes_size(k_off, k_bits, k_bit0, i)
        vs = _bytes_size(v_off, v_bits, v_bit0, i)
        if ks < 0 or vs < 0:
            return FIELD_TOO_LARGE, i
        size = ks + vs
        count = np.int64(0)
        if has_headers and _valid(h_bits, h_bit0, i):
            for j in range(h_off[i], h_off[i + 1]):
                if not _valid(s_bits, s_bit0, j) or not _valid(hk_bits, hk_bit0, j):
                    return NULL_HEADER, i
                hks = _bytes_size(hk_off, hk_bits, hk_bit0, j)
                hvs = _bytes_size(hv_off, hv_bits, hv_bit0, j)
                if hks < 0 or hvs < 0:
                    return FIELD_TOO_LARGE, i
                size += hks + hvs
            count = h_off[i + 1] - h_off[i]
        if count > L.INT32_MAX:
            return FIELD_TOO_LARGE, i
        size += size_of_varint(count)
        out[i] = size
    return OK, -1


@njit(cache=True, nogil=True)
def plan_batches(n, payload, ts, rec_off, max_records, max_bytes, may_split, fixed_start,
                 fixed_base_off, fixed_base_ts, has_fixed_base_ts, body, batch_start,
                 batch_section, batch_base_off, batch_base_ts, batch_max_ts, batch_max_ts_off):
    """Cut records ``0..n`` into batches and size every record body with its final deltas.

    A batch closes before a record when it already holds ``max_records`` records, when the
    record would push its records section past ``max_bytes`` (a record alone is never split),
    or when the record's offset delta would not fit in an int32. With ``may_split`` false the
    batches are the caller's instead and those two cases are errors: batch ``b`` holds records
    ``fixed_start[b]..fixed_start[b+1]`` (each at least one), has base offset
    ``fixed_base_off[b]`` (compaction keeps a batch's base offset when its first record is gone)
    and, where ``has_fixed_base_ts[b]``, base timestamp ``fixed_base_ts[b]`` (a delete horizon).

    Returns ``(n_batches, status, record index)``; ``batch_start[n_batches] = n``.
    """
    nb = 0
    count = 0
    section = np.int64(0)
    base_off = np.int64(0)
    base_ts = np.int64(0)
    for i in range(n):
        off = rec_off[i]
        t = ts[i]
        if i > 0 and off <= rec_off[i - 1]:
            return nb, OFFSET_NOT_INCREASING, i
        new_batch = count == 0
        if not new_batch and may_split and (count >= max_records or off - base_off > L.INT32_MAX):
            new_batch = True
        if not may_split and nb < len(fixed_start) - 1 and i == fixed_start[nb]:
            new_batch = True
        for attempt in range(2):
            if new_batch:
                if count > 0:
                    batch_section[nb - 1] = section
                batch_start[nb] = i
                base_off = off if may_split else fixed_base_off[nb]
                batch_base_off[nb] = base_off
                base_ts = fixed_base_ts[nb] if not may_split and has_fixed_base_ts[nb] else t
                batch_base_ts[nb] = base_ts
                batch_max_ts[nb] = t
                batch_max_ts_off[nb] = off
                nb += 1
                count = 0
                section = 0
            if off - base_off > L.INT32_MAX or off < base_off:
                return nb, OFFSET_DELTA_TOO_LARGE, i
            if _delta_overflows(t, base_ts):
                return nb, TIMESTAMP_DELTA_OVERFLOW, i
            b = 1 + size_of_varlong(t - base_ts) + size_of_varint(off - base_off) + payload[i]
            if b > L.INT32_MAX:
                return nb, FIELD_TOO_LARGE, i
            total = size_of_varint(b) + b
            if count > 0 and section + total > max_bytes:
                if not may_split:
                    return nb, BATCH_TOO_LARGE, i
                new_batch = True
                continue
            break
        if section + total > _MAX_SECTION:
            return nb, BATCH_TOO_LARGE, i
        body[i] = b
        section += total
        count += 1
        if t > batch_max_ts[nb - 1]:
            batch_max_ts[nb - 1] = t
            batch_max_ts_off[nb - 1] = off
    if count > 0:
        batch_section[nb - 1] = section
    batch_start[nb] = n
    return nb, OK, -1


@njit(cache=True, nogil=True)
def _put_field(out, p, data, start, length):
    """Write a bytes field (``length`` -1 = null). It takes the data array only, not the
    offsets and bitmap: a numba helper taking all the column arrays and writing ``out`` costs
    ~40 ns per call (measured), more than the rest of a 100-byte record."""
    p = write_varint(out, p, length)
    if length > 0:
        copy_bytes(out, p, data, start, length)
        return p + length
    return p


@njit(cache=True, nogil=True)
def fill_batches(out, n_batches, position, batch_start, batch_section, batch_base_off, batch_base_ts,
                 header_max_ts, last_offset_delta, base_sequence, body, ts, rec_off,
                 partition_leader_epoch, attributes, producer_id, producer_epoch,
                 k_off, k_data, k_bits, k_bit0, v_off, v_data, v_bits, v_bit0,
                 h_off, h_bits, h_bit0, hk_off, hk_data, hk_bits, hk_bit0,
                 hv_off, hv_data, hv_bits, hv_bit0, has_headers):
    """Write every batch (header with CRC 0, then its records) at ``position[b]`` in ``out``;
    ``partition_leader_epoch``, ``attributes``, ``producer_id`` and ``producer_epoch`` are per
    batch, like the other ``batch_*`` arrays."""
    for b in range(n_batches):
        p0 = position[b]
        first = batch_start[b]
        last = batch_start[b + 1]
        base_off = batch_base_off[b]
        base_ts = batch_base_ts[b]
        store_i64(out, p0 + L.OFFSET_OFFSET, base_off)
        store_i32(out, p0 + L.BATCH_LENGTH_OFFSET,
                  L.RECORD_BATCH_OVERHEAD - L.LOG_OVERHEAD + batch_section[b])
        store_i32(out, p0 + L.PARTITION_LEADER_EPOCH_OFFSET, partition_leader_epoch[b])
        out[p0 + L.MAGIC_OFFSET] = 2
        store_i32(out, p0 + L.CRC_OFFSET, 0)
        store_i16(out, p0 + L.ATTRIBUTES_OFFSET, attributes[b])
        store_i32(out, p0 + L.LAST_OFFSET_DELTA_OFFSET, last_offset_delta[b])
        store_i64(out, p0 + L.BASE_TIMESTAMP_OFFSET, base_ts)
        store_i64(out, p0 + L.MAX_TIMESTAMP_OFFSET, header_max_ts[b])
        store_i64(out, p0 + L.PRODUCER_ID_OFFSET, producer_id[b])
        store_i16(out, p0 + L.PRODUCER_EPOCH_OFFSET, producer_epoch[b])
        store_i32(out, p0 + L.BASE_SEQUENCE_OFFSET, base_sequence[b])
        store_i32(out, p0 + L.RECORDS_COUNT_OFFSET, last - first)
        p = p0 + L.RECORDS_OFFSET
        for i in range(first, last):
            p = write_varint(out, p, body[i])
            out[p] = 0
            p = write_varlong(out, p + 1, ts[i] - base_ts)
            p = write_varint(out, p, rec_off[i] - base_off)
            p = _put_field(out, p, k_data, k_off[i], _field_length(k_off, k_bits, k_bit0, i))
            p = _put_field(out, p, v_data, v_off[i], _field_length(v_off, v_bits, v_bit0, i))
            if has_headers and _valid(h_bits, h_bit0, i):
                p = write_varint(out, p, h_off[i + 1] - h_off[i])
                for j in range(h_off[i], h_off[i + 1]):
                    p = _put_field(out, p, hk_data, hk_off[j], _field_length(hk_off, hk_bits, hk_bit0, j))
                    p = _put_field(out, p, hv_data, hv_off[j], _field_length(hv_off, hv_bits, hv_bit0, j))
            else:
                out[p] = 0
                p += 1
