"""Producer state snapshots (codec layer): ``.snapshot`` parse/write, and producer state rebuilt
from ``.log`` buffers with ``ProducerStateManager``'s replication-path rules (KAFKA_FORMATS §10,
§6.5, §12.7).

Snapshot file, version 1 (``ProducerSnapshot.json``)::

    0  int16  version = 1
    2  uint32 crc                   CRC-32C of bytes [6, EOF) — the count field included
    6  int32  entry count N
    10        N × 46-byte entries:
       0  int64 producerId
       8  int16 epoch
       10 int32 lastSequence         -1 when the producer has no batch metadata
       14 int64 lastOffset           last data batch's last offset, -1 when none
       22 int32 offsetDelta          lastOffset - firstOffset of that batch, 0 when none
       26 int64 timestamp            lastTimestamp (data batch max timestamp or marker time)
       34 int32 coordinatorEpoch
       38 int64 currentTxnFirstOffset  first offset of the open transaction, -1 when none
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import numpy as np

from ...errors import (CorruptIndexError, CorruptRecordError, InvalidOptionError, KafkaLogError,
                       Location, UnsupportedFormatError)
from .. import layout as L
from .._bytes import load_i16, load_i32, read_varint, read_varlong
from ..records.scan import EntryTable, as_uint8, scan_entries

SNAPSHOT_VERSION = 1
SNAPSHOT_HEADER = struct.Struct(">hIi")  # version, crc, count
PRODUCER_ENTRIES_OFFSET = 6  # where the CRC-covered region starts
PRODUCER_ENTRY = struct.Struct(">qhiqiqiq")
# the broker's producer.id.expiration.ms default (Kafka 3.4+, KIP-854): a producer idle longer,
# with no transaction open, is dropped when a snapshot is loaded
PRODUCER_ID_EXPIRATION_MS = 86_400_000
assert PRODUCER_ENTRY.size == 46

INT32_MAX = L.INT32_MAX
ABORT, COMMIT = 0, 1  # ControlRecordType ids of transaction markers


def _int(value: int) -> int:
    """Java ``int`` arithmetic: wrap to int32 (a damaged batch's negative deltas reach here)."""
    return (value + 2**31) % 2**32 - 2**31


def increment_sequence(sequence: int, increment: int) -> int:
    """``DefaultRecordBatch.incrementSequence``: sequences wrap from 2^31 − 1 to 0."""
    sequence, increment = int(sequence), int(increment)  # numpy scalars would wrap on their own
    if sequence > _int(INT32_MAX - increment):
        return _int(increment - (INT32_MAX - sequence) - 1)
    return _int(sequence + increment)


def decrement_sequence(sequence: int, decrement: int) -> int:
    """``DefaultRecordBatch.decrementSequence``, the inverse of :func:`increment_sequence`."""
    sequence, decrement = int(sequence), int(decrement)
    if sequence < decrement:
        return _int(INT32_MAX - (decrement - sequence) + 1)
    return _int(sequence - decrement)


@dataclass(frozen=True)
class ProducerEntry:
    """One producer's persisted state (one 46-byte snapshot entry)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int = L.NO_SEQUENCE
    last_offset: int = -1
    offset_delta: int = 0
    timestamp: int = L.NO_TIMESTAMP
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1

    @property
    def has_batch_metadata(self) -> bool:
        """Kafka restores one BatchMetadata on load only when ``lastOffset ≥ 0``."""
        return self.last_offset >= 0

    @property
    def first_sequence(self) -> int:
        """First sequence of the last batch (``lastSeq − offsetDelta`` with wrap), as dumped."""
        return decrement_sequence(self.last_sequence, self.offset_delta)


@dataclass(frozen=True)
class ProducerSnapshot:
    """A parsed producer snapshot; ``entries`` in file order."""

    entries: tuple[ProducerEntry, ...]

    def __len__(self) -> int:
        return len(self.entries)

    def to_bytes(self) -> bytes:
        """The exact file content, CRC included."""
        body = bytearray(SNAPSHOT_HEADER.pack(SNAPSHOT_VERSION, 0, len(self.entries)))
        for e in self.entries:
            body += PRODUCER_ENTRY.pack(e.producer_id, e.producer_epoch, e.last_sequence, e.last_offset,
                                        e.offset_delta, e.timestamp, e.coordinator_epoch,
                                        e.current_txn_first_offset)
        import crc32c

        struct.pack_into(">I", body, 2, crc32c.crc32c(bytes(body[PRODUCER_ENTRIES_OFFSET:])))
        return bytes(body)


def read_snapshot(data, *, file: str | None = None) -> ProducerSnapshot:
    """Parse and CRC-verify ``.snapshot`` bytes.

    Raises
    ------
    CorruptIndexError
        Short file, version ≠ 1, CRC mismatch, negative count, entries running past the end or
        bytes left after them (Kafka: CorruptSnapshotException — it deletes the file and falls
        back to an older snapshot). ``position`` says where.
    """
    raw = bytes(as_uint8(data))
    if len(raw) < SNAPSHOT_HEADER.size:
        raise CorruptIndexError(f"producer snapshot of {len(raw)} bytes is shorter than its "
                                f"{SNAPSHOT_HEADER.size}-byte header", Location(file, 0))
    version, crc, count = SNAPSHOT_HEADER.unpack_from(raw, 0)
    if version != SNAPSHOT_VERSION:
        raise CorruptIndexError(f"producer snapshot has unknown version {version}", Location(file, 0))
    import crc32c

    computed = crc32c.crc32c(raw[PRODUCER_ENTRIES_OFFSET:])
    if computed != crc:
        raise CorruptIndexError(f"producer snapshot checksum mismatch: stored {crc:#010x}, computed "
                                f"{computed:#010x}", Location(file, 2))
    if count < 0:
        raise CorruptIndexError(f"producer snapshot has a negative entry count {count}", Location(file, 6))
    need = SNAPSHOT_HEADER.size + count * PRODUCER_ENTRY.size
    if len(raw) != need:
        raise CorruptIndexError(
            f"producer snapshot declares {count} entries ({need} bytes) but holds {len(raw)} bytes",
            Location(file, min(len(raw), need)))
    entries = tuple(ProducerEntry(*PRODUCER_ENTRY.unpack_from(raw, SNAPSHOT_HEADER.size + i * PRODUCER_ENTRY.size))
                    for i in range(count))
    return ProducerSnapshot(entries)


# ------------------------------------------------------------------------------------------
# producer state rebuilt from the log
# ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CompletedTxn:
    """A transaction closed by a marker; ``last_stable_offset`` as ``lastStableOffset`` computes it."""

    producer_id: int
    first_offset: int
    last_offset: int  # the marker batch's base offset
    is_aborted: bool
    last_stable_offset: int


@dataclass
class _Producer:
    epoch: int = L.NO_PRODUCER_EPOCH
    last_sequence: int = L.NO_SEQUENCE
    last_offset: int = -1
    offset_delta: int = 0
    timestamp: int = L.NO_TIMESTAMP
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1

    def set_epoch(self, epoch: int) -> None:
        # ProducerStateEntry.maybeUpdateProducerEpoch: a new epoch drops the batch metadata
        if epoch != self.epoch:
            self.epoch = epoch
            self.last_sequence, self.last_offset, self.offset_delta = L.NO_SEQUENCE, -1, 0


@dataclass
class ProducerStateTracker:
    """Producer state as ``ProducerStateManager`` keeps it while replaying batches during
    recovery/rebuild (origin REPLICATION: epoch and sequence problems are not errors).

    Producer expiration (``producer.id.expiration.ms``) is not applied. ``producers`` keeps
    first-seen order, which is also what Java's HashMap uses inside a bucket.
    """

    producers: dict[int, _Producer] = field(default_factory=dict)
    ongoing: dict[int, int] = field(default_factory=dict)  # producer id -> open txn first offset
    # (producer id, marker offset) of ABORT markers that closed no open transaction: the cleaner
    # keeps such a marker (and its .txnindex entry) after removing its transaction's data
    # (KAFKA_FORMATS §15.8); Kafka's replay emits no CompletedTxn for it. Callers clear it.
    bare_aborts: list[tuple[int, int]] = field(default_factory=list)

    def open_transaction(self, producer_id: int, first_offset: int) -> None:
        """Seed a transaction already open before the data being replayed."""
        self.producers.setdefault(producer_id, _Producer()).current_txn_first_offset = first_offset
        self.ongoing[producer_id] = first_offset

    def load_snapshot(self, snapshot: ProducerSnapshot) -> None:
        """Start from a snapshot's state (``loadFromSnapshot``; :meth:`expire` for its
        expiration)."""
        for e in snapshot.entries:
            self.producers[e.producer_id] = _Producer(
                e.producer_epoch, e.last_sequence, e.last_offset, e.offset_delta, e.timestamp,
                e.coordinator_epoch, e.current_txn_first_offset)
            if e.current_txn_first_offset >= 0:
                self.ongoing[e.producer_id] = e.current_txn_first_offset

    def expire(self, now_ms: int,
               expiration_ms: int = PRODUCER_ID_EXPIRATION_MS) -> list[ProducerEntry]:
        """Drop, as ``loadFromSnapshot`` does at ``now_ms``, every producer with no transaction
        open whose last timestamp is ``expiration_ms`` or more before it; return them."""
        gone = [e for e in self.snapshot().entries if e.current_txn_first_offset < 0
                and now_ms - e.timestamp >= expiration_ms]
        for e in gone:
            del self.producers[e.producer_id]
        return gone

    def apply(self, data, *, end_offset: int | None = None, file: str | None = None) -> list[CompletedTxn]:
        """Replay the v2 batches with a producer id of one ``.log`` buffer (stopping before the
        first batch whose last offset is ≥ ``end_offset``); return the transactions that ABORT
        markers closed, in log order (what goes to that segment's ``.txnindex``)."""
        buf = as_uint8(data)
        table = scan_entries(buf)
        last = table.last_offset
        rows = np.flatnonzero((table.magic == 2) & (table.producer_id >= 0))
        aborted: list[CompletedTxn] = []
        for i in rows:
            if end_offset is not None and last[i] >= end_offset:
                break
            pid = int(table.producer_id[i])
            state = self.producers.setdefault(pid, _Producer())
            attributes = int(table.attributes[i])
            epoch = int(table.producer_epoch[i])
            base = int(table.offset[i])
            if attributes & L.CONTROL_FLAG_MASK:
                if table.count[i] == 0:
                    continue  # emptied by the cleaner; the entry still exists (prepareUpdate + update)
                marker_type, coordinator_epoch, marker_ts = _parse_end_txn_marker(
                    buf, int(table.position[i]), int(table.entry_size[i]), attributes,
                    int(table.base_timestamp[i]), int(table.max_timestamp[i]), file, base)
                done = None
                if state.current_txn_first_offset >= 0:
                    done = (state.current_txn_first_offset, marker_type == ABORT)
                elif marker_type == ABORT:
                    self.bare_aborts.append((pid, base))
                state.set_epoch(epoch)
                state.current_txn_first_offset = -1
                state.coordinator_epoch = coordinator_epoch
                state.timestamp = marker_ts
                if done is not None:
                    lso = min((f for p, f in self.ongoing.items() if p != pid), default=base + 1)
                    self.ongoing.pop(pid, None)
                    if done[1]:
                        aborted.append(CompletedTxn(pid, done[0], base, True, lso))
                continue
            state.set_epoch(epoch)
            base_seq = int(table.base_sequence[i])
            delta = int(table.last_offset_delta[i])
            state.last_sequence = (L.NO_SEQUENCE if base_seq == L.NO_SEQUENCE
                                   else increment_sequence(base_seq, delta))
            state.last_offset = int(last[i])
            state.offset_delta = delta  # the header's int32, as Kafka stores it (last may wrap)
            state.timestamp = int(table.max_timestamp[i])
            transactional = bool(attributes & L.TRANSACTIONAL_FLAG_MASK)
            if state.current_txn_first_offset >= 0 and not transactional:
                raise CorruptRecordError(
                    f"non-transactional batch from producer {pid} while its transaction from offset "
                    f"{state.current_txn_first_offset} is open (InvalidTxnStateException)",
                    Location(file, int(table.position[i]), base))
            if state.current_txn_first_offset < 0 and transactional:
                state.current_txn_first_offset = base
                self.ongoing[pid] = base
        return aborted

    def apply_entries(self, data, table: EntryTable, lo: int, hi: int, *,
                      file: str | None = None) -> list[CompletedTxn]:
        """:meth:`apply` to entries ``lo..hi-1`` of ``table`` (scanned from ``data``); errors
        carry positions in ``data``."""
        if hi <= lo:
            return []
        start = int(table.position[lo])
        stop = int(table.position[hi]) if hi < len(table) else table.stop_position
        try:
            return self.apply(data[start:stop], file=file)
        except KafkaLogError as exc:
            raise exc.at(file, start) from exc

    def snapshot(self, *, order: str = "producer_id") -> ProducerSnapshot:
        """The snapshot Kafka would write for this state.

        Kafka writes its producer HashMap in iteration order. ``order="producer_id"`` (default)
        sorts by producer id — deterministic, equal to Kafka's bytes whenever the ids land in
        ascending buckets (e.g. small consecutive ids); ``order="java_hashmap"`` reproduces
        ``HashMap<Long, …>`` iteration (bucket of the spread ``Long.hashCode``, first-seen order
        within a bucket; tree bins of ≥ 8 colliding ids are not modelled).
        """
        if order == "producer_id":
            pids = sorted(self.producers)
        elif order == "java_hashmap":
            pids = java_hashmap_order(list(self.producers))
        else:
            raise InvalidOptionError(f"order must be 'producer_id' or 'java_hashmap', not {order!r}")
        return ProducerSnapshot(tuple(
            ProducerEntry(pid, p.epoch, p.last_sequence, p.last_offset, p.offset_delta, p.timestamp,
                          p.coordinator_epoch, p.current_txn_first_offset)
            for pid in pids for p in (self.producers[pid],)))


def java_hashmap_order(keys: list[int]) -> list[int]:
    """Iteration order of a ``java.util.HashMap<Long, V>`` filled with ``keys`` in this order."""
    capacity = 16
    while len(keys) > capacity * 3 // 4:
        capacity *= 2

    def bucket(key: int) -> int:
        u = key & 0xFFFFFFFFFFFFFFFF
        h = (u ^ (u >> 32)) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(keys, key=bucket)  # stable: insertion order inside a bucket


def rebuild_producer_snapshot(segments, *, end_offset: int | None = None, start: ProducerSnapshot | None = None,
                              order: str = "producer_id") -> ProducerSnapshot:
    """Producer snapshot at ``end_offset`` rebuilt by replaying ``.log`` buffers in offset order.

    Parameters
    ----------
    segments : iterable of bytes-like
        ``.log`` contents, oldest first.
    end_offset : int, optional
        The snapshot's offset (its file name): batches with last offset ≥ it are not applied.
        ``None`` replays everything (a snapshot at the log end offset).
    start : ProducerSnapshot, optional
        State to start from (an older snapshot whose offset is the first replayed batch's).
    order : str
        Entry order, see :meth:`ProducerStateTracker.snapshot`.
    """
    tracker = ProducerStateTracker()
    if start is not None:
        tracker.load_snapshot(start)
    for data in segments:
        tracker.apply(data, end_offset=end_offset)
    return tracker.snapshot(order=order)


def _parse_end_txn_marker(buf, position: int, size: int, attributes: int, base_ts: int, max_ts: int,
                          file: str | None, base_offset: int) -> tuple[int, int, int]:
    """First record of a control batch as an EndTransactionMarker: ``(type, coordinatorEpoch,
    record timestamp)``. Kafka reads the record key (int16 version, int16 type) and value
    (int16 version, int32 coordinatorEpoch); a short or negative-version key/value is an
    InvalidRecordException, any type other than ABORT/COMMIT an IllegalArgumentException."""
    loc = Location(file, position, base_offset)
    if attributes & L.CODEC_MASK:
        raise UnsupportedFormatError("compressed control batch (Kafka writes markers uncompressed)", loc)
    end = position + size
    p = position + L.RECORDS_OFFSET
    length, p = read_varint(buf, p, end)
    if p < 0 or length <= 0 or p + length > end:
        raise CorruptRecordError("control record length runs past the batch", loc)
    rec_end = p + length
    p += 1  # record attributes
    ts_delta, p = read_varlong(buf, p, rec_end)
    if p < 0:
        raise CorruptRecordError("malformed control record timestamp delta", loc)
    _, p = read_varint(buf, p, rec_end)  # offset delta
    key_len, p = read_varint(buf, p, rec_end) if p >= 0 else (0, -1)
    if p < 0 or key_len < 4 or p + key_len > rec_end:
        raise CorruptRecordError(f"control record key of {key_len} bytes, need 4", loc)
    key_version, marker_type = int(load_i16(buf, p)), int(load_i16(buf, p + 2))
    p += key_len
    value_len, p = read_varint(buf, p, rec_end)
    if p < 0 or value_len < 6 or p + value_len > rec_end:
        raise CorruptRecordError(f"end transaction marker value of {value_len} bytes, need 6", loc)
    value_version, coordinator_epoch = int(load_i16(buf, p)), int(load_i32(buf, p + 2))
    if key_version < 0 or value_version < 0:
        raise CorruptRecordError("negative control record / marker version", loc)
    if marker_type not in (ABORT, COMMIT):
        raise CorruptRecordError(f"control record type {marker_type} is not a transaction marker", loc)
    log_append = bool(attributes & L.TIMESTAMP_TYPE_MASK)
    return marker_type, coordinator_epoch, (max_ts if log_append else base_ts + int(ts_delta))
