"""Erase (log-management layer): ``kafkalog erase LOG_DIR --topic T --keys FILE`` removes every
record whose key is in a key set from a stopped broker's log dir, for good.

Per partition of the topic (``-delete`` dirs and the metadata log aside), every segment —
the active one too: the log dir's ``.lock`` says no broker holds it — is scanned for records
whose key is in the set (128-bit MurmurHash3 digests of the keys, confirmed byte for byte).
A segment with no match is not touched. A segment with matches is rewritten:

* a batch with no match: its bytes, unchanged;
* a batch with matches: rebuilt without them, with every other record's offset (an offset gap
  where each erased record was) and the batch's header (base offset, last offset, leader
  epoch, codec, timestamp type, producer id/epoch/sequence, transactional flag, delete
  horizon) — a v0/v1 entry is rebuilt as a v2 batch, as Kafka's cleaner does since KIP-724;
* a batch whose every record matches: dropped, unless it carries a producer id, in which case
  the 61-byte empty batch keeps the producer's epoch and sequence, as the cleaner keeps it
  (and the log's last batch stays, empty, so the log end offset does not move back);
* control batches (transaction markers) are never erased;

through the crash-safe ``.cleaned → .swap → live`` replacement (the old files are deleted:
erasure means gone), with the indexes rebuilt and the transaction index kept (offsets and
aborted transactions do not change). A run killed anywhere is finished by the next one: the
swap passes complete or roll back the replacement, and a second scan finds what is left.

The key set is read ``max_keys`` at a time; more keys mean one more pass over the log per
chunk (memory bounded like the cleaner's dedupe buffer). The audit report never holds a key or
a value: per partition the records removed, segments rewritten, offset ranges touched, and a
SHA-256 of the sorted key set. ``check`` only scans and reports what is left.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from ..codec import layout as L
from ..codec.decode import DecodeOptions, decode_to_table
from ..codec.digest import key_digests
from ..codec.encode import encode_batch
from ..codec.scan import scan_entries
from ..errors import InvalidOptionError
from ..log.discovery import discover
from ..log.lock import ensure_local, ensure_not_locked, hold_lock
from ..log.model import PartitionDir, Segment
from ..log.selection import require_kafka_data
from ..log.storage import mapped_file, storage_for
from ..log.swap import NewSegment, complete_interrupted_swaps, replace_segments
from .rewrite import batch_spec, timestamps_ms, windows

Step = Callable[[str], None]
DEFAULT_MAX_KEYS = 1 << 20
_ROWS = DecodeOptions(include_headers=True, include_metadata=True, include_control=True)
_KEYS = DecodeOptions(columns=("key", "offset", "isControl"), include_control=True)


def read_keys(path: str | os.PathLike[str], encoding: str = "utf8") -> list[bytes]:
    """The keys of a keys file: one per line (``utf8`` text, or ``hex`` / ``base64`` for binary
    keys); blank lines are skipped. Refuses a missing or empty file."""
    import base64

    p = Path(path)
    fs = storage_for(p)
    if not fs.is_file(p):
        raise InvalidOptionError(f"keys file {p} does not exist")
    lines = [ln for ln in fs.read_bytes(p).split(b"\n") if ln.strip(b"\r")]
    try:
        keys = [bytes.fromhex(ln.decode().strip()) if encoding == "hex"
                else base64.b64decode(ln.strip(), validate=True) if encoding == "base64"
                else ln.rstrip(b"\r") for ln in lines]
    except ValueError as exc:
        raise InvalidOptionError(f"keys file {p}: a line is not {encoding}: {exc}") from None
    if not keys:
        raise InvalidOptionError(f"keys file {p} holds no keys")
    return keys


def key_set_hash(keys: Sequence[bytes]) -> str:
    """SHA-256 over the sorted distinct keys (length-prefixed): names the key set in the audit
    report without holding any key."""
    h = hashlib.sha256()
    for k in sorted(set(keys)):
        h.update(len(k).to_bytes(8, "big"))
        h.update(k)
    return h.hexdigest()


class KeySet:
    """A chunk of keys: sorted digests for the search, the bytes to confirm a hit."""

    def __init__(self, keys: Sequence[bytes]) -> None:
        arr = pa.array(list(keys), pa.binary())
        hi, lo = key_digests(arr)
        order = np.lexsort((lo, hi))
        self.hi, self.lo = hi[order], lo[order]
        self.keys = set(keys)

    def matches(self, keys: pa.Array | pa.ChunkedArray) -> np.ndarray:
        """Which of ``keys`` (null: never) are in the set."""
        hi, lo = key_digests(keys)
        a = np.searchsorted(self.hi, hi, side="left")
        b = np.searchsorted(self.hi, hi, side="right")
        hit = np.zeros(len(hi), bool)
        for i in np.flatnonzero(b > a).tolist():  # digest candidates: confirm exactly
            if lo[i] in self.lo[a[i]:b[i]]:
                hit[i] = True
        idx = np.flatnonzero(hit)
        if len(idx):
            values = keys.take(pa.array(idx)).to_pylist()
            hit[idx] = [v is not None and v in self.keys for v in values]
        return hit


@dataclass
class PartitionErase:
    """The audit of one partition."""

    partition: str
    records_removed: int = 0
    segments_scanned: int = 0
    segments_rewritten: list[str] = field(default_factory=list)
    offset_ranges: list[list[int]] = field(default_factory=list)  # [first, last] per segment

    def to_dict(self) -> dict:
        return {"partition": self.partition, "records_removed": self.records_removed,
                "segments_scanned": self.segments_scanned,
                "segments_rewritten": self.segments_rewritten,
                "offset_ranges": self.offset_ranges}


def erase(log_dirs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], topic: str,
          keys: Sequence[bytes], *, execute_plan: bool = True, max_keys: int = DEFAULT_MAX_KEYS,
          step: Step | None = None) -> dict:
    """Erase the records of ``topic`` whose key is in ``keys`` (module docstring).

    Returns the audit report: ``{"executed", "topic", "key_set_sha256", "keys",
    "records_removed", "partitions": [...]}``; with ``execute_plan=False`` (dry run, and what
    ``--check`` runs) nothing changes and the counts are what is there to erase.

    Raises
    ------
    InvalidOptionError
        No keys, or a path that is not a log dir.
    LogDirLockedError
        A live broker holds a log dir.
    """
    if not keys:
        raise InvalidOptionError("erase needs at least one key")
    ensure_local(log_dirs)
    found = discover(log_dirs)
    require_kafka_data(found)
    parts = [p for ld in found.log_dirs for p in ld.partitions if p.topic == topic]
    parts += [p for p in found.partitions if p.topic == topic and p.kind is None]
    audits = []
    for part in parts:
        root = part.path.parent
        ensure_not_locked(root)
        if execute_plan:
            with hold_lock(root):
                audits.append(_erase_partition(part, keys, max_keys, True, step))
        else:
            audits.append(_erase_partition(part, keys, max_keys, False, step))
    return {"executed": execute_plan, "topic": topic, "key_set_sha256": key_set_hash(keys),
            "keys": len(set(keys)), "records_removed": sum(a.records_removed for a in audits),
            "partitions": [a.to_dict() for a in audits]}


def _chunks(keys: Sequence[bytes], n: int) -> Iterator[KeySet]:
    distinct = sorted(set(keys))
    for i in range(0, len(distinct), n):
        yield KeySet(distinct[i:i + n])


def _erase_partition(part: PartitionDir, keys: Sequence[bytes], max_keys: int, execute: bool,
                     step: Step | None) -> PartitionErase:
    audit = PartitionErase(part.name)
    if execute:
        complete_interrupted_swaps(part.path, step=step)  # a killed run's replacement
        part = discover([part.path]).partitions[0]
    for chunk in _chunks(keys, max_keys):
        for seg in part.segments:
            audit.segments_scanned += 1
            with mapped_file(seg.log) as buf:
                hits = _matches(buf, seg, part, chunk)
                if not len(hits):
                    continue
                audit.records_removed += len(hits)
                audit.offset_ranges.append([int(hits.min()), int(hits.max())])
                audit.segments_rewritten.append(seg.name)
                if execute:
                    data = _rewritten(buf, seg, part, np.sort(hits),
                                      last_segment=seg is part.segments[-1])
            if execute:
                _swap(part, seg, data, step)
        if execute:
            part = discover([part.path]).partitions[0]
    return audit


def _matches(buf: np.ndarray, seg: Segment, part: PartitionDir, keys: KeySet) -> np.ndarray:
    """Offsets of the segment's data records whose key is in ``keys``."""
    rows = decode_to_table(buf, topic=part.topic or "", partition=part.partition or 0,
                           options=_KEYS, file=str(seg.log))
    if not rows.num_rows:
        return np.zeros(0, np.int64)
    hit = keys.matches(rows.column("key")) & ~np.asarray(
        rows.column("isControl").to_numpy(zero_copy_only=False), bool)
    return rows.column("offset").to_numpy()[hit]


def _rewritten(buf: np.ndarray, seg: Segment, part: PartitionDir, erased: np.ndarray, *,
               last_segment: bool) -> bytes:
    """The segment without the records at the sorted ``erased`` offsets (module docstring).
    The log's last batch is kept (empty) when every record of it goes, so the log end offset
    does not move back."""
    t = scan_entries(buf)
    out = bytearray()
    lasts = t.last_offset
    firsts = np.concatenate(([seg.base_offset], lasts[:-1] + 1))  # legacy: after the previous
    firsts = np.where(t.magic == 2, t.offset, firsts)
    hit = np.searchsorted(erased, firsts) < np.searchsorted(erased, lasts, side="right")
    horizon_flag = t.has_delete_horizon()
    for i0, i1, start, stop in windows(t):
        if not hit[i0:i1].any():
            out += buf[start:stop].tobytes()
            continue
        # one decode per window holding matches (not one per batch)
        rows = decode_to_table(buf, topic=part.topic or "", partition=part.partition or 0,
                               options=_ROWS, start=start, end=stop, file=str(seg.log))
        offsets = rows.column("offset").to_numpy()
        entry = np.searchsorted(lasts, rows.column("batchLastOffset").to_numpy())
        row_start = np.searchsorted(entry, np.arange(i0, i1 + 1))
        pos_e = np.searchsorted(erased, offsets)
        keep = ~((pos_e < len(erased)) & (erased[np.minimum(pos_e, len(erased) - 1)] == offsets))
        cols = {c: rows.column(c).combine_chunks() for c in ("key", "value", "headers")}
        ts_ms = timestamps_ms(rows.column("timestamp"))
        for i in range(i0, i1):
            pos, size = int(t.position[i]), int(t.entry_size[i])
            if not hit[i]:
                out += buf[pos:pos + size].tobytes()
                continue
            lo, hi = int(row_start[i - i0]), int(row_start[i - i0 + 1])
            idx = lo + np.flatnonzero(keep[lo:hi])
            magic = int(t.magic[i])
            if len(idx):
                base = int(t.offset[i]) if magic == 2 else int(offsets[idx[0]])
                # the batch keeps its last offset (a legacy wrapper's is its own offset)
                spec = batch_spec(t, i, base=base, empty=False, last_delta=int(lasts[i]) - base,
                                  horizon=int(t.base_timestamp[i]) if horizon_flag[i] else None)
                take = pa.array(idx)
                headers = cols["headers"].take(take)
                if magic < 2:
                    headers = pa.array([[] for _ in idx], headers.type)
                out += encode_batch(cols["key"].take(take), cols["value"].take(take), ts_ms[idx],
                                    spec=spec, offset_deltas=offsets[idx] - base, headers=headers)
            elif (magic == 2 and int(t.producer_id[i]) >= 0) or (last_segment and i == len(t) - 1):
                out += encode_batch([], [], [], spec=batch_spec(
                    t, i, base=int(t.offset[i]), horizon=None,
                    last_delta=int(t.last_offset_delta[i]), empty=True))
    return bytes(out)


def _swap(part: PartitionDir, seg: Segment, data: bytes, step: Step | None) -> None:
    txn = None
    if seg.txnindex is not None:
        txn = storage_for(seg.txnindex).read_bytes(seg.txnindex)
    replace_segments(part.path, [NewSegment(seg.base_offset, data, txnindex=txn, mtime=seg.mtime)],
                     [seg.base_offset], step=step)
