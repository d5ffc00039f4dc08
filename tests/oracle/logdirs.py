"""Log dir handling for the oracle tests (test harness, not the package): Kafka's offset
checkpoint files, copying partitions between log dirs, laying our partitions into a stopped
broker's log dir, and a batch-by-batch view of ``.log`` files decoded by kafka-python (an
implementation independent of ours) so that two segments can be compared field by field.

A checkpoint file (``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
``replication-offset-checkpoint``, ``cleaner-offset-checkpoint``) is a version line ``0``, a
count line and ``topic partition offset`` lines.
"""

from __future__ import annotations

import shutil
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

TopicPartition = tuple[str, int]

RECOVERY_POINT = "recovery-point-offset-checkpoint"
LOG_START = "log-start-offset-checkpoint"
HIGH_WATERMARK = "replication-offset-checkpoint"
CLEANER = "cleaner-offset-checkpoint"
CHECKPOINTS = (RECOVERY_POINT, LOG_START, HIGH_WATERMARK, CLEANER)
PARTITION_METADATA = "partition.metadata"


def read_checkpoint(path: Path) -> dict[TopicPartition, int]:
    if not path.exists():
        return {}
    lines = path.read_text().split("\n")
    out = {}
    for line in filter(None, lines[2:]):
        topic, partition, offset = line.split()
        out[(topic, int(partition))] = int(offset)
    return out


def write_checkpoint(path: Path, entries: Mapping[TopicPartition, int]) -> None:
    body = "".join(f"{t} {p} {o}\n" for (t, p), o in sorted(entries.items()))
    path.write_text(f"0\n{len(entries)}\n{body}")


def partition_dir(log_dir: Path, tp: TopicPartition) -> Path:
    return Path(log_dir) / f"{tp[0]}-{tp[1]}"


def partitions_of(log_dir: Path, topic: str) -> list[TopicPartition]:
    out = []
    for d in Path(log_dir).iterdir():
        head, _, tail = d.name.rpartition("-")
        if d.is_dir() and head == topic and tail.isdigit():
            out.append((topic, int(tail)))
    return sorted(out)


def copy_partitions(src: Path, dest: Path, tps: Iterable[TopicPartition]) -> None:
    """Copy partition dirs and their checkpoint entries from log dir ``src`` into log dir
    ``dest`` (created; entries of other partitions already in ``dest`` are kept)."""
    tps = list(tps)
    dest.mkdir(parents=True, exist_ok=True)
    for tp in tps:
        target = partition_dir(dest, tp)
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(partition_dir(src, tp), target)
    merge_checkpoints(src, dest, tps)


def merge_checkpoints(src: Path, dest: Path, tps: Iterable[TopicPartition]) -> None:
    """Each checkpoint of ``dest`` gets ``src``'s entries for ``tps`` (an entry ``src`` does not
    have is removed from ``dest``)."""
    tps = set(tps)
    for name in CHECKPOINTS:
        theirs = read_checkpoint(Path(src) / name)
        ours = {tp: o for tp, o in read_checkpoint(Path(dest) / name).items() if tp not in tps}
        ours.update({tp: o for tp, o in theirs.items() if tp in tps})
        if ours or (Path(dest) / name).exists():
            write_checkpoint(Path(dest) / name, ours)


def lay_in(broker_log_dir: Path, ours: Path, tps: Iterable[TopicPartition]) -> None:
    """Replace the files of partitions ``tps`` in a stopped broker's log dir by those of our log
    dir ``ours``, keeping the broker's ``partition.metadata`` (the topic id KRaft knows), and
    give the broker's checkpoints our entries for them."""
    tps = list(tps)
    for tp in tps:
        target = partition_dir(broker_log_dir, tp)
        metadata = (target / PARTITION_METADATA).read_bytes()
        shutil.rmtree(target)
        shutil.copytree(partition_dir(ours, tp), target)
        (target / PARTITION_METADATA).write_bytes(metadata)
    merge_checkpoints(ours, broker_log_dir, tps)


def files(directory: Path) -> dict[str, bytes]:
    """Every file of a partition dir by name (``.lock``-like empty markers included)."""
    return {f.name: f.read_bytes() for f in sorted(Path(directory).iterdir()) if f.is_file()}


def segment_bases(directory: Path) -> list[int]:
    return sorted(int(f.stem) for f in Path(directory).glob("*.log"))


# --- batches, decoded by kafka-python ---------------------------------------------------------

# v2 batch header: baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes,
# lastOffsetDelta, baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, records
_HEADER = struct.Struct(">qiibIhiqqqhii")
_FIELDS = ("base_offset", "length", "leader_epoch", "magic", "crc", "attributes",
           "last_offset_delta", "base_timestamp", "max_timestamp", "producer_id",
           "producer_epoch", "base_sequence", "count")


@dataclass(frozen=True)
class Batch:
    """One v2 batch of a ``.log`` file: its position, header fields and records as
    ``(offset, timestamp, key, value, headers)``."""

    position: int
    header: dict
    records: tuple
    raw: bytes

    @property
    def base_offset(self) -> int:
        return self.header["base_offset"]

    def describe(self) -> str:
        h = self.header
        return (f"batch at byte {self.position} offsets {h['base_offset']}.."
                f"{h['base_offset'] + h['last_offset_delta']} ({len(self.records)} records)")


def batches(log_file: Path) -> list[Batch]:
    """The v2 batches of ``log_file`` (all of them; a partial tail is left out)."""
    from kafka.record.default_records import DefaultRecordBatch

    data = Path(log_file).read_bytes()
    out, pos = [], 0
    while pos + 12 <= len(data):
        size = struct.unpack_from(">i", data, pos + 8)[0] + 12
        if size < _HEADER.size or pos + size > len(data):
            break
        raw = data[pos:pos + size]
        header = dict(zip(_FIELDS, _HEADER.unpack_from(raw)))
        if header["magic"] != 2:
            raise ValueError(f"{log_file}: byte {pos}: magic {header['magic']} (only v2 here)")
        records = tuple((r.offset, r.timestamp, r.key, r.value, tuple(r.headers))
                        for r in DefaultRecordBatch(bytearray(raw)))
        out.append(Batch(pos, header, records, raw))
        pos += size
    return out


def batch_differences(expected: list[Batch], got: list[Batch], *, label: str = "",
                      limit: int = 10) -> list[str]:
    """What differs between two segments' batches: batches only one side has, and for each
    batch both have (matched by base offset) the header fields and records that differ, and
    whether the raw bytes differ while everything decoded agrees (a compressed payload)."""
    found: list[str] = []
    want = {b.base_offset: b for b in expected}
    have = {b.base_offset: b for b in got}
    for base in sorted(set(want) - set(have)):
        found.append(f"{label}only Kafka has {want[base].describe()}")
    for base in sorted(set(have) - set(want)):
        found.append(f"{label}only we have {have[base].describe()}")
    for base in sorted(set(want) & set(have)):
        w, h = want[base], have[base]
        if w.raw == h.raw and w.position == h.position:
            continue
        fields = [f"{k} {w.header[k]} vs {h.header[k]}" for k in _FIELDS
                  if w.header[k] != h.header[k]]
        if w.position != h.position:
            fields.insert(0, f"position {w.position} vs {h.position}")
        if w.records != h.records:
            fields.append(f"records differ ({len(w.records)} vs {len(h.records)}; offsets "
                          f"{[r[0] for r in w.records][:8]} vs {[r[0] for r in h.records][:8]})")
        if not fields:
            fields.append("same fields and records, other bytes (a compressed payload)")
        found.append(f"{label}batch {base} (Kafka {w.describe()}): " + "; ".join(fields))
    return found[:limit] + ([f"... {len(found) - limit} more"] if len(found) > limit else [])


def index_entries(path: Path, width: int = 8) -> list[tuple[int, int]]:
    """``.index`` (relative offset, position) or ``.timeindex`` (timestamp, relative offset,
    ``width=12``) entries."""
    data = Path(path).read_bytes()
    fmt = ">ii" if width == 8 else ">qi"
    return [struct.unpack_from(fmt, data, i) for i in range(0, len(data) - width + 1, width)]


def log_offsets_of(log_dir: Path, tp: TopicPartition) -> tuple[int, int]:
    """``(log start offset, log end offset)`` of a partition as Kafka's loader takes them from
    its files: the larger of its ``log-start-offset-checkpoint`` entry and its first segment's
    base offset, and the offset after the last batch of its last non-empty segment."""
    pdir = partition_dir(log_dir, tp)
    bases = segment_bases(pdir)
    start = max(read_checkpoint(Path(log_dir) / LOG_START).get(tp, 0), bases[0])
    end = bases[-1]
    for base in reversed(bases):
        found = batches(pdir / f"{base:020d}.log")
        if found:
            h = found[-1].header
            end = max(end, h["base_offset"] + h["last_offset_delta"] + 1)
            break
    return start, end
