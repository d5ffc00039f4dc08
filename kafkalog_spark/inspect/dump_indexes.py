"""``.index``, ``.timeindex``, ``.txnindex`` and producer ``.snapshot`` dumps (inspect layer):
DumpLogSegments' entry lines and the index checks against the segment's ``.log`` (§16.4-§16.7).

An index entry whose position holds no readable batch is reported as a mismatch with log offset
−1. The time index dump looks positions up in the valid prefix of the offset index (Kafka
binary-searches every entry, zero tail included).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

from ..codec import layout as L
from ..codec.files.index import read_offset_index, read_time_index, read_txn_index
from ..codec.files.snapshot import read_snapshot
from ..codec.records.scan import STOP_LIMIT, scan_entries
from ..errors import KafkaLogError
from ..storage import absolute_name, mapped_file
from . import dump_output
from .dump_output import DumpRun, compact_json, file_offset
from .dump_segments import decode_range


# --- .index (§16.4) ---------------------------------------------------------------------------
def dump_offset_index(run: DumpRun, path: Path) -> None:
    base = file_offset(run, path.name)
    log_path = path.parent / (path.name.split(".")[0] + ".log")
    with mapped_file(log_path) as log, mapped_file(path) as raw:
        idx = read_offset_index(raw, base, file=str(path))
        if idx.entries_in_file == 0:
            run.emit(f"{run.arg} is empty.", lambda: {"type": "index_empty"})
            return
        if run.options.index_sanity_check:
            idx.sanity_check(str(path))
            run.emit(f"{run.arg} passed sanity check.",
                     lambda: {"type": "sanity_check", "passed": True})
            return
        absolute = absolute_name(path)
        rel, positions = idx.relative_offset.tolist(), idx.position.tolist()
        lines: list[str] = []
        for i in range(idx.dump_entries):
            offset, position = base + rel[i], positions[i]
            found = _first_batch_last_offset(run, log, position)
            if found != offset:
                run.report.index_mismatches.add(absolute, (offset, found))
            if not run.options.verify_index_only:
                lines.append(compact_json({"type": "offset_index_entry", "file": run.arg,
                                           "offset": offset, "position": position}) if run.jsonl
                             else f"offset: {offset} position: {position}")
            if len(lines) >= dump_output.SCAN_CHUNK_ENTRIES:
                run.flush(lines)
        run.flush(lines)


def _first_batch_last_offset(run: DumpRun, log: np.ndarray, position: int) -> int:
    """Last offset of the first whole batch in ``--max-message-size`` bytes at ``position``;
    −1 when there is none (Kafka throws there)."""
    if not 0 <= position < len(log):
        return -1
    e = scan_entries(log, position, min(len(log), position + run.options.max_message_size), 1)
    return int(e.last_offset[0]) if len(e) else -1


# --- .timeindex (§16.5) -----------------------------------------------------------------------
def dump_time_index(run: DumpRun, path: Path) -> None:
    base = file_offset(run, path.name)
    prefix = path.name.split(".")[0]
    with (mapped_file(path.parent / (prefix + ".log")) as log,
          mapped_file(path.parent / (prefix + ".index")) as raw_index,
          mapped_file(path) as raw):
        tidx = read_time_index(raw, base, file=str(path))
        if run.options.index_sanity_check:
            tidx.sanity_check(str(path))
            run.emit(f"{run.arg} passed sanity check.",
                     lambda: {"type": "sanity_check", "passed": True})
            return
        oidx = read_offset_index(raw_index, base)
        absolute = absolute_name(path)
        r = run.report
        prev = L.NO_TIMESTAMP
        lines: list[str] = []
        for ts, rel in zip(tidx.timestamp[: tidx.dump_entries].tolist(),
                           tidx.relative_offset[: tidx.dump_entries].tolist()):
            offset = base + rel
            found, pos, size = _batch_reaching(log, oidx.lookup(offset)[1], offset)
            if found != offset:
                r.time_not_found.add(absolute, (offset, found))
            else:
                t, _ = decode_range(run, log, pos, pos + size, str(path))
                stamps = t.column("timestamp").cast(pa.int64()).fill_null(-1000).to_numpy() // 1000
                max_ts = int(stamps.max()) if len(stamps) else L.NO_TIMESTAMP
                if max_ts != ts:
                    r.time_mismatches.add(absolute, (ts, max_ts))
                if prev >= ts:
                    r.time_out_of_order.add(absolute, (ts, prev))
            if not run.options.verify_index_only:
                lines.append(compact_json({"type": "time_index_entry", "file": run.arg,
                                           "timestamp": ts, "offset": offset}) if run.jsonl
                             else f"timestamp: {ts} offset: {offset}")
            prev = ts
        run.flush(lines)


def _batch_reaching(log: np.ndarray, position: int, offset: int) -> tuple[int, int, int]:
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


# --- .txnindex (§16.6) and .snapshot (§16.7) --------------------------------------------------
def dump_txn_index(run: DumpRun, path: Path) -> None:
    with mapped_file(path) as raw:
        t = read_txn_index(raw, file_offset(run, path.name), file=str(path))
    for v, pid, first, last, lso in zip(t.version.tolist(), t.producer_id.tolist(),
                                        t.first_offset.tolist(), t.last_offset.tolist(),
                                        t.last_stable_offset.tolist()):
        run.emit(f"version: {v} producerId: {pid} firstOffset: {first} lastOffset: {last} "
                 f"lastStableOffset: {lso}",
                 lambda: {"type": "aborted_txn", "version": v, "producer_id": pid,
                          "first_offset": first, "last_offset": last,
                          "last_stable_offset": lso})


def dump_snapshot(run: DumpRun, path: Path) -> None:
    with mapped_file(path) as raw:
        try:
            snap = read_snapshot(raw, file=str(path))
        except KafkaLogError as exc:  # Kafka prints CorruptSnapshotException's message only
            if run.jsonl:
                run.error(str(exc))
            else:
                run.err.write(f"{exc}\n")
            return
    for p in snap.entries:
        txn = p.current_txn_first_offset if p.current_txn_first_offset >= 0 else None
        text = (f"producerId: {p.producer_id} producerEpoch: {p.producer_epoch} "
                f"coordinatorEpoch: {p.coordinator_epoch} currentTxnFirstOffset: "
                + ("OptionalLong.empty" if txn is None else f"OptionalLong[{txn}]")
                + f" lastTimestamp: {p.timestamp} ")  # a trailing space without batch metadata
        meta = p.has_batch_metadata
        if meta:
            text += (f"firstSequence: {p.first_sequence} lastSequence: {p.last_sequence} "
                     f"lastOffset: {p.last_offset} offsetDelta: {p.offset_delta} "
                     f"timestamp: {p.timestamp}")
        run.emit(text, lambda: {
            "type": "producer_state", "producer_id": p.producer_id,
            "producer_epoch": p.producer_epoch, "coordinator_epoch": p.coordinator_epoch,
            "current_txn_first_offset": txn, "last_timestamp": p.timestamp,
            "first_sequence": p.first_sequence if meta else None,
            "last_sequence": p.last_sequence if meta else None,
            "last_offset": p.last_offset if meta else None,
            "offset_delta": p.offset_delta if meta else None,
            "timestamp": p.timestamp if meta else None})
