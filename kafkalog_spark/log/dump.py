"""``kafka-dump-log.sh`` output (log layer): DumpLogSegments' text line for line, or JSON lines.

Follows Kafka 4.x ``org.apache.kafka.tools.DumpLogSegments`` (KAFKA_FORMATS §16, §19.3), not the
≤3.x Scala tool: legacy record CRCs print without the stray ``}``, LEADER_CHANGE control records
print as ``LeaderChange: <json>``, the non-consecutive-offset tracker starts at −1, and the
``--transaction-log-decoder`` prints JSON. Dispatch is by the text after the last ``.`` of the
file name (§16.2)::

    .log .checkpoint   batch lines; record lines with deep iteration       (§16.3)
    .index             offset: O position: P       + "Mismatches in :" report    (§16.4)
    .timeindex         timestamp: T offset: O      + timestamp/offset reports    (§16.5)
    .txnindex          version: producerId: firstOffset: lastOffset: lastStableOffset:
    .snapshot          producerId: ... [firstSequence: ... timestamp: ...]       (§16.7)

The end-of-run reports (index mismatches, time index errors, non-consecutive offsets) go to the
error stream, as Kafka prints them to stderr. ``format="jsonl"`` writes one JSON object per
batch, record, index entry and report item instead (keys listed in :data:`JSONL_KEYS`).

Where Kafka aborts the whole run with an exception (a corrupt entry size, records that do not
parse, a coordinator record without key, an index entry pointing at no batch) this module says
what is wrong on the error stream — one line naming file, position and base offset — and goes on
with the next batch or file; :attr:`DumpReport.errors` then makes the command exit non-zero. An
index entry whose position holds no readable batch is reported as a mismatch with log offset
−1. The time index dump looks positions up in the valid prefix of the offset index (Kafka
binary-searches every entry, zero tail included). Record timestamps beyond ±2^63/1000 ms print
as −1 (the decoder cannot carry them). Decoder JSON comes from
:mod:`kafkalog_spark.codec.internal_topics`; record types it has no field table for print their
bytes as ``"data":null,"raw":"<hex>"`` where Kafka would print the fields.
Files are only memory-mapped read-only: no byte and no modification time changes.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, TextIO

import numpy as np
import pyarrow as pa

from ..codec import internal_topics as it
from ..codec import layout as L
from ..codec.compression import DEFAULT_MAX_DECOMPRESSED, decompress
from ..codec.crc import verify_crcs
from ..codec.decode import DecodeOptions, decode_entries
from ..codec.index import read_offset_index, read_time_index, read_txn_index
from ..codec.legacy import wrapper_value_range
from ..codec.scan import (STOP_LIMIT, STOP_PARTIAL_ENTRY, STOP_SHORT_TAIL, STOP_SIZE_TOO_SMALL,
                          EntryTable, scan_entries)
from ..codec.snapshot import increment_sequence, read_snapshot
from ..errors import CorruptRecordError, InvalidOptionError, KafkaLogError, Location
from .mapped import mapped_file
from .naming import BOOTSTRAP_CHECKPOINT, offset_from_file_name, parse_kraft_snapshot_name

JAVA_INT_MAX = 2**31 - 1  # Integer.MAX_VALUE: --max-bytes default; only then the trailing-bytes line
DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024  # --max-message-size
DECODERS = ("string", "offsets", "transaction-log", "cluster-metadata")
FORMATS = ("text", "jsonl")
STRING_DECODER_CLASSES = ("org.apache.kafka.tools.api.StringDecoder", "kafka.serializer.StringDecoder")
RECORD_INDENT = "|"
SCAN_CHUNK_ENTRIES = 4096  # entries scanned, checksummed and decoded per step (bounded memory)
JSONL_KEYS = {
    "file": ("type", "file", "kind"),
    "batch": ("type", "file", "position", "base_offset", "last_offset", "count", "base_sequence",
              "last_sequence", "producer_id", "producer_epoch", "partition_leader_epoch",
              "is_transactional", "is_control", "delete_horizon_ms", "timestamp_type",
              "max_timestamp", "size", "magic", "compression", "crc", "is_valid"),
    "record": ("type", "file", "offset", "timestamp_type", "timestamp", "key_size", "value_size",
               "sequence", "header_keys", "is_valid", "crc", "control", "key?", "value?"),
    "offset_index_entry": ("type", "file", "offset", "position"),
    "time_index_entry": ("type", "file", "timestamp", "offset"),
    "aborted_txn": ("type", "file", "version", "producer_id", "first_offset", "last_offset",
                    "last_stable_offset"),
    "producer_state": ("type", "file", "producer_id", "producer_epoch", "coordinator_epoch",
                       "current_txn_first_offset", "last_timestamp", "first_sequence",
                       "last_sequence", "last_offset", "offset_delta", "timestamp"),
}
_TS_LABEL = L.TIMESTAMP_TYPE_NAMES
_CONTROL_LABELS = {2: " LeaderChange: ", 3: " SnapshotHeader ", 4: " SnapshotFooter ",
                   5: " KRaftVersion ", 6: " KRaftVoters "}


@dataclass(frozen=True)
class DumpOptions:
    """DumpLogSegments' options (§16.1); every value checked on construction.

    ``print_data_log`` implies deep iteration; a decoder other than ``"string"`` implies
    ``print_data_log``. ``max_bytes`` left at ``JAVA_INT_MAX`` means "not given" (Kafka prints
    the trailing-bytes warning only then).
    """

    deep_iteration: bool = False
    print_data_log: bool = False
    verify_index_only: bool = False
    index_sanity_check: bool = False
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    max_bytes: int = JAVA_INT_MAX
    decoder: str = "string"
    skip_record_metadata: bool = False
    format: str = "text"
    max_decompressed: int = DEFAULT_MAX_DECOMPRESSED

    def __post_init__(self) -> None:
        if self.decoder not in DECODERS:
            raise InvalidOptionError(f"decoder must be one of {', '.join(DECODERS)}; "
                                     f"got {self.decoder!r}")
        if self.format not in FORMATS:
            raise InvalidOptionError(f"format must be one of {', '.join(FORMATS)}; got {self.format!r}")
        for name in ("max_message_size", "max_bytes"):
            value = getattr(self, name)
            if not isinstance(value, int) or not 0 <= value <= JAVA_INT_MAX:
                raise InvalidOptionError(f"{name} must be an int in 0..{JAVA_INT_MAX}; got {value!r}")

    @property
    def print_data(self) -> bool:
        return self.print_data_log or self.decoder != "string"

    @property
    def deep(self) -> bool:
        return self.deep_iteration or self.print_data


@dataclass
class DumpReport:
    """What a run found besides its output: Kafka's end-of-run reports and the errors."""

    index_mismatches: dict[str, dict[int, int]] = field(default_factory=dict)
    time_mismatches: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_out_of_order: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_not_found: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    non_consecutive: dict[str, dict[int, int]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No errors (mismatch reports do not count: Kafka exits 0 with them too)."""
        return not self.errors

    def text_lines(self) -> list[str]:
        """The end-of-run stderr lines, in DumpLogSegments' order and wording."""
        out: list[str] = []
        for f, pairs in self.index_mismatches.items():
            out.append(f"Mismatches in :{f}")
            out += [f"  Index offset: {i}, log offset: {o}" for i, o in sorted(pairs.items(), reverse=True)]
        for f, rows in self.time_mismatches.items():
            out.append(f"Found timestamp mismatch in :{f}")
            out += [f"  Index timestamp: {a}, log timestamp: {b}" for a, b in rows]
        for f, rows in self.time_out_of_order.items():
            out.append(f"Found out of order timestamp in :{f}")
            out += [f"  Index timestamp: {a}, Previously indexed timestamp: {b}" for a, b in rows]
        for rows in self.time_not_found.values():
            out.append("The following indexed offsets are not found in the log.")
            out += [f"Indexed offset: {a}, found log offset: {b}" for a, b in rows]
        for f, pairs in self.non_consecutive.items():
            out.append(f"Non-consecutive offsets in {f}")
            out += [f"  {a} is followed by {b}" for a, b in sorted(pairs.items())]
        return out

    def objects(self) -> list[dict[str, Any]]:
        """The same reports as JSON-lines objects."""
        out: list[dict[str, Any]] = []
        for f, pairs in self.index_mismatches.items():
            out += [{"type": "index_mismatch", "file": f, "index_offset": i, "log_offset": o}
                    for i, o in sorted(pairs.items(), reverse=True)]
        for kind, table, names in (
                ("time_index_mismatch", self.time_mismatches, ("index_timestamp", "log_timestamp")),
                ("time_index_out_of_order", self.time_out_of_order,
                 ("index_timestamp", "previous_index_timestamp")),
                ("time_index_offset_not_found", self.time_not_found,
                 ("index_offset", "log_offset"))):
            for f, rows in table.items():
                out += [{"type": kind, "file": f, names[0]: a, names[1]: b} for a, b in rows]
        for f, pairs in self.non_consecutive.items():
            out += [{"type": "non_consecutive_offsets", "file": f, "previous": a, "next": b}
                    for a, b in sorted(pairs.items())]
        return out


def dump_files(paths: list[str], options: DumpOptions, out: TextIO, err: TextIO) -> DumpReport:
    """Dump each file as ``kafka-dump-log.sh --files`` does, then print the end-of-run reports.

    Parameters
    ----------
    paths : list of str
        Files as given on the command line (printed as given in ``Dumping <path>``).
    options : DumpOptions
        What to print.
    out, err : TextIO
        Standard output and error streams. Output is written batch chunk by batch chunk.

    Returns
    -------
    DumpReport
        Mismatch/non-consecutive reports and the per-file errors (already printed).
    """
    dumper = _Dumper(options, out, err)
    for arg in paths:
        dumper.dump(arg)
    if options.format == "text":
        lines = dumper.report.text_lines()
        if lines:
            err.write("\n".join(lines) + "\n")
    else:
        for obj in dumper.report.objects():
            out.write(_json(obj) + "\n")
    return dumper.report


def _json(obj: Any) -> str:
    """Compact JSON like Jackson's ``toString`` (no spaces, non-ASCII kept)."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _kafka_json(data: Any, fields: tuple[it.Field, ...] | None, version: int) -> Any:
    """A decoded struct as Kafka's JsonConverter writes it: tagged fields at their default and
    unknown tagged fields left out, and our own additions removed."""
    if not isinstance(data, dict):
        return data
    data = {k: v for k, v in data.items()
            if k not in ("unknownTaggedFields", "transactionStatusName")}
    for f in fields or ():
        if f.tag is not None and f.name in data and data[f.name] == f.default:
            del data[f.name]
    return data


def _upper_snake(name: str) -> str:
    """``TopicRecord`` -> ``TOPIC_RECORD`` (MetadataRecordType's enum names)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).upper()


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


class _Dumper:
    """One run: options, streams, and the report that grows file by file."""

    def __init__(self, options: DumpOptions, out: TextIO, err: TextIO) -> None:
        self.o = options
        self.out = out
        self.err = err
        self.jsonl = options.format == "jsonl"
        self.report = DumpReport()
        self.decode_options = DecodeOptions(verify_crc=False, include_headers=True,
                                            include_metadata=True, include_control=True,
                                            on_error="skip", max_decompressed=options.max_decompressed)
        self.arg = ""

    # --- output helpers ---------------------------------------------------------------------
    def emit(self, text: str, obj: Callable[[], dict[str, Any]]) -> None:
        if self.jsonl:
            self.out.write(_json({**obj(), "file": self.arg}) + "\n")
        else:
            self.out.write(text + "\n")

    def error(self, message: str) -> None:
        """A problem Kafka would abort on: reported, counted, and the dump goes on."""
        self.report.errors.append(message)
        if self.jsonl:
            self.out.write(_json({"type": "error", "file": self.arg, "message": message}) + "\n")
        else:
            self.err.write(message + "\n")

    # --- dispatch (§16.2) -----------------------------------------------------------------------
    def dump(self, arg: str) -> None:
        self.arg = arg
        path = Path(arg)
        name = path.name
        suffix = name[name.rfind("."):] if "." in name else ""
        handler = {".log": self.log, ".checkpoint": self.log, ".index": self.index,
                   ".timeindex": self.time_index, ".snapshot": self.snapshot,
                   ".txnindex": self.txn_index}.get(suffix)
        self.emit(f"Dumping {arg}", lambda: {"type": "file", "kind": suffix.lstrip(".") or None})
        if handler is None:
            if self.jsonl:
                self.out.write(_json({"type": "ignored", "file": arg}) + "\n")
            else:
                self.err.write(f"Ignoring unknown file {arg}\n")
            return
        try:
            handler(path)
        except KafkaLogError as exc:
            self.error(f"Error dumping {arg}: {exc}")

    # --- .log / .checkpoint (§16.3) ---------------------------------------------------------
    def log(self, path: Path) -> None:
        name = path.name
        if name.endswith(".log"):
            start = offset_from_file_name(name)
            self.emit(f"Log starting offset: {start}",
                      lambda: {"type": "log_start_offset", "offset": start})
        elif name == BOOTSTRAP_CHECKPOINT:
            self.emit("KRaft bootstrap snapshot", lambda: {"type": "kraft_bootstrap_snapshot"})
        else:
            snap = parse_kraft_snapshot_name(name)
            self.emit(f"Snapshot end offset: {snap.end_offset}, epoch: {snap.epoch}",
                      lambda: {"type": "snapshot_id", "end_offset": snap.end_offset,
                               "epoch": snap.epoch})
        absolute = os.path.abspath(path)
        last = [-1]  # 4.x: the tracker starts at -1, so a first offset > 0 is reported
        with mapped_file(path) as buf:
            end = min(len(buf), self.o.max_bytes)
            pos = 0
            while True:
                entries = scan_entries(buf, pos, end, max_entries=SCAN_CHUNK_ENTRIES)
                if len(entries):
                    self.batches(buf, entries, absolute, last, str(path))
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
            if trailing > 0 and self.o.max_bytes == JAVA_INT_MAX:
                self.emit(f"Found {trailing} invalid bytes at the end of {name}",
                          lambda: {"type": "trailing_bytes", "bytes": trailing})

    def batches(self, buf: np.ndarray, e: EntryTable, absolute: str, last: list[int],
                file: str) -> None:
        valid = verify_crcs(buf, e).tolist()
        records = self.records(buf, e, file) if self.o.deep else None
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
                        f"isTransactional: {_b(txn)} isControl: {_b(control)} deleteHorizonMs: "
                        + ("OptionalLong.empty" if horizon is None else f"OptionalLong[{horizon}]"))
            else:
                lseq, txn, horizon = -1, False, None
                head = f"offset: {off[i]}"
            if self.jsonl:
                legacy_wrapper = magic[i] < 2 and codec != "none"
                lines.append(_json({
                    "type": "batch", "file": self.arg, "position": pos[i],
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
                             f"isvalid: {_b(valid[i])}")
            if records is None:
                continue
            rec = records[i]
            if isinstance(rec, str):
                self.flush(lines)
                self.error(rec)
                continue
            self.record_lines(lines, rec, label, magic[i], control, absolute, last)
        self.flush(lines)

    def flush(self, lines: list[str]) -> None:
        if lines:
            self.out.write("\n".join(lines) + "\n")
            lines.clear()

    def record_lines(self, lines: list[str], rec: _Records, label: str, magic: int,
                     control: bool, absolute: str, last: list[int]) -> None:
        skip_meta, print_data = self.o.skip_record_metadata, self.o.print_data and not control
        r = rec.rows
        for j in range(rec.lo, rec.hi):
            off = r.offset[j]
            if off != last[0] + 1:
                self.report.non_consecutive.setdefault(absolute, {})[last[0]] = off
            last[0] = off
            key, value = r.key[j], r.value[j]
            ks = -1 if key is None else len(key)
            vs = -1 if value is None else len(value)
            ctl = self.control_info(key, value, off) if control else None
            parsed = self.parse(key, value, off) if print_data else None
            if self.jsonl:
                obj: dict[str, Any] = {
                    "type": "record", "file": self.arg, "offset": off, "timestamp_type": label,
                    "timestamp": r.ts[j], "key_size": ks, "value_size": vs,
                    "sequence": r.seq[j] if magic >= 2 else None,
                    "header_keys": r.header_keys[j] if magic >= 2 else None,
                    "is_valid": rec.valid[j - rec.lo] if rec.valid is not None else None,
                    "crc": rec.crc[j - rec.lo] if rec.crc is not None else None,
                    "control": ctl[1] if ctl else None}
                if parsed is not None:
                    obj["key"], obj["value"] = parsed
                lines.append(_json(obj))
                continue
            s = ""
            if not skip_meta:
                s = f"{RECORD_INDENT} offset: {off} {label}: {r.ts[j]} keySize: {ks} valueSize: {vs}"
                if magic >= 2:
                    s += f" sequence: {r.seq[j]} headerKeys: [{','.join(r.header_keys[j])}]"
                if rec.crc is not None:
                    s += f" isValid: {_b(rec.valid[j - rec.lo])} crc: {rec.crc[j - rec.lo]}"
                if ctl:
                    s += ctl[0]
            if parsed is not None:
                prefix = RECORD_INDENT + " " if skip_meta else " "
                for label_, part in (("key: ", parsed[0]), ("payload: ", parsed[1])):
                    if part is not None:
                        s += prefix + label_ + (part if isinstance(part, str) else _json(part))
                        prefix = " "
            lines.append(s)

    # --- records of a chunk of entries ------------------------------------------------------
    def records(self, buf: np.ndarray, e: EntryTable, file: str) -> list[_Records | str]:
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
                crcs = self.inner_crcs(buf, e, i, file)
                if crcs is not None:
                    inner[i] = crcs
                expected.append(None if crcs is None else len(crcs[0]))
        start = int(e.position[0])
        end = int(e.position[-1] + e.entry_size[-1])
        table, bad = self.decode(buf, start, end, file)
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
                t, b = self.decode(buf, p, p + int(e.entry_size[i]), file)
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

    def decode(self, buf: np.ndarray, start: int, end: int, file: str) -> tuple[pa.Table, dict[int, str]]:
        result = decode_entries(buf, topic="", partition=0, options=self.decode_options,
                                start=start, end=end, file=file)
        table = pa.Table.from_batches(list(result), schema=result.schema)
        bad = {b.start: f"{b.reason} ({Location(file, b.start, b.base_offset).describe()})"
               for b in result.bad_ranges}
        return table, bad

    def inner_crcs(self, buf: np.ndarray, e: EntryTable, i: int,
                   file: str) -> tuple[list[int], list[bool]] | None:
        """Stored CRC and validity of each inner message of a legacy wrapper (Kafka prints them
        per record); ``None`` when the wrapper does not decompress into whole messages."""
        p, magic = int(e.position[i]), int(e.magic[i])
        loc = Location(file, p, int(e.offset[i]))
        try:
            lo, hi = wrapper_value_range(buf, p, magic, loc)
            plain = decompress(int(e.codec[i]), buf[lo:hi], magic=magic,
                               max_size=self.o.max_decompressed, location=loc)
        except KafkaLogError:
            return None
        inner = scan_entries(plain)
        if not inner.clean:
            return None
        return inner.crc.tolist(), verify_crcs(plain, inner).tolist()

    # --- record details ---------------------------------------------------------------------
    def control_info(self, key: bytes | None, value: bytes | None,
                     offset: int) -> tuple[str, dict[str, Any]] | None:
        """Text and JSON-lines form of a control record's details (``printControlRecord``)."""
        loc = Location(self.arg, None, offset)
        if key is None or len(key) < 4:
            self.error(f"Invalid control record key at offset {offset}: needs 4 bytes, "
                       f"found {0 if key is None else len(key)} ({loc.describe()})")
            return None
        version = int.from_bytes(key[:2], "big", signed=True)
        type_id = int.from_bytes(key[2:4], "big", signed=True)
        if version < 0:
            self.error(f"Invalid version found for control record: {version}. May indicate data "
                       f"corruption ({loc.describe()})")
            return None
        name = it.CONTROL_RECORD_NAMES.get(type_id)
        if name is None:
            return f" controlType: UNKNOWN({type_id})", {"type": "UNKNOWN", "type_id": type_id}
        try:
            decoded = it.decode_control_record_value(type_id, value, location=loc)
        except KafkaLogError as exc:
            self.error(f"Cannot decode {name} control record: {exc}")
            return None
        data = _kafka_json(decoded["data"], it.CONTROL_RECORD_VALUES.get(type_id), 0)
        obj = {"type": name, "type_id": type_id, "data": data}
        if type_id in (0, 1):
            return f" endTxnMarker: {name} coordinatorEpoch: {data['coordinatorEpoch']}", obj
        return _CONTROL_LABELS[type_id] + _json(data), obj

    def parse(self, key: bytes | None, value: bytes | None, offset: int) -> tuple[Any, Any]:
        """The (key, value) a DumpLogSegments MessageParser returns; ``None`` prints nothing."""
        d = self.o.decoder
        if d == "string":
            return (None if key is None else key.decode("utf-8", "replace"),
                    None if value is None else value.decode("utf-8", "replace"))
        if d == "cluster-metadata":
            return None, self.metadata_value(value, offset)
        if key is None:
            self.error(f"Failed to decode message at offset {offset} using the specified decoder "
                       f"(message had a missing key) ({Location(self.arg, None, offset).describe()})")
            return None, None
        try:
            if d == "offsets":
                k = it.decode_consumer_offsets_key(key)
                if k["name"] is None:
                    return f"Unknown record type {k['type']} at offset {offset}, skipping.", None
                v = it.decode_consumer_offsets_value(k, value)
                # offset commit and group metadata values have no tagged fields
                key_type, fields = k["type"], None
            else:
                k = it.decode_transaction_log_key(key)
                if k["name"] is None:
                    return f"Unknown record type {k['version']} at offset {offset}, skipping.", None
                v = it.decode_transaction_log_value(value)
                key_type, fields = k["version"], it.TRANSACTION_LOG_VALUE
        except KafkaLogError as exc:
            return f"Error at offset {offset}, skipping. {exc.reason}", None
        key_json = {"type": str(key_type), "data": k["data"]}
        if v is None:
            return key_json, "<DELETE>"
        value_json: dict[str, Any] = {"version": str(v["version"]),
                                      "data": _kafka_json(v["data"], fields, v["version"])}
        if v["data"] is None:
            value_json["raw"] = v.get("raw")
        return key_json, value_json

    def metadata_value(self, value: bytes | None, offset: int) -> Any:
        try:
            rec = it.decode_metadata_record(value)  # type: ignore[arg-type]
        except KafkaLogError as exc:
            return f"Error at {offset}, skipping. {exc.reason}"
        if rec["name"] is None:
            return f"Error at {offset}, skipping. Unknown metadata id {rec['type']}"
        schema = it.METADATA_RECORDS.get(rec["type"])
        out: dict[str, Any] = {"type": _upper_snake(rec["name"]), "version": rec["version"],
                               "data": _kafka_json(rec["data"], schema[0] if schema else None,
                                                   rec["version"])}
        if rec["data"] is None:
            out["raw"] = rec.get("raw")
        return out

    # --- .index (§16.4) -----------------------------------------------------------------------
    def index(self, path: Path) -> None:
        base = offset_from_file_name(path.name)
        log_path = path.parent / (path.name.split(".")[0] + ".log")
        with mapped_file(log_path) as log, mapped_file(path) as raw:
            idx = read_offset_index(raw, base, file=str(path))
            if idx.entries_in_file == 0:
                self.emit(f"{self.arg} is empty.", lambda: {"type": "index_empty"})
                return
            if self.o.index_sanity_check:
                idx.sanity_check(str(path))
                self.emit(f"{self.arg} passed sanity check.",
                          lambda: {"type": "sanity_check", "passed": True})
                return
            absolute = os.path.abspath(path)
            rel, positions = idx.relative_offset.tolist(), idx.position.tolist()
            lines: list[str] = []
            for i in range(idx.dump_entries):
                offset, position = base + rel[i], positions[i]
                found = self.first_batch_last_offset(log, position)
                if found != offset:
                    self.report.index_mismatches.setdefault(absolute, {})[offset] = found
                if not self.o.verify_index_only:
                    lines.append(_json({"type": "offset_index_entry", "file": self.arg,
                                        "offset": offset, "position": position}) if self.jsonl
                                 else f"offset: {offset} position: {position}")
                if len(lines) >= SCAN_CHUNK_ENTRIES:
                    self.flush(lines)
            self.flush(lines)

    def first_batch_last_offset(self, log: np.ndarray, position: int) -> int:
        """Last offset of the first whole batch in ``--max-message-size`` bytes at ``position``;
        −1 when there is none (Kafka throws there)."""
        if not 0 <= position < len(log):
            return -1
        e = scan_entries(log, position, min(len(log), position + self.o.max_message_size), 1)
        return int(e.last_offset[0]) if len(e) else -1

    # --- .timeindex (§16.5) -------------------------------------------------------------------
    def time_index(self, path: Path) -> None:
        base = offset_from_file_name(path.name)
        prefix = path.name.split(".")[0]
        with (mapped_file(path.parent / (prefix + ".log")) as log,
              mapped_file(path.parent / (prefix + ".index")) as raw_index,
              mapped_file(path) as raw):
            tidx = read_time_index(raw, base, file=str(path))
            if self.o.index_sanity_check:
                tidx.sanity_check(str(path))
                self.emit(f"{self.arg} passed sanity check.",
                          lambda: {"type": "sanity_check", "passed": True})
                return
            oidx = read_offset_index(raw_index, base)
            absolute = os.path.abspath(path)
            r = self.report
            prev = L.NO_TIMESTAMP
            lines: list[str] = []
            for ts, rel in zip(tidx.timestamp[: tidx.dump_entries].tolist(),
                               tidx.relative_offset[: tidx.dump_entries].tolist()):
                offset = base + rel
                found, pos, size = self.batch_reaching(log, oidx.lookup(offset)[1], offset)
                if found != offset:
                    r.time_not_found.setdefault(absolute, []).append((offset, found))
                else:
                    t, _ = self.decode(log, pos, pos + size, str(path))
                    stamps = t.column("timestamp").cast(pa.int64()).fill_null(-1000).to_numpy() // 1000
                    max_ts = int(stamps.max()) if len(stamps) else L.NO_TIMESTAMP
                    if max_ts != ts:
                        r.time_mismatches.setdefault(absolute, []).append((ts, max_ts))
                    if prev >= ts:
                        r.time_out_of_order.setdefault(absolute, []).append((ts, prev))
                if not self.o.verify_index_only:
                    lines.append(_json({"type": "time_index_entry", "file": self.arg,
                                        "timestamp": ts, "offset": offset}) if self.jsonl
                                 else f"timestamp: {ts} offset: {offset}")
                prev = ts
            self.flush(lines)

    def batch_reaching(self, log: np.ndarray, position: int, offset: int) -> tuple[int, int, int]:
        """``(lastOffset, position, size)`` of the first batch from ``position`` whose last offset
        is ≥ ``offset``; lastOffset −1 when none."""
        pos = position
        while 0 <= pos < len(log):
            e = scan_entries(log, pos, None, 64)
            hits = np.flatnonzero(e.last_offset >= offset)
            if len(hits):
                k = int(hits[0])
                return int(e.last_offset[k]), int(e.position[k]), int(e.entry_size[k])
            if e.stop_code != STOP_LIMIT:
                break
            pos = e.stop_position
        return -1, -1, 0

    # --- .txnindex (§16.6) and .snapshot (§16.7) ----------------------------------------------
    def txn_index(self, path: Path) -> None:
        with mapped_file(path) as raw:
            t = read_txn_index(raw, offset_from_file_name(path.name), file=str(path))
        for v, pid, first, last, lso in zip(t.version.tolist(), t.producer_id.tolist(),
                                            t.first_offset.tolist(), t.last_offset.tolist(),
                                            t.last_stable_offset.tolist()):
            self.emit(f"version: {v} producerId: {pid} firstOffset: {first} lastOffset: {last} "
                      f"lastStableOffset: {lso}",
                      lambda: {"type": "aborted_txn", "version": v, "producer_id": pid,
                               "first_offset": first, "last_offset": last,
                               "last_stable_offset": lso})

    def snapshot(self, path: Path) -> None:
        with mapped_file(path) as raw:
            try:
                snap = read_snapshot(raw, file=str(path))
            except KafkaLogError as exc:  # Kafka prints CorruptSnapshotException's message only
                if self.jsonl:
                    self.error(str(exc))
                else:
                    self.err.write(f"{exc}\n")
                return
        for p in snap.entries:
            txn = p.current_txn_first_offset if p.current_txn_first_offset >= 0 else None
            text = (f"producerId: {p.producer_id} producerEpoch: {p.producer_epoch} "
                    f"coordinatorEpoch: {p.coordinator_epoch} currentTxnFirstOffset: "
                    + ("OptionalLong.empty" if txn is None else f"OptionalLong[{txn}]")
                    + f" lastTimestamp: {p.timestamp}")
            meta = p.has_batch_metadata
            if meta:
                text += (f" firstSequence: {p.first_sequence} lastSequence: {p.last_sequence} "
                         f"lastOffset: {p.last_offset} offsetDelta: {p.offset_delta} "
                         f"timestamp: {p.timestamp}")
            self.emit(text, lambda: {
                "type": "producer_state", "producer_id": p.producer_id,
                "producer_epoch": p.producer_epoch, "coordinator_epoch": p.coordinator_epoch,
                "current_txn_first_offset": txn, "last_timestamp": p.timestamp,
                "first_sequence": p.first_sequence if meta else None,
                "last_sequence": p.last_sequence if meta else None,
                "last_offset": p.last_offset if meta else None,
                "offset_delta": p.offset_delta if meta else None,
                "timestamp": p.timestamp if meta else None})


def _b(value: bool) -> str:
    return "true" if value else "false"
