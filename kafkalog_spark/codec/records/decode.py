"""Record decoding (codec layer): ``.log`` bytes of every format into Arrow record batches.

Input is any run of entries (v2 record batches, v0/v1 messages and compressed wrappers, mixed);
output has the schema of :func:`kafkalog_spark.codec.records.schema.record_schema`. Per chunk of
entries (KAFKA_FORMATS §19.1)::

    scan_entries            one header row per entry (vectorised walk, §2)
    select                  control batches hidden unless asked; entries wholly outside the
                            offset window skipped (a batch that starts below ``min_offset``
                            still yields its records >= ``min_offset``)
    header checks + CRC     codec ids, CRC-32 / CRC-32C of all entries in one kernel call
    decompress              one call into ``compression.decompress`` per compressed entry
    size pass, fill pass    ONE kernel call each for all records of the chunk
                            (``_decode_kernels.size_units``/``fill_units``) writing into numpy arrays
    Arrow                   ``pa.Array.from_buffers`` over those arrays; no per-record Python

The last two steps, and the per-entry kernel inputs, are in :mod:`.decode_columns`.

A chunk holds at most about ``max_rows`` records (v2 counts are known before decompressing),
``CHUNK_INPUT_BYTES`` of entries and ``CHUNK_DECOMPRESSED_BYTES`` of decompressed payloads, so
memory per step is bounded and every binary column stays below Arrow's 2 GiB int32-offset limit.
Yielded batches hold at most ``max_rows`` rows.

Errors: ``on_error="fail"`` raises a :class:`~kafkalog_spark.errors.KafkaLogError` naming the
file, the byte position of the bad entry (of the bad record when uncompressed) and its base
offset. ``on_error="skip"`` drops each bad entry whole (Kafka validates a batch as a unit),
yields every other record, and lists the dropped byte ranges in
:attr:`DecodeResult.bad_ranges` as iteration reaches them. A broken entry header ends the walk
(the rest of the data cannot be framed); the range to the end is then reported. A missing codec
library always raises: it is not bad data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np
import pyarrow as pa

from ...errors import (CorruptRecordError, KafkaLogError, Location, MissingCodecError,
                       UnsupportedFormatError)
from .. import layout as L
from . import _decode_kernels as K
from .crc import compute_crcs_at
from .decode_columns import _ChunkColumns, _Units
from .decode_options import DecodeOptions  # re-exported: callers build options from here
from .legacy import check_legacy_codec, wrapper_value_range
from .scan import (STOP_PARTIAL_ENTRY, STOP_SHORT_TAIL, EntryTable, as_uint8, scan_entries,
                   stop_error)
from .schema import record_schema

CHUNK_INPUT_BYTES = 64 * 1024 * 1024
CHUNK_DECOMPRESSED_BYTES = 256 * 1024 * 1024
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_EMPTY = np.zeros(0, dtype=np.uint8)


@dataclass(frozen=True)
class BadRange:
    """Bytes dropped in ``on_error="skip"`` mode: ``[start, end)`` of ``file`` and why."""

    file: str | None
    start: int
    end: int
    base_offset: int | None
    reason: str


@dataclass
class DecodeResult(Iterator[pa.RecordBatch]):
    """What :func:`decode_entries` returns: an iterator of ``RecordBatch`` whose
    :attr:`bad_ranges` grows (in byte order) as iteration reaches bad entries. The list is
    complete once the iterator is exhausted; it stays empty with ``on_error="fail"``."""

    schema: pa.Schema
    _batches: Iterator[pa.RecordBatch]
    bad_ranges: list[BadRange] = field(default_factory=list)

    def __iter__(self) -> "DecodeResult":
        return self

    def __next__(self) -> pa.RecordBatch:
        return next(self._batches)


def decode_entries(data: Any, *, topic: str, partition: int,
                   options: DecodeOptions = DecodeOptions(), start: int = 0,
                   end: int | None = None, min_offset: int | None = None,
                   max_offset: int | None = None, file: str | None = None) -> DecodeResult:
    """Decode the records of the entries in ``data[start:end]``.

    Parameters
    ----------
    data
        bytes, bytearray, memoryview, mmap or a numpy ``uint8`` array holding ``.log`` bytes.
        Byte positions in errors and bad ranges are positions in ``data``.
    topic, partition
        Values of the ``topic`` and ``partition`` columns.
    options
        See :class:`DecodeOptions`.
    start, end
        Byte range to decode; ``start`` must be an entry boundary.
    min_offset, max_offset
        Inclusive offset window; records outside it are not returned.
    file
        File name carried by errors and bad ranges.

    Returns
    -------
    DecodeResult
        Iterator of ``pyarrow.RecordBatch`` (schema ``record_schema(include_headers,
        include_metadata, columns)``, at most ``max_rows`` rows each), with ``bad_ranges``.

    Raises
    ------
    KafkaLogError
        With ``on_error="fail"``: :class:`CorruptRecordError` (bad CRC, bad structure),
        :class:`TruncatedDataError`, :class:`UnsupportedFormatError` (magic, codec),
        :class:`CompressionError`; in both modes :class:`MissingCodecError`.
    """
    schema = record_schema(columns=options.output_columns)
    result = DecodeResult(schema, iter(()))
    decoder = _Decoder(as_uint8(data), topic, partition, options, file, schema,
                       result.bad_ranges)
    lo = INT64_MIN if min_offset is None else int(min_offset)
    hi = INT64_MAX if max_offset is None else int(max_offset)
    result._batches = decoder.run(start, end, lo, hi)
    return result


def decode_to_table(data: Any, *, topic: str, partition: int,
                    options: DecodeOptions = DecodeOptions(), start: int = 0,
                    end: int | None = None, min_offset: int | None = None,
                    max_offset: int | None = None, file: str | None = None) -> pa.Table:
    """:func:`decode_entries` collected into one ``pyarrow.Table`` (bad ranges of skip mode
    are not returned; iterate :func:`decode_entries` to get them)."""
    result = decode_entries(data, topic=topic, partition=partition, options=options,
                            start=start, end=end, min_offset=min_offset, max_offset=max_offset,
                            file=file)
    return pa.Table.from_batches(list(result), schema=result.schema)


_BATCH_LEVEL = (K.ERR_NEGATIVE_COUNT, K.ERR_EMPTY_WRAPPER, K.ERR_WRAPPER_OFFSET)


class _Decoder(_ChunkColumns):
    """State of one decode call; :meth:`run` is the generator behind :class:`DecodeResult`."""

    def __init__(self, buf: np.ndarray, topic: str, partition: int, options: DecodeOptions,
                 file: str | None, schema: pa.Schema, bad_ranges: list[BadRange]) -> None:
        self.buf = buf
        self._view = memoryview(buf)
        self.topic = topic
        self.partition = partition
        self.options = options
        self.file = file
        self.schema = schema
        self.bad_ranges = bad_ranges
        self.skip = options.on_error == "skip"
        self._constants: dict[str, pa.Array] = {}

    def location(self, position: int, base_offset: int | None) -> Location:
        return Location(self.file, int(position), None if base_offset is None else int(base_offset))

    # --- entry level ------------------------------------------------------------------------
    def run(self, start: int, end: int | None, lo: int, hi: int) -> Iterator[pa.RecordBatch]:
        entries = scan_entries(self.buf, start, end)
        stop_error = self._scan_error(entries)
        if stop_error is not None and not self.skip:
            raise stop_error
        selected = self._select(entries, lo, hi)
        i = 0
        while i < len(selected):
            j = self._chunk_end(entries, selected, i)
            i += yield from self._chunk(entries, selected[i:j], lo, hi)
        if stop_error is not None:
            self.bad_ranges.append(BadRange(self.file, entries.stop_position, entries.end, None,
                                            stop_error.reason))

    def _scan_error(self, entries: EntryTable) -> KafkaLogError | None:
        code = entries.stop_code
        if entries.clean or (self.options.allow_partial_tail
                             and code in (STOP_SHORT_TAIL, STOP_PARTIAL_ENTRY)):
            return None
        return stop_error(code, self.location(entries.stop_position, None))

    def _select(self, entries: EntryTable, lo: int, hi: int) -> np.ndarray:
        """Entries that can hold records in ``[lo, hi]``. A legacy wrapper's first offset is
        unknown before decompressing, so only its last offset prunes; a wrapper offset of 0
        (as producers write it) bounds nothing: the inner offsets are then the absolute ones."""
        unknown = (entries.magic < 2) & (entries.codec != 0) & (entries.offset == 0)
        keep = (entries.last_offset >= lo) | unknown
        first_known = (entries.magic == 2) | (entries.codec == 0)
        keep &= ~first_known | (entries.offset <= hi)
        if not self.options.include_control:
            keep &= ~entries.is_control()
        return np.nonzero(keep)[0]

    def _chunk_end(self, entries: EntryTable, selected: np.ndarray, i: int) -> int:
        rows = np.where(entries.count[selected[i:]] > 0, entries.count[selected[i:]], 1)
        by_rows = np.searchsorted(np.cumsum(rows, dtype=np.int64), self.options.max_rows, "right")
        sizes = np.cumsum(entries.entry_size[selected[i:]], dtype=np.int64)
        by_bytes = np.searchsorted(sizes, CHUNK_INPUT_BYTES, "right")
        return i + max(1, int(min(by_rows, by_bytes)))

    def _reject(self, errors: dict[int, KafkaLogError], entries: EntryTable, e: int,
                error: KafkaLogError) -> None:
        if isinstance(error, MissingCodecError):
            raise error
        errors.setdefault(e, error)

    def _header_errors(self, entries: EntryTable, idx: np.ndarray) -> dict[int, KafkaLogError]:
        """Codec ids and checksums of the chunk's entries: entry index -> error."""
        errors: dict[int, KafkaLogError] = {}
        codec = entries.codec[idx]
        magic = entries.magic[idx]
        bad_codec = np.nonzero(((magic == 2) & (codec > L.CODEC_ZSTD))
                               | ((magic < 2) & (codec > L.CODEC_LZ4)))[0]
        for k in bad_codec.tolist():
            e = int(idx[k])
            loc = self.location(entries.position[e], entries.offset[e])
            try:
                if magic[k] < 2:
                    check_legacy_codec(int(codec[k]), loc)
                raise UnsupportedFormatError(f"unknown compression codec id {int(codec[k])}", loc)
            except UnsupportedFormatError as exc:
                errors[e] = exc
        if self.options.verify_crc:
            computed = compute_crcs_at(self.buf, entries.position[idx], entries.entry_size[idx],
                                       magic)
            for k in np.nonzero(computed != entries.crc[idx])[0].tolist():
                e = int(idx[k])
                kind = "CRC-32C" if magic[k] == 2 else "CRC-32"
                errors.setdefault(e, CorruptRecordError(
                    f"{kind} mismatch: stored 0x{int(entries.crc[e]):08x}, computed "
                    f"0x{int(computed[k]):08x}", self.location(entries.position[e],
                                                               entries.offset[e])))
        return errors

    # --- chunk level ------------------------------------------------------------------------
    def _chunk(self, entries: EntryTable, idx: np.ndarray, lo: int,
               hi: int) -> Iterator[pa.RecordBatch]:
        """Decode the entries ``idx`` (or a prefix of them when decompressed payloads exceed
        the chunk budget); yields batches and returns how many entries were consumed."""
        errors = self._header_errors(entries, idx)
        units = _Units.for_entries(entries, idx, self.buf)
        consumed, aux = self._decompress_units(entries, idx, units, errors)
        units = units.prefix(consumed)
        idx = idx[:consumed]
        # entries past the budget cut are checked again by the next chunk
        errors = {e: exc for e, exc in errors.items() if e <= idx[-1]}
        for e in errors:
            units.status[np.searchsorted(idx, e)] = -1  # not decoded
        columns = self._decode_units(units, aux, lo, hi)
        for k in np.nonzero(units.status > 0)[0].tolist():
            e = int(idx[k])
            errors[e] = self._unit_error(entries, e, units, k)
        if errors:
            first = min(errors)
            if not self.skip:
                raise errors[first]
            for e in sorted(errors):
                p = int(entries.position[e])
                self.bad_ranges.append(BadRange(self.file, p, p + int(entries.entry_size[e]),
                                                int(entries.offset[e]), errors[e].reason))
        if columns is not None:
            arrays = self._columns(columns, units, entries, idx)
            n = len(columns["offset"])
            step = self.options.max_rows
            for s in range(0, n, step):
                m = min(step, n - s)
                if not self.schema:  # no columns asked for: the row count only
                    yield pa.record_batch([pa.nulls(m)], names=["_"]).select([])
                    continue
                yield pa.RecordBatch.from_arrays(
                    [self._constant(f.name, m) if arrays[f.name] is None
                     else arrays[f.name].slice(s, m) for f in self.schema], schema=self.schema)
        return consumed

    def _decompress_units(self, entries: EntryTable, idx: np.ndarray, units: "_Units",
                          errors: dict[int, KafkaLogError]) -> tuple[int, np.ndarray]:
        """Decompress the chunk's compressed entries side by side into one array (the kernels'
        ``aux``), pointing their units at their bytes there, until ``CHUNK_DECOMPRESSED_BYTES``
        are out. Returns how many entries that covers and the array."""
        todo = np.nonzero(units.compressed)[0]
        if not len(todo):
            return len(idx), _EMPTY
        from ..compression.codecs import decompress_into, lz4_block_decoder
        from ..compression.framings import LZ4_KAFKA_BLOCK_SIZE, lz4_single_blocks
        from ..compression.sink import Sink

        e_all = idx[todo]
        pos, size = entries.position[e_all], entries.entry_size[e_all].astype(np.int64)
        # producers' payloads compress 2-5x: room for 4x, grown (kept) if that is short
        sink = Sink(min(int(size.sum()) * 4, CHUNK_DECOMPRESSED_BYTES))
        limit = self.options.max_decompressed
        magics, codecs = entries.magic[e_all], entries.codec[e_all]
        # Kafka's one-block lz4 frames (small batches) found for all at once, decoded by one
        # library call each; a block can hold more than `limit` only when limit < 64 KiB
        lz4_v2 = (magics == 2) & (codecs == L.CODEC_LZ4) & (limit >= LZ4_KAFKA_BLOCK_SIZE)
        blocks = np.full(len(todo), -1, np.int64)
        if lz4_v2.any():
            blocks[lz4_v2] = lz4_single_blocks(self.buf, pos[lz4_v2] + L.RECORDS_OFFSET,
                                               pos[lz4_v2] + size[lz4_v2])
        lz4_block = None
        for k, e, p, n, magic, codec, block in zip(todo.tolist(), e_all.tolist(), pos.tolist(),
                                                   size.tolist(), magics.tolist(),
                                                   codecs.tolist(), blocks.tolist()):
            if e in errors:
                continue
            if sink.size >= CHUNK_DECOMPRESSED_BYTES:
                return k, sink.data()
            before = sink.size
            try:
                if block >= 0:
                    lz4_block = lz4_block or lz4_block_decoder(self.location(p, entries.offset[e]))
                    lz4_block(self._view[block:p + n - 4], sink)
                    units.start[k], units.end[k] = before, sink.size
                    continue
                lo, hi = ((p + L.RECORDS_OFFSET, p + n) if magic == 2
                          else wrapper_value_range(self.buf, p, magic,
                                                    self.location(p, entries.offset[e])))
                decompress_into(sink, codec, self._view[lo:hi], magic=magic, max_size=limit)
            except KafkaLogError as exc:  # located here: a Location per batch costs ~1 us
                self._reject(errors, entries, e,
                             type(exc)(exc.reason, self.location(p, entries.offset[e])))
                continue
            units.start[k], units.end[k] = before, sink.size
        return len(idx), sink.data()

    def _unit_error(self, entries: EntryTable, e: int, units: "_Units",
                    k: int) -> KafkaLogError:
        reason = K.STATUS_MESSAGES[int(units.status[k])]
        p = int(entries.position[e])
        if units.src[k] == 0 and units.status[k] not in _BATCH_LEVEL:
            p = int(units.err_pos[k])  # the bad record's own position in the input
        else:
            reason += f" (at byte {int(units.err_pos[k] - units.start[k])} of the decompressed data)"
        return CorruptRecordError(reason, self.location(p, entries.offset[e]))
