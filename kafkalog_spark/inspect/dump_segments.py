"""``.log`` and ``.checkpoint`` dumps (inspect layer): DumpLogSegments' batch lines and, with deep
iteration, its record lines (§16.3), chunk by chunk of entries.

Record timestamps beyond ±2^63/1000 ms print as −1 (the decoder cannot carry them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ..codec import layout as L
from ..codec.compression.codecs import decompress
from ..codec.files.naming import BOOTSTRAP_CHECKPOINT, parse_kraft_snapshot_name
from ..codec.files.snapshot import increment_sequence
from ..codec.records.crc import verify_crcs
from ..codec.records.decode import decode_entries
from ..codec.records.legacy import wrapper_value_range
from ..codec.records.scan import (STOP_LIMIT, STOP_PARTIAL_ENTRY, STOP_SHORT_TAIL,
                                  STOP_SIZE_TOO_SMALL, EntryTable, scan_entries)
from ..errors import CorruptRecordError, KafkaLogError, Location
from ..storage import absolute_name, mapped_file
from . import dump_output
from .dump_decoders import control_info, parse
from .dump_options import JAVA_INT_MAX
from .dump_output import DumpRun, compact_json, file_offset, java_bool

RECORD_INDENT = "|"
_TS_LABEL = L.TIMESTAMP_TYPE_NAMES


class _Rows:
    """Decoded records of a chunk as Python lists (converted once per decode call)."""

    __slots__ = ("offset", "ts", "key", "value", "seq", "header_keys")

    def __init__(self, t: pa.Table) -> None:
        self.offset = t.column("offset").to_pylist()
        ts = t.column("timestamp").cast(pa.int64()).fill_null(-1000).to_numpy()
        self.ts = (ts // 1000).tolist()
        self.key = t.column("key").to_pylist()
        self.value = t.column("value").to_pylist()
        self.seq = t.column("sequence").to_pylist()
        self.header_keys = [[h["key"] for h in hs] if hs else []
                            for hs in t.column("headers").to_pylist()]


class _Records:
    """The records of one entry: rows ``[lo, hi)`` of a chunk, plus the legacy per-message CRC
    and validity Kafka prints for v0/v1 records."""

    __slots__ = ("rows", "lo", "hi", "crc", "valid")

    def __init__(self, rows: _Rows, lo: int, hi: int) -> None:
        self.rows, self.lo, self.hi = rows, lo, hi
        self.crc: list[int] | None = None
        self.valid: list[bool] | None = None

    def __len__(self) -> int:
        return self.hi - self.lo


def dump_log(run: DumpRun, path: Path) -> None:
    name = path.name
    if name.endswith(".log"):
        start = file_offset(run, name)
        run.emit(f"Log starting offset: {start}",
                 lambda: {"type": "log_start_offset", "offset": start})
    elif name == BOOTSTRAP_CHECKPOINT:
        run.emit("KRaft bootstrap snapshot", lambda: {"type": "kraft_bootstrap_snapshot"})
    else:
        snap = parse_kraft_snapshot_name(name)
        run.emit(f"Snapshot end offset: {snap.end_offset}, epoch: {snap.epoch}",
                 lambda: {"type": "snapshot_id", "end_offset": snap.end_offset,
                          "epoch": snap.epoch})
    absolute = absolute_name(path)
    last = [-1]  # unset (Kafka's -1): a file's first record is paired with none
    with mapped_file(path) as buf:
        end = min(len(buf), run.options.max_bytes)
        pos = 0
        while True:
            entries = scan_entries(buf, pos, end, max_entries=dump_output.SCAN_CHUNK_ENTRIES)
            if len(entries):
                _batches(run, buf, entries, absolute, last, str(path))
            pos = entries.stop_position
            if entries.stop_code != STOP_LIMIT:
                break
        if entries.stop_code not in (STOP_LIMIT, 0, STOP_SHORT_TAIL, STOP_PARTIAL_ENTRY):
            # FileLogInputStream throws here; nothing after it (no trailing-bytes line)
            if entries.stop_code == STOP_SIZE_TOO_SMALL:
                size = int.from_bytes(bytes(buf[pos + 8:pos + 12]), "big", signed=True)
                reason = (f"Found record size {size} smaller than minimum record overhead "
                          f"({L.RECORD_OVERHEAD_V0}) in file {path}.")
            else:
                reason = entries.stop_reason
            raise CorruptRecordError(reason, Location(str(path), pos))
        trailing = end - pos
        if trailing > 0 and run.options.max_bytes == JAVA_INT_MAX:
            run.emit(f"Found {trailing} invalid bytes at the end of {name}",
                     lambda: {"type": "trailing_bytes", "bytes": trailing})


def _batches(run: DumpRun, buf: np.ndarray, e: EntryTable, absolute: str, last: list[int],
             file: str) -> None:
    valid = verify_crcs(buf, e).tolist()
    records = _records(run, buf, e, file) if run.options.deep else None
    pos, size, off, magic = (e.position.tolist(), e.entry_size.tolist(), e.offset.tolist(),
                             e.magic.tolist())
    attrs, crc, ple, lod = (e.attributes.tolist(), e.crc.tolist(), e.leader_epoch.tolist(),
                            e.last_offset_delta.tolist())
    bts, mts, pid, pep = (e.base_timestamp.tolist(), e.max_timestamp.tolist(),
                          e.producer_id.tolist(), e.producer_epoch.tolist())
    bseq, count, tstype = e.base_sequence.tolist(), e.count.tolist(), e.timestamp_type().tolist()
    lines: list[str] = []
    for i in range(len(pos)):
        label = _TS_LABEL[tstype[i]]
        codec = L.CODEC_NAMES.get(attrs[i] & L.CODEC_MASK, "unknown")
        control = magic[i] == 2 and bool(attrs[i] & L.CONTROL_FLAG_MASK)
        if magic[i] == 2:
            lseq = -1 if bseq[i] == -1 else increment_sequence(bseq[i], lod[i])
            txn = bool(attrs[i] & L.TRANSACTIONAL_FLAG_MASK)
            horizon = bts[i] if attrs[i] & L.DELETE_HORIZON_FLAG_MASK else None
            head = (f"baseOffset: {off[i]} lastOffset: {off[i] + lod[i]} count: {count[i]} "
                    f"baseSequence: {bseq[i]} lastSequence: {lseq} producerId: {pid[i]} "
                    f"producerEpoch: {pep[i]} partitionLeaderEpoch: {ple[i]} "
                    f"isTransactional: {java_bool(txn)} isControl: {java_bool(control)} "
                    "deleteHorizonMs: "
                    + ("OptionalLong.empty" if horizon is None else f"OptionalLong[{horizon}]"))
        else:
            lseq, txn, horizon = -1, False, None
            head = f"offset: {off[i]}"
        if run.jsonl:
            legacy_wrapper = magic[i] < 2 and codec != "none"
            lines.append(compact_json({
                "type": "batch", "file": run.arg, "position": pos[i],
                "base_offset": None if legacy_wrapper else off[i],
                "last_offset": off[i] + lod[i], "count": None if legacy_wrapper else count[i],
                "base_sequence": bseq[i], "last_sequence": lseq, "producer_id": pid[i],
                "producer_epoch": pep[i], "partition_leader_epoch": ple[i],
                "is_transactional": txn, "is_control": control, "delete_horizon_ms": horizon,
                "timestamp_type": label, "max_timestamp": mts[i], "size": size[i],
                "magic": magic[i], "compression": codec, "crc": crc[i], "is_valid": valid[i]}))
        else:
            lines.append(f"{head} position: {pos[i]} {label}: {mts[i]} size: {size[i]} "
                         f"magic: {magic[i]} compresscodec: {codec} crc: {crc[i]} "
                         f"isvalid: {java_bool(valid[i])}")
        if records is None:
            continue
        rec = records[i]
        if isinstance(rec, str):
            run.flush(lines)
            run.error(rec)
            continue
        _record_lines(run, lines, rec, label, magic[i], control, absolute, last)
    run.flush(lines)


def _record_lines(run: DumpRun, lines: list[str], rec: _Records, label: str, magic: int,
                  control: bool, absolute: str, last: list[int]) -> None:
    skip_meta, print_data = run.options.skip_record_metadata, run.options.print_data and not control
    r = rec.rows
    for j in range(rec.lo, rec.hi):
        off = r.offset[j]
        if last[0] != -1 and off != last[0] + 1:
            run.report.non_consecutive.add(absolute, (last[0], off))
        last[0] = off
        key, value = r.key[j], r.value[j]
        ks = -1 if key is None else len(key)
        vs = -1 if value is None else len(value)
        ctl = control_info(run, key, value, off) if control else None
        parsed = parse(run, key, value, off) if print_data else None
        if run.jsonl:
            obj: dict[str, Any] = {
                "type": "record", "file": run.arg, "offset": off, "timestamp_type": label,
                "timestamp": r.ts[j], "key_size": ks, "value_size": vs,
                "sequence": r.seq[j] if magic >= 2 else None,
                "header_keys": r.header_keys[j] if magic >= 2 else None,
                "is_valid": rec.valid[j - rec.lo] if rec.valid is not None else None,
                "crc": rec.crc[j - rec.lo] if rec.crc is not None else None,
                "control": ctl[1] if ctl else None}
            if parsed is not None:
                obj["key"], obj["value"] = parsed
            lines.append(compact_json(obj))
            continue
        s = ""
        if not skip_meta:
            s = f"{RECORD_INDENT} offset: {off} {label}: {r.ts[j]} keySize: {ks} valueSize: {vs}"
            if magic >= 2:
                s += f" sequence: {r.seq[j]} headerKeys: [{','.join(r.header_keys[j])}]"
            if rec.crc is not None:  # the "}" is Kafka's (a stray brace in its format string)
                s += f" isValid: {java_bool(rec.valid[j - rec.lo])} crc: {rec.crc[j - rec.lo]}}}"
            if ctl:
                s += ctl[0]
        if parsed is not None:  # only a key takes the "| " that starts a line without metadata
            key_text, payload = parsed
            if key_text is not None:
                s += ((RECORD_INDENT + " " if skip_meta else " ") + "key: "
                      + (key_text if isinstance(key_text, str) else compact_json(key_text)))
            if payload is not None:
                s += " payload: " + (payload if isinstance(payload, str) else compact_json(payload))
        lines.append(s)


# --- records of a chunk of entries ------------------------------------------------------------
def _records(run: DumpRun, buf: np.ndarray, e: EntryTable, file: str) -> list[_Records | str]:
    """Per entry: its records, or the error text when they do not decode. One decode call
    for the chunk; entries are matched to rows by their record counts (v2 header count,
    1 per plain legacy message, inner messages of a wrapper), checked against the total."""
    n = len(e)
    expected: list[int | None] = []
    inner: dict[int, tuple[list[int], list[bool]]] = {}
    codec = e.codec.tolist()
    for i, (m, c) in enumerate(zip(e.magic.tolist(), e.count.tolist())):
        if m == 2:
            expected.append(c if c >= 0 else None)
        elif codec[i] == 0:
            expected.append(1)
        else:
            crcs = _inner_crcs(run, buf, e, i, file)
            if crcs is not None:
                inner[i] = crcs
            expected.append(None if crcs is None else len(crcs[0]))
    start = int(e.position[0])
    end = int(e.position[-1] + e.entry_size[-1])
    table, bad = decode_range(run, buf, start, end, file)
    rows = _Rows(table)
    out: list[_Records | str] = []
    cursor = 0
    for i in range(n):
        p = int(e.position[i])
        if p in bad:
            out.append(bad[p])
        elif expected[i] is None:
            break
        else:
            out.append(_Records(rows, cursor, cursor + expected[i]))  # type: ignore[operator]
            cursor += expected[i]  # type: ignore[operator]
    if len(out) != n or cursor != table.num_rows:
        out = []  # counts disagree with the rows: decode entry by entry instead
        for i in range(n):
            p = int(e.position[i])
            t, b = decode_range(run, buf, p, p + int(e.entry_size[i]), file)
            out.append(b[p] if p in b else _Records(_Rows(t), 0, t.num_rows))
    legacy = np.flatnonzero(e.magic < 2).tolist()
    if legacy:
        valid = verify_crcs(buf, e)
        for i in legacy:
            r = out[i]
            if isinstance(r, _Records):
                if i in inner and len(inner[i][0]) == len(r):
                    r.crc, r.valid = inner[i]
                elif codec[i] == 0:
                    r.crc, r.valid = [int(e.crc[i])], [bool(valid[i])]
    return out


def decode_range(run: DumpRun, buf: np.ndarray, start: int, end: int,
                 file: str) -> tuple[pa.Table, dict[int, str]]:
    """Records of the entries in ``buf[start:end]`` as one table, plus the error text of each
    entry that does not decode, by its position."""
    result = decode_entries(buf, topic="", partition=0, options=run.decode_options,
                            start=start, end=end, file=file)
    table = pa.Table.from_batches(list(result), schema=result.schema)
    bad = {b.start: f"{b.reason} ({Location(file, b.start, b.base_offset).describe()})"
           for b in result.bad_ranges}
    return table, bad


def _inner_crcs(run: DumpRun, buf: np.ndarray, e: EntryTable, i: int,
                file: str) -> tuple[list[int], list[bool]] | None:
    """Stored CRC and validity of each inner message of a legacy wrapper (Kafka prints them
    per record); ``None`` when the wrapper does not decompress into whole messages."""
    p, magic = int(e.position[i]), int(e.magic[i])
    loc = Location(file, p, int(e.offset[i]))
    try:
        lo, hi = wrapper_value_range(buf, p, magic, loc)
        plain = decompress(int(e.codec[i]), buf[lo:hi], magic=magic,
                           max_size=run.options.max_decompressed, location=loc)
    except KafkaLogError:
        return None
    inner = scan_entries(plain)
    if not inner.clean:
        return None
    return inner.crc.tolist(), verify_crcs(plain, inner).tolist()
