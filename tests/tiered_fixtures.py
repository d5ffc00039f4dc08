"""Tiered-storage fixtures for the tests (test harness, not the package): ``__remote_log_metadata``
record values encoded as Kafka's RemoteLogMetadataSerde writes them (flexible generated
messages, TIERED_STORAGE.md §3), and a partition offloaded the way Kafka's LocalTieredStorage
does it: its oldest segments moved into ``<tier>/kafka-tiered-storage/<topic>-<partition>-<topic
id>/<20-digit offset>-<segment uuid>.<suffix>`` (byte copies: ``.log``, ``.index``,
``.timeindex``, ``.txnindex`` when not empty, ``.snapshot``, ``.leader_epoch_checkpoint``) and
the copies recorded in the log dir's ``__remote_log_metadata-0``.

The broker oracle (tests/oracle/test_tiered_broker.py) checks the same layout against a real
broker with LocalTieredStorage; these fixtures make the cases a broker does not produce on
demand (a copy never finished, a deleted segment, a gap, an overlap).
"""

from __future__ import annotations

import base64
import os
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

import kafkalog_spark as kl
from kafkalog_spark.codec.files import checkpoints as C
from kafkalog_spark.codec.files import naming as N
from kafkalog_spark.codec.files.properties import random_uuid as new_uuid

TIER_ROOT = "kafka-tiered-storage"


def uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _string(s: str) -> bytes:
    raw = s.encode()
    return uvarint(len(raw) + 1) + raw


def _uuid(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "==")


def _tip(topic_id: str, topic: str, partition: int) -> bytes:
    return _string(topic) + _uuid(topic_id) + struct.pack(">i", partition) + b"\x00"


def _segment_id(topic_id: str, topic: str, partition: int, segment_id: str) -> bytes:
    return _tip(topic_id, topic, partition) + _uuid(segment_id) + b"\x00"


def _custom(custom: bytes | None) -> bytes:
    return b"\x00" if custom is None else uvarint(len(custom) + 1) + custom


def _frame(api_key: int, body: bytes, version: int = 0) -> bytes:
    return uvarint(1) + uvarint(api_key) + uvarint(version) + body


def segment_record(topic_id: str, topic: str, partition: int, segment_id: str, start: int,
                   end: int, size: int, *, epochs: tuple[tuple[int, int], ...] = ((0, 0),),
                   broker_id: int = 1, max_ts: int = 1_700_000_000_000,
                   event_ts: int = 1_700_000_000_500, state: int = 0,
                   txn_index_empty: bool = True) -> bytes:
    """A RemoteLogSegmentMetadataRecord (api key 0) value."""
    body = _segment_id(topic_id, topic, partition, segment_id)
    body += struct.pack(">qqiqq", start, end, broker_id, max_ts, event_ts)
    body += uvarint(len(epochs) + 1) + b"".join(struct.pack(">iq", e, o) + b"\x00"
                                                for e, o in epochs)
    body += struct.pack(">i", size) + _custom(None) + struct.pack(">b", state)
    # tagged fields: TxnIndexEmpty (tag 0) only when true (false is its default)
    body += (uvarint(1) + uvarint(0) + uvarint(1) + b"\x01") if txn_index_empty else b"\x00"
    return _frame(0, body)


def update_record(topic_id: str, topic: str, partition: int, segment_id: str, state: int, *,
                  broker_id: int = 1, event_ts: int = 1_700_000_001_000,
                  custom: bytes | None = None) -> bytes:
    """A RemoteLogSegmentMetadataUpdateRecord (api key 1) value."""
    body = _segment_id(topic_id, topic, partition, segment_id)
    body += struct.pack(">iq", broker_id, event_ts) + _custom(custom)
    body += struct.pack(">b", state) + b"\x00"
    return _frame(1, body)


def partition_delete_record(topic_id: str, topic: str, partition: int, state: int, *,
                            broker_id: int = 1, event_ts: int = 1_700_000_002_000) -> bytes:
    """A RemotePartitionDeleteMetadataRecord (api key 2) value."""
    body = _tip(topic_id, topic, partition) + struct.pack(">iqb", broker_id, event_ts, state)
    return _frame(2, body + b"\x00")


def write_metadata_log(log_dir: Path, values: list[bytes]) -> None:
    """Append record values (null keys) to ``<log_dir>/__remote_log_metadata-0``."""
    kl.write_log(pa.table({"key": pa.array([None] * len(values), pa.binary()),
                           "value": pa.array(values, pa.binary())}),
                 log_dir, topic="__remote_log_metadata", partition=0)


def topic_id_of(partition_dir: Path) -> str:
    """The topic id in a partition dir's ``partition.metadata``."""
    for line in (partition_dir / N.PARTITION_METADATA).read_text().splitlines():
        if line.startswith("topic_id:"):
            return line.split(":", 1)[1].strip()
    raise AssertionError(f"no topic_id in {partition_dir}/partition.metadata")


@dataclass
class Offloaded:
    """What :func:`offload` did: the tier root, the partition's folder in it, and per remote
    segment ``(uuid, start offset, end offset, .log size)``."""

    tier: Path
    folder: Path
    segments: list[tuple[str, int, int, int]]


def tier_folder(tier: Path, topic: str, partition: int, topic_id: str) -> Path:
    return tier / TIER_ROOT / f"{topic}-{partition}-{topic_id}"


def offload(log_dir: Path, topic: str, partition: int, tier: Path, count: int, *,
            keep_local: int = 0, metadata: bool = True, finish: bool = True) -> Offloaded:
    """Copy the partition's ``count`` oldest segments into the tier as LocalTieredStorage does,
    record them (COPY_SEGMENT_STARTED then, with ``finish``, COPY_SEGMENT_FINISHED) in
    ``__remote_log_metadata-0`` when ``metadata``, and delete the local copies but the last
    ``keep_local`` of them (a copy the broker has not deleted locally yet)."""
    pdir = log_dir / f"{topic}-{partition}"
    topic_id = topic_id_of(pdir)
    folder = tier_folder(tier, topic, partition, topic_id)
    folder.mkdir(parents=True, exist_ok=True)
    logs = sorted(pdir.glob("*.log"))
    assert len(logs) > count, f"{pdir} has {len(logs)} segments; cannot offload {count}"
    done, values = [], []
    for i, log in enumerate(logs[:count]):
        base = int(log.stem)
        end = int(logs[i + 1].stem) - 1
        seg_id = new_uuid()
        stem = folder / f"{base:020d}-{seg_id}"
        for kind in ("log", "index", "timeindex", "txnindex"):
            src = log.with_suffix(f".{kind}")
            if src.exists() and (kind != "txnindex" or src.stat().st_size):
                shutil.copyfile(src, f"{stem}.{kind}")
        snap = pdir / f"{end + 1:020d}.snapshot"
        if snap.exists():
            shutil.copyfile(snap, f"{stem}.snapshot")
        else:
            Path(f"{stem}.snapshot").write_bytes(b"")
        Path(f"{stem}.leader_epoch_checkpoint").write_text(f"0\n1\n0 {logs[0].stem.lstrip('0') or 0}\n")
        size = log.stat().st_size
        done.append((seg_id, base, end, size))
        values.append(segment_record(topic_id, topic, partition, seg_id, base, end, size,
                                     epochs=((0, base),)))
        if finish:
            values.append(update_record(topic_id, topic, partition, seg_id, 1))
    if metadata:
        write_metadata_log(log_dir, values)
    for log in logs[:count - keep_local] if count > keep_local else ():
        for f in pdir.glob(f"{log.stem}.*"):
            if not f.name.endswith(".snapshot"):
                os.remove(f)
    set_log_start(log_dir, topic, partition, int(logs[0].stem))
    return Offloaded(tier, folder, done)


def set_log_start(log_dir: Path, topic: str, partition: int, offset: int) -> None:
    """The partition's entry in ``log-start-offset-checkpoint``: with tiered storage the broker
    checkpoints the log start of the whole history, below its first local segment."""
    path = log_dir / N.LOG_START_OFFSET_CHECKPOINT
    offsets = C.parse_offset_checkpoint(path.read_text() if path.exists() else "")
    offsets[(topic, partition)] = offset
    path.write_text(C.format_offset_checkpoint(offsets))
