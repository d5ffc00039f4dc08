"""Fuzzing corpus (tests): the valid inputs the mutators start from, per kind of file.

Kinds: ``log`` (v0/v1 via kafka-python's ``LegacyRecordBatchBuilder``, v2 via
``encode_record_batches``, transactional batches and COMMIT/ABORT markers, every codec, plus
small real broker segments), ``index``, ``timeindex``, ``txnindex``, ``snapshot``, checkpoint
texts (``offset_checkpoint``, ``epoch_checkpoint``, ``partition_metadata``, ``properties``),
``compressed`` (codec, payload) pairs, ``internal`` (decoder, key, value) triples and
``logdir`` (a small log dir written by ``write_log`` with a transaction and a snapshot).
"""

from __future__ import annotations

import shutil
import struct
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

import kafkalog_spark as kl
from kafkalog_spark.codec.compression import codecs as compression
from kafkalog_spark.codec.records.encode import encode_end_txn_marker, encode_record_batches
from kafkalog_spark.codec.files.index_rebuild import build_txn_index

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
LOG_FILE_LIMIT = 64 * 1024  # real segments larger than this are left out (speed per case)
# real partition dirs whose small files seed the corpus (see ../shared/fixtures/real/README.md)
REAL_DIRS = (
    "DonaldY__kafka-2.7.1/kafka-logs",
    "ItumelengMogase__Real-Time-Data-Pipeline-for-Patient-Admissions/kafka-data",
    "anchor123__kafka/tmp/kafka-logs",
    "yuanliubei__kafka-source-code/kafka-logs",
    "tuyen-nnt__kafka_2.13-3.0.0/data/kafka",
)


@dataclass
class Corpus:
    """Inputs by kind. A few are valid but over a bound on purpose (decompression bombs):
    ``bounded`` holds them, the harness's warm-up expects them to raise a typed error."""

    items: dict[str, list] = field(default_factory=dict)
    bounded: list = field(default_factory=list)

    def add(self, kind: str, item, *, over_bound: bool = False) -> None:
        self.items.setdefault(kind, []).append(item)
        if over_bound:
            self.bounded.append(item)

    def is_over_bound(self, item) -> bool:
        return any(item is b for b in self.bounded)


def records(n: int, seed: int = 0) -> pa.Table:
    keys = [None if i % 7 == 0 else b"k%d" % (i % 13) for i in range(n)]
    values = [None if i % 11 == 0 else bytes((seed + i + j) % 256 for j in range(i % 90))
              for i in range(n)]
    headers = [[{"key": "h", "value": b"x" * (i % 4)}] if i % 3 == 0 else [] for i in range(n)]
    return pa.table({"key": pa.array(keys, pa.binary()), "value": pa.array(values, pa.binary()),
                     "timestamp": pa.array([1_700_000_000_000 + 7 * i for i in range(n)],
                                           pa.timestamp("ms")),
                     "headers": pa.array(headers, pa.list_(pa.struct([("key", pa.string()),
                                                                      ("value", pa.binary())])))})


def legacy_log(magic: int, codec: str, n: int = 12) -> bytes:
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

    out = b""
    for start in range(0, n, 4):  # a few wrappers / messages
        b = LegacyRecordBatchBuilder(magic=magic, compression_type=CODEC_IDS[codec],
                                     batch_size=1 << 20)
        for i in range(start, start + 4):
            # v1 wrappers hold relative inner offsets, v0 wrappers absolute ones
            b.append(i - start if codec != "none" and magic == 1 else i, timestamp=1_700_000_000_000 + i,
                     key=None if i % 3 == 0 else b"key%d" % i, value=b"value-%d" % i * (i % 5))
        raw = bytearray(b.build())
        if codec != "none":  # the wrapper carries the last inner offset, absolute
            struct.pack_into(">q", raw, 0, start + 3)
        out += bytes(raw)
    return out


def txn_log() -> bytes:
    """Two transactional producers (one commits, one aborts) with markers, then plain data."""
    t = records(6)
    a = encode_record_batches(t, base_offset=0, producer_id=7, producer_epoch=1, base_sequence=0,
                              is_transactional=True).tobytes()
    b = encode_record_batches(t, base_offset=6, producer_id=9, producer_epoch=0, base_sequence=0,
                              is_transactional=True, codec="gzip").tobytes()
    commit = encode_end_txn_marker(offset=12, producer_id=7, producer_epoch=1, coordinator_epoch=3,
                                   commit=True, timestamp=1_700_000_001_000)
    abort = encode_end_txn_marker(offset=13, producer_id=9, producer_epoch=0, coordinator_epoch=3,
                                  commit=False, timestamp=1_700_000_001_001)
    idem = encode_record_batches(t, base_offset=14, producer_id=11, producer_epoch=0,
                                 base_sequence=0).tobytes()
    return a + b + commit + abort + idem


def build(fixtures: Path | None, work: Path) -> Corpus:
    """Build the corpus; ``work`` is a scratch dir (the ``logdir`` template is written there)."""
    c = Corpus()
    for codec in CODECS:
        c.add("log", (0, encode_record_batches(records(40), codec=codec, max_batch_records=9)
                      .tobytes()))
    for magic in (0, 1):
        for codec in ("none", "gzip", "snappy", "lz4"):
            c.add("log", (0, legacy_log(magic, codec)))
    txn = txn_log()
    c.add("log", (0, txn))
    c.add("txnindex", (0, build_txn_index(txn, 0).to_bytes()))
    c.add("txnindex", (100, struct.pack(">hqqqq", 0, 5, 100, 140, 120) * 3))
    for codec in CODECS[1:]:
        for size in (0, 100, 5000):
            payload = bytes((i * 31) % 251 for i in range(size))
            c.add("compressed", (CODEC_IDS[codec], 2, compression.compress(CODEC_IDS[codec], payload)))
        if codec != "zstd":
            c.add("compressed", (CODEC_IDS[codec], 1, compression.compress(CODEC_IDS[codec], b"ab" * 300,
                                                                            magic=1)))
    # decompression bombs: bigger than every bound the targets use (16 MiB / 1 MiB)
    bomb = bytes(20 << 20)
    for codec in CODECS[1:]:
        c.add("compressed", (CODEC_IDS[codec], 2, compression.compress(CODEC_IDS[codec], bomb)),
              over_bound=True)
    for codec in ("gzip", "zstd"):
        c.add("log", (0, encode_record_batches(pa.table({"value": [bomb, b"x"]}), codec=codec)
                      .tobytes()), over_bound=True)
    _internal_seeds(c)
    _logdir_template(c, work / "template")
    if fixtures is not None:
        _real_seeds(c, fixtures)
        _real_log_dir(c, fixtures, work / "real")
    return c


def _internal_seeds(c: Corpus) -> None:
    # group metadata v3 key/value and offset commit v1/v3 key/values, as a broker writes them
    gkey = struct.pack(">hh", 2, 5) + b"group"
    okey = struct.pack(">hh", 1, 5) + b"group" + struct.pack(">h", 5) + b"topic" + struct.pack(">i", 3)
    ovalue = struct.pack(">hq", 3, 42) + struct.pack(">i", 4) + struct.pack(">h", 2) + b"md" + \
        struct.pack(">q", 1_700_000_000_000)
    ovalue1 = struct.pack(">hq", 1, 42) + struct.pack(">h", 0) + struct.pack(">qq", 1, 2)
    c.add("internal", ("consumer_offsets", okey, ovalue))
    c.add("internal", ("consumer_offsets", okey, ovalue1))
    c.add("internal", ("consumer_offsets", gkey, None))
    c.add("internal", ("end_txn_marker", b"", struct.pack(">hi", 0, 5)))
    c.add("internal", ("control", struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 5)))
    c.add("internal", ("transaction_log", struct.pack(">hh", 0, 3) + b"tid", None))


def _logdir_template(c: Corpus, root: Path) -> None:
    """A log dir: two segments with indexes, a transaction, snapshots, checkpoints."""
    kl.write_log(records(120), root, topic="fz", codec="none", segment_bytes=3000,
                 max_batch_records=10, index_interval_bytes=512)
    kl.write_log(records(40, seed=5), root, topic="fz", codec="gzip", max_batch_records=10,
                 index_interval_bytes=512)
    c.add("logdir", root)
    part = root / "fz-0"
    for p in sorted(part.iterdir()):
        _add_file(c, p)
    for p in sorted(root.iterdir()):
        if p.is_file():
            _add_file(c, p)


def _add_file(c: Corpus, p: Path) -> None:
    data = p.read_bytes()
    stem = p.name.split(".")[0]
    base = int(stem) if stem.isdigit() else 0
    kind = {".log": "log", ".index": "index", ".timeindex": "timeindex", ".txnindex": "txnindex",
            ".snapshot": "snapshot"}.get(p.suffix)
    if kind == "log" and len(data) > LOG_FILE_LIMIT:
        return
    if kind is not None:
        c.add(kind, (base, data))
    elif p.name.endswith("offset-checkpoint"):
        c.add("offset_checkpoint", data)
    elif p.name == "leader-epoch-checkpoint":
        c.add("epoch_checkpoint", data)
    elif p.name == "partition.metadata":
        c.add("partition_metadata", data)
    elif p.name.endswith(".properties"):
        c.add("properties", data)


# a KRaft broker's log dir cut to four partitions (a transaction, a producer snapshot with
# state, compacted-topic data) for verify/recover; it verifies clean as it is
REAL_LOG_DIR = ("ItumelengMogase__Real-Time-Data-Pipeline-for-Patient-Admissions/kafka-data",
                ("__transaction_state-44", "_schemas-0", "__consumer_offsets-29",
                 "_confluent-ksql-default__command_topic-0"))


def _real_log_dir(c: Corpus, fixtures: Path, root: Path) -> None:
    src = fixtures / REAL_LOG_DIR[0]
    if not src.is_dir():
        return
    root.mkdir(parents=True)
    for p in src.iterdir():
        if p.is_file():
            shutil.copy(p, root / p.name)
    for name in REAL_LOG_DIR[1]:
        shutil.copytree(src / name, root / name)
    c.add("logdir", root)


def _real_seeds(c: Corpus, fixtures: Path) -> None:
    for rel in REAL_DIRS:
        root = fixtures / rel
        if not root.is_dir():
            continue
        for p in sorted(root.iterdir()):
            if p.is_file():
                _add_file(c, p)
        parts = [p for p in sorted(root.iterdir()) if p.is_dir()]
        # every partition with a non-empty log (capped), so __consumer_offsets and
        # __transaction_state values reach the internal-topic decoders too
        taken = 0
        for part in parts:
            files = sorted(f for f in part.iterdir() if f.is_file() and f.stat().st_size > 0)
            if taken >= 8 or not any(f.suffix == ".log" for f in files):
                continue
            taken += 1
            for f in files:
                _add_file(c, f)
            if part.name.startswith(("__consumer_offsets", "__transaction_state",
                                     "__cluster_metadata")):
                _internal_from_log(c, part)


def _internal_from_log(c: Corpus, part: Path) -> None:
    kind = {"__consumer_offsets": "consumer_offsets", "__transaction_state": "transaction_log",
            "__cluster_metadata": "metadata"}[part.name.rsplit("-", 1)[0]]
    for log in sorted(part.glob("*.log")):
        if log.stat().st_size > LOG_FILE_LIMIT:
            continue
        table = kl.read_log(log)
        for row in table.select(["key", "value"]).to_pylist()[:6]:
            if row["key"] is not None:
                c.add("internal", (kind, row["key"], row["value"]))
