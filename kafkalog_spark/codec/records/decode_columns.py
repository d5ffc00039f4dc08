"""Columns of one decode chunk (codec layer): the per-entry inputs of the decode kernels, their
size and fill passes into numpy arrays, and the Arrow record columns built over those arrays.

Used by :class:`kafkalog_spark.codec.records.decode._Decoder`, which picks the entries of a chunk and
handles their errors; everything here runs once per chunk, never per record in Python. Only
the columns of the decoder's schema are built: key, value and header bytes not asked for are
neither sized nor copied (the kernels' ``with_*`` flags), the other columns not computed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from .. import layout as L
from . import _decode_kernels as K
from .crc import CRC32_TABLES
from .decode_options import DecodeOptions
from .scan import EntryTable
from .schema import HEADER_TYPE, HEADERS_TYPE, METADATA_COLUMNS

# Kafka timestamps are milliseconds; beyond this they do not fit microseconds in int64
MAX_TIMESTAMP_MS = (2**63 - 1) // 1000
_METADATA = frozenset(METADATA_COLUMNS)
_CODEC_STRINGS = pa.array([L.CODEC_NAMES.get(i, "unknown") for i in range(8)], pa.string())


class _ChunkColumns:
    """The column half of :class:`~kafkalog_spark.codec.records.decode._Decoder` (a mixin: the decoder
    sets these attributes)."""

    buf: np.ndarray
    topic: str
    partition: int
    options: DecodeOptions
    schema: pa.Schema
    _constants: dict[str, pa.Array]

    def _constant(self, name: str, m: int) -> pa.Array:
        """The ``topic`` / ``partition`` column of ``m`` rows (built once, then sliced)."""
        cached = self._constants.get(name)
        if cached is None or len(cached) < m:
            if name == "topic":
                t = self.topic.encode()
                cached = _binary(pa.string(), m, np.arange(m + 1, dtype=np.int32) * len(t),
                                 np.frombuffer(t * m, np.uint8), None)
            else:
                cached = pa.array(np.full(m, self.partition, np.int32))
            self._constants[name] = cached
        return cached.slice(0, m)

    def _decode_units(self, units: "_Units", aux: np.ndarray, lo: int,
                      hi: int) -> dict[str, np.ndarray] | None:
        """Size pass, allocation, fill pass over every unit whose status is still 0."""
        n_units = len(units.kind)
        totals = np.zeros(K.N_CURSORS, dtype=np.int64)
        units.err_pos = np.zeros(n_units, dtype=np.int64)
        units.first_offset = units.base_offset.copy()
        n_rows = np.zeros(n_units, dtype=np.int64)
        names = self.schema.names
        with_key, with_value, with_headers = "key" in names, "value" in names, "headers" in names
        K.size_units(self.buf, aux, units.kind, units.src, units.start, units.end,
                     units.base_offset, units.count, units.magic, lo, hi,
                     self.options.verify_crc, CRC32_TABLES, units.status, units.err_pos, n_rows,
                     units.first_offset, totals, with_key, with_value, with_headers)
        rows, kd, vd, nh, hkd, hvd = (int(x) for x in totals)
        if rows == 0:
            return None
        # the key / value / header arrays are only written when asked for; else one-element
        # placeholders (the size pass left their byte totals at 0)
        kr = rows if with_key else 0
        vr = rows if with_value else 0
        hr = rows if with_headers else 0
        c: dict[str, np.ndarray] = {
            "offset": _empty(rows, np.int64), "ts": _empty(rows, np.int64),
            "ts_type": _empty(rows, np.int8), "seq": _empty(rows, np.int32),
            "unit": _empty(rows, np.int32),
            "key_off": _offsets(kr), "key_data": _empty(kd, np.uint8),
            "key_valid": _empty(kr, np.uint8),
            "val_off": _offsets(vr), "val_data": _empty(vd, np.uint8),
            "val_valid": _empty(vr, np.uint8),
            "hdr_off": _offsets(hr), "hdr_valid": _empty(hr, np.uint8),
            "hkey_off": _offsets(nh), "hkey_data": _empty(hkd, np.uint8),
            "hval_off": _offsets(nh), "hval_data": _empty(hvd, np.uint8),
            "hval_valid": _empty(nh, np.uint8),
        }
        K.fill_units(self.buf, aux, units.kind, units.src, units.start, units.end,
                     units.base_offset, units.count, units.magic, units.ts_type, units.base_ts,
                     units.max_ts, units.base_seq, lo, hi, units.status, units.first_offset,
                     c["offset"], c["ts"], c["ts_type"], c["seq"], c["unit"], c["key_off"],
                     c["key_data"], c["key_valid"], c["val_off"], c["val_data"], c["val_valid"],
                     c["hdr_off"], c["hdr_valid"], c["hkey_off"], c["hkey_data"], c["hval_off"],
                     c["hval_data"], c["hval_valid"], with_key, with_value, with_headers)
        c["nh"] = np.array(nh)
        return c

    # --- Arrow ------------------------------------------------------------------------------
    def _columns(self, c: dict[str, np.ndarray], units: "_Units", entries: EntryTable,
                 idx: np.ndarray) -> dict[str, pa.Array | None]:
        """Arrow columns of a chunk's rows, those of the schema only (``None`` for the constant
        topic/partition)."""
        n = len(c["offset"])
        names = set(self.schema.names)
        cols: dict[str, pa.Array | None] = {"topic": None, "partition": None}
        if "key" in names:
            cols["key"] = _binary(pa.binary(), n, c["key_off"], c["key_data"], c["key_valid"])
        if "value" in names:
            cols["value"] = _binary(pa.binary(), n, c["val_off"], c["val_data"], c["val_valid"])
        if "offset" in names:
            cols["offset"] = pa.array(c["offset"])
        tt = c["ts_type"]
        if "timestamp" in names:
            ts = c["ts"]
            ts_valid = ((tt != L.NO_TIMESTAMP_TYPE) & (ts != L.NO_TIMESTAMP)
                        & (np.abs(ts) <= MAX_TIMESTAMP_MS))
            ts_us = np.where(ts_valid, ts, 0) * 1000
            cols["timestamp"] = pa.Array.from_buffers(self.schema.field("timestamp").type, n,
                                                      [_bitmap(ts_valid, n), pa.py_buffer(ts_us)])
        if "timestampType" in names:
            cols["timestampType"] = pa.array(tt.astype(np.int32))
        if "headers" in names:
            cols["headers"] = self._headers(c, n)
        if names & _METADATA:
            u = c["unit"]
            e = idx[u]
            attrs = entries.attributes[e]
            is_v2 = entries.magic[e] == 2
            metadata = {
                "leaderEpoch": lambda: pa.array(entries.leader_epoch[e]),
                "producerId": lambda: pa.array(entries.producer_id[e]),
                "producerEpoch": lambda: pa.array(entries.producer_epoch[e]),
                "sequence": lambda: pa.array(c["seq"]),
                "isTransactional": lambda: pa.array(
                    is_v2 & ((attrs & L.TRANSACTIONAL_FLAG_MASK) != 0)),
                "isControl": lambda: pa.array(is_v2 & ((attrs & L.CONTROL_FLAG_MASK) != 0)),
                "batchBaseOffset": lambda: pa.array(units.first_offset[u]),
                "batchLastOffset": lambda: pa.array(entries.last_offset[e]),
                "magic": lambda: pa.array(entries.magic[e]),
                "compression": lambda: _CODEC_STRINGS.take(pa.array(entries.codec[e])),
            }
            cols.update({name: build() for name, build in metadata.items() if name in names})
        return cols

    def _headers(self, c: dict[str, np.ndarray], n: int) -> pa.Array:
        nh = int(c["nh"])
        keys = _binary(pa.string(), nh, c["hkey_off"], c["hkey_data"], None)
        try:
            keys.validate(full=True)
        except pa.ArrowInvalid:
            # Kafka decodes header keys with replacement characters (Utils.utf8)
            raw = _binary(pa.binary(), nh, c["hkey_off"], c["hkey_data"], None)
            keys = pa.array([b.decode("utf-8", "replace") for b in raw.to_pylist()], pa.string())
        values = _binary(pa.binary(), nh, c["hval_off"], c["hval_data"], c["hval_valid"])
        structs = pa.StructArray.from_arrays([keys, values], fields=list(HEADER_TYPE))
        return pa.Array.from_buffers(HEADERS_TYPE, n, [_bitmap(c["hdr_valid"], n),
                                                       pa.py_buffer(c["hdr_off"])],
                                     children=[structs])


def _empty(n: int, dtype: type) -> np.ndarray:
    """Uninitialised array from Arrow's memory pool. The columns are Arrow buffers in the end,
    and the pool keeps freed pages for reuse, where ``np.empty`` of many MiB gets fresh pages
    from the kernel every chunk: page faults took a third of the uncompressed decode time."""
    size = n * np.dtype(dtype).itemsize
    return np.frombuffer(pa.allocate_buffer(size), dtype, count=n) if size else np.empty(0, dtype)


def _offsets(n: int) -> np.ndarray:
    """Offsets buffer of ``n`` items: ``n + 1`` int32 whose leading 0 the kernel never writes."""
    off = _empty(n + 1, np.int32)
    off[0] = 0
    return off


def _bitmap(valid: np.ndarray, n: int) -> pa.Buffer | None:
    """Arrow validity bitmap of a 0/1 array, or None when nothing is null."""
    if n == 0 or valid[:n].all():
        return None
    return pa.py_buffer(np.packbits(valid[:n].astype(bool), bitorder="little"))


def _binary(typ: pa.DataType, n: int, offsets: np.ndarray, data: np.ndarray,
            valid: np.ndarray | None) -> pa.Array:
    bitmap = None if valid is None else _bitmap(valid, n)
    return pa.Array.from_buffers(typ, n, [bitmap, pa.py_buffer(offsets), pa.py_buffer(data)])


@dataclass
class _Units:
    """Per-entry kernel inputs of one chunk (struct of arrays, parallel to the chunk's entries).
    ``status`` is 0 before the size pass, -1 for entries rejected by the header checks, then the
    kernel status."""

    kind: np.ndarray
    src: np.ndarray
    start: np.ndarray
    end: np.ndarray
    base_offset: np.ndarray
    count: np.ndarray
    magic: np.ndarray
    ts_type: np.ndarray
    base_ts: np.ndarray
    max_ts: np.ndarray
    base_seq: np.ndarray
    compressed: np.ndarray
    status: np.ndarray
    err_pos: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    first_offset: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    @classmethod
    def for_entries(cls, entries: EntryTable, idx: np.ndarray, buf: np.ndarray) -> "_Units":
        magic = entries.magic[idx]
        codec = entries.codec[idx]
        pos = entries.position[idx]
        size = entries.entry_size[idx].astype(np.int64)
        v2 = magic == 2
        count = entries.count[idx]
        # an empty v2 batch is never decompressed (Kafka does not touch its payload)
        compressed = (codec != 0) & ~(v2 & (count == 0))
        kind = np.where(v2, K.UNIT_V2, np.where(codec != 0, K.UNIT_LEGACY_SET,
                                                K.UNIT_LEGACY_MSG)).astype(np.int8)
        start = np.where(v2, pos + L.RECORDS_OFFSET, pos).astype(np.int64)
        ts_type = np.where(magic == 0, L.NO_TIMESTAMP_TYPE,
                           (entries.attributes[idx] & L.TIMESTAMP_TYPE_MASK) != 0).astype(np.int8)
        return cls(kind=kind, src=compressed.astype(np.int8), start=start, end=pos + size,
                   base_offset=entries.offset[idx].copy(), count=count.copy(), magic=magic.copy(),
                   ts_type=ts_type, base_ts=entries.base_timestamp[idx].copy(),
                   max_ts=entries.max_timestamp[idx].copy(),
                   base_seq=entries.base_sequence[idx].copy(), compressed=compressed,
                   status=np.zeros(len(idx), np.int32))

    def prefix(self, n: int) -> "_Units":
        if n == len(self.kind):
            return self
        return _Units(*(getattr(self, f)[:n] for f in ("kind", "src", "start", "end",
                                                        "base_offset", "count", "magic",
                                                        "ts_type", "base_ts", "max_ts",
                                                        "base_seq", "compressed", "status")))
