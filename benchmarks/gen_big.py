"""Big log dir generator (benchmarks): thousands of partitions, tens of thousands of segments.

Builds Kafka log dirs fast by encoding a few *template* partitions once and stamping their
segments into every generated partition:

1. per codec (none, gzip, snappy, lz4, zstd) one template partition is written with
   :func:`kafkalog_spark.write_log` (``--segment-kib`` segments, producer-sized batches, keys
   from a small key space so compacted topics have something to clean);
2. each generated partition takes segments ``0..n-1`` of its codec's template (``n`` drawn
   around ``--segments``); some partitions switch codec part-way (as after a change of
   ``compression.type``), some start with a **legacy segment** (v0 none/gzip/snappy, v1
   none/gzip, v1 followed by v2 in one segment) copied from the real broker data
   (``$KAFKALOG_REAL_FIXTURES``, else ``../shared/fixtures/real``). Every segment after the
   first is re-based to the running log end offset by rewriting the 8-byte baseOffset of each
   v2 batch (outside the batch CRC; ``.index``/``.timeindex`` entries are relative to the
   segment base, so they are copied as they are);
3. per partition ``leader-epoch-checkpoint``, ``partition.metadata`` and an empty producer
   snapshot at the log end; per log dir ``meta.properties`` and the recovery-point /
   replication / log-start checkpoints; next to the log dirs ``topic-configs.json`` (every
   fourth topic is ``cleanup.policy=compact``), for ``kafkalog compact --config-file``.

The output is a pure function of the arguments (seed included): no clock, no random topic ids.
Legacy segments are left out (with a note in the result) when the fixture folder is missing.

    .venv/bin/python benchmarks/gen_big.py /tmp/big --partitions 4000 --segments 10
    .venv/bin/python benchmarks/gen_big.py /tmp/big --partitions 100 --segments 10 --seed 3 --json

Library use: ``generate(root, partitions=..., segments=...)`` returns a :class:`Generated`.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

import kafkalog_spark as kl
from kafkalog_spark.codec.files import checkpoints as C
from kafkalog_spark.codec.files import properties as M
from kafkalog_spark.codec.files.index_rebuild import build_indexes
from kafkalog_spark.codec.records.scan import scan_entries
from kafkalog_spark.codec.files.snapshot import ProducerStateTracker
from kafkalog_spark.codec.files import naming as N

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from real_fixtures import real_fixtures_dir  # noqa: E402

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
CODEC_WEIGHTS = (0.3, 0.15, 0.15, 0.2, 0.2)
FIXTURES = real_fixtures_dir()
# real broker message sets usable as a partition's first segment (base offset 0): name -> path
LEGACY_SEGMENTS = {
    "v0-none": "kafka-rust__kafka-rust/derived_message_sets/"
               "fetch1.mytopic.1p.nocompression.kafka.0821.my-topic-0.log",
    "v0-gzip": "kafka-rust__kafka-rust/derived_message_sets/fetch1.mytopic.1p.gzip.kafka.0821.my-topic-0.log",
    "v0-snappy": "kafka-rust__kafka-rust/derived_message_sets/"
                 "fetch1.mytopic.1p.snappy.kafka.0822.my-topic-0.log",
    "v1-none+gzip": "segmentio__kafka-go/derived_message_sets/v1c-v1-v1c.test-breezy-0.log",
    "v1+v2": "tulios__kafkajs/derived_message_sets/"
             "v4_response_mixed_formats.test-mixed-message-formats-0.log",
}
LEGACY_SHARE = 0.1  # partitions starting with a legacy segment
SWITCH_SHARE = 0.15  # partitions whose codec changes part-way
COMPACT_EVERY = 4  # every 4th topic is compacted
KEY_SPACE = 500  # distinct keys per template (compaction keeps about this many per partition)
TIMESTAMP_0 = 1_700_000_000_000  # ms of the first template record
CLUSTER_ID = "kafkalog-bench-0000000"


@dataclass(frozen=True)
class TemplateSegment:
    """One template segment's files (offsets as written, from 0)."""

    base_offset: int
    next_offset: int
    log: bytes
    index: bytes
    timeindex: bytes
    positions: np.ndarray  # batch positions (v2 only), for re-basing


@dataclass
class Generated:
    """What :func:`generate` wrote."""

    root: str
    log_dirs: list[str]
    config_file: str
    seed: int
    partitions: int = 0
    segments: int = 0
    bytes: int = 0  # .log bytes
    records: int = 0  # v2 records plus legacy messages (a compressed legacy wrapper's count)
    codecs: dict[str, int] = field(default_factory=dict)  # segments per main codec
    legacy: dict[str, int] = field(default_factory=dict)  # partitions per legacy segment kind
    switched: int = 0  # partitions with two codecs
    compacted_topics: list[str] = field(default_factory=list)
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)


def make_records(n: int, seed: int, value_size: int = 160) -> pa.Table:
    """``n`` records: keys ``key-<i mod KEY_SPACE>``, text-like values (compressible about 2x),
    timestamps one second apart from :data:`TIMESTAMP_0`."""
    rng = np.random.default_rng(seed)
    alphabet = np.frombuffer(b'abcdefghijklmnopqrstuvwxyz0123456789 {}":,', np.uint8)
    values = alphabet[rng.integers(0, len(alphabet), size=n * value_size)]
    keys = b"".join(b"key-%08d" % (i % KEY_SPACE) for i in range(n))
    koff = np.arange(0, (n + 1) * 12, 12, dtype=np.int32)
    voff = np.arange(0, (n + 1) * value_size, value_size, dtype=np.int32)
    binary = pa.binary()
    return pa.table({
        "key": pa.Array.from_buffers(binary, n, [None, pa.py_buffer(koff), pa.py_buffer(keys)]),
        "value": pa.Array.from_buffers(binary, n, [None, pa.py_buffer(voff),
                                                   pa.py_buffer(values.tobytes())]),
        "timestamp": pa.array(TIMESTAMP_0 + 1000 * np.arange(n, dtype=np.int64),
                              pa.timestamp("ms", tz="UTC")),
    })


def build_template(codec: str, segments: int, segment_bytes: int, work: Path,
                   seed: int) -> list[TemplateSegment]:
    """At least ``segments`` segments of ``codec`` data, written by ``write_log`` into ``work``."""
    from kafkalog_spark.codec.records.encode import encode_record_batches

    sample = make_records(2000, seed)
    per_record = len(encode_record_batches(sample, codec=codec, max_batch_records=50).tobytes()) / 2000
    n = int((segments + 1) * segment_bytes / per_record * 1.1) + 100
    while True:
        out = work / f"tmpl-{codec}-{n}"
        kl.write_log(make_records(n, seed), out, topic="t", partition=0, codec=codec,
                     segment_bytes=segment_bytes, max_batch_records=50, mode="overwrite")
        pdir = out / "t-0"
        logs = sorted(pdir.glob("*.log"))
        if len(logs) > segments:
            break
        n *= 2
    segs = []
    for i, log in enumerate(logs[:segments]):
        base = N.offset_from_file_name(log.name)
        data = log.read_bytes()
        table = scan_entries(np.frombuffer(data, np.uint8))
        segs.append(TemplateSegment(
            base, int(table.last_offset[-1]) + 1, data,
            (pdir / N.segment_file_name(base, N.INDEX)).read_bytes(),
            (pdir / N.segment_file_name(base, N.TIME_INDEX)).read_bytes(),
            table.position.astype(np.int64)))
    return segs


def legacy_segment(path: Path) -> TemplateSegment:
    """A real broker message set as a segment at base offset 0, with recovery-built indexes."""
    data = path.read_bytes()
    buf = np.frombuffer(data, np.uint8)
    rebuilt = build_indexes(buf, 0)
    table = scan_entries(buf)
    return TemplateSegment(0, int(table.last_offset[-1]) + 1, data, rebuilt.offset_index.to_bytes(),
                           rebuilt.time_index.to_bytes(), np.zeros(0, np.int64))


def rebased(seg: TemplateSegment, base: int) -> bytes:
    """``seg``'s ``.log`` bytes with every v2 batch moved so the segment starts at ``base``."""
    shift = base - seg.base_offset
    if shift == 0:
        return seg.log
    buf = np.frombuffer(seg.log, np.uint8).copy()
    offsets = buf[(seg.positions[:, None] + np.arange(8)).ravel()].view(">i8")
    new = (offsets + shift).astype(">i8").view(np.uint8)
    buf[(seg.positions[:, None] + np.arange(8)).ravel()] = new
    return buf.tobytes()


def _topic_id(seed: int, topic: str) -> str:
    digest = hashlib.sha256(f"{seed}:{topic}".encode()).digest()[:16]
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _write(path: Path, data: bytes | str) -> None:
    with open(path, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)


def generate(root: str | Path, *, partitions: int, segments: int = 10, topics: int | None = None,
             segment_kib: int = 64, log_dirs: int = 1, seed: int = 0,
             fixtures: Path | None = FIXTURES, legacy_share: float = LEGACY_SHARE,
             switch_share: float = SWITCH_SHARE) -> Generated:
    """Write ``partitions`` partitions of about ``segments`` segments each under ``root``.

    Parameters
    ----------
    root : path
        Created (must not exist or be empty); receives ``kafka-logs-<i>`` log dirs and
        ``topic-configs.json``.
    partitions : int
        Partitions in total, spread round-robin over the log dirs.
    segments : int
        Mean segments per partition (each partition draws from ``[segments/2, 3*segments/2]``).
    topics : int, optional
        Number of topics (default ``max(1, partitions // 50)``); partition ``i`` of the run
        belongs to topic ``i mod topics``.
    segment_kib : int
        ``segment.bytes`` of the templates in KiB (segments are at most this big).
    log_dirs : int
        JBOD log dirs.
    seed : int
        Drives every choice (codec, segment counts, legacy prefixes, codec switches).
    fixtures : Path, optional
        The real fixture folder holding the legacy segments (None: no legacy segments).
    legacy_share, switch_share : float
        Share of partitions starting with a legacy segment / switching codec part-way.

    Returns
    -------
    Generated
    """
    t0 = time.perf_counter()
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    if any(root.iterdir()):
        raise FileExistsError(f"{root} is not empty")
    topics = topics or max(1, partitions // 50)
    rng = np.random.default_rng(seed)
    lo, hi = max(1, segments // 2), max(1, segments + segments // 2)
    counts = rng.integers(lo, hi + 1, size=partitions)
    codec_of = rng.choice(len(CODECS), size=partitions, p=CODEC_WEIGHTS)
    second = rng.choice(len(CODECS), size=partitions, p=CODEC_WEIGHTS)
    switch = (rng.random(partitions) < switch_share) & (counts >= 2) & (second != codec_of)
    legacy_ok = fixtures is not None and all((fixtures / p).is_file()
                                             for p in LEGACY_SEGMENTS.values())
    legacy_names = sorted(LEGACY_SEGMENTS)
    legacy_pick = rng.integers(0, len(legacy_names), size=partitions)
    has_legacy = (rng.random(partitions) < legacy_share) & legacy_ok

    dirs = [root / f"kafka-logs-{i}" for i in range(log_dirs)]
    result = Generated(str(root), [str(d) for d in dirs], str(root / "topic-configs.json"), seed)
    if not legacy_ok:
        result.notes.append(f"no legacy segments: fixtures not found under {fixtures}")
    topic_names = [f"bench-{'compact' if t % COMPACT_EVERY == 0 else 'events'}-{t:04d}"
                   for t in range(topics)]
    result.compacted_topics = [t for i, t in enumerate(topic_names) if i % COMPACT_EVERY == 0]
    with tempfile.TemporaryDirectory(prefix="gen-big-", dir=root.parent) as tmp:
        templates = {c: build_template(c, hi, segment_kib << 10, Path(tmp), seed) for c in CODECS}
    legacy = {k: legacy_segment(fixtures / p) for k, p in LEGACY_SEGMENTS.items()} if legacy_ok else {}

    ends: list[dict[tuple[str, int], int]] = [{} for _ in dirs]
    per_topic: dict[int, int] = {}
    empty_snapshot = ProducerStateTracker().snapshot().to_bytes()
    for i in range(partitions):
        t = i % topics
        topic, number = topic_names[t], per_topic.get(t, 0)
        per_topic[t] = number + 1
        d = i % log_dirs
        pdir = dirs[d] / N.partition_dir_name(topic, number)
        pdir.mkdir(parents=True)
        plan: list[tuple[TemplateSegment, str]] = []
        if has_legacy[i]:
            name = legacy_names[legacy_pick[i]]
            plan.append((legacy[name], name))
            result.legacy[name] = result.legacy.get(name, 0) + 1
        n = int(counts[i])
        cut = n // 2 if switch[i] else n
        for j in range(n):
            codec = CODECS[codec_of[i] if j < cut else second[i]]
            plan.append((templates[codec][j], codec))
        result.switched += int(switch[i])
        offset = 0
        for seg, kind in plan:
            base = offset
            _write(pdir / N.segment_file_name(base, N.LOG), rebased(seg, base))
            _write(pdir / N.segment_file_name(base, N.INDEX), seg.index)
            _write(pdir / N.segment_file_name(base, N.TIME_INDEX), seg.timeindex)
            offset = base + seg.next_offset - seg.base_offset
            result.segments += 1
            result.bytes += len(seg.log)
            result.records += seg.next_offset - seg.base_offset
            if kind in CODECS:
                result.codecs[kind] = result.codecs.get(kind, 0) + 1
        _write(pdir / N.segment_file_name(offset, N.SNAPSHOT), empty_snapshot)
        _write(pdir / N.LEADER_EPOCH_CHECKPOINT,
               C.format_leader_epoch_checkpoint([C.EpochEntry(0, 0)]))
        _write(pdir / N.PARTITION_METADATA, M.format_partition_metadata(_topic_id(seed, topic)))
        ends[d][(topic, number)] = offset
        result.partitions += 1
    for d, path in enumerate(dirs):
        path.mkdir(parents=True, exist_ok=True)
        meta = M.MetaProperties(1, CLUSTER_ID, 1, None)
        _write(path / N.META_PROPERTIES, M.format_meta_properties(meta, date="Thu Jan 01 00:00:00 UTC 2026"))
        for name in (N.RECOVERY_POINT_CHECKPOINT, N.REPLICATION_OFFSET_CHECKPOINT):
            _write(path / name, C.format_offset_checkpoint(ends[d]))
        _write(path / N.LOG_START_OFFSET_CHECKPOINT, C.format_offset_checkpoint({}))
    configs = {t: {"cleanup.policy": "compact"} for t in result.compacted_topics}
    _write(root / "topic-configs.json", json.dumps(configs, indent=1, sort_keys=True))
    result.seconds = round(time.perf_counter() - t0, 2)
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root", type=Path, help="output folder (created; must be empty)")
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--segments", type=int, default=10, help="mean segments per partition")
    ap.add_argument("--topics", type=int, default=None)
    ap.add_argument("--segment-kib", type=int, default=64)
    ap.add_argument("--log-dirs", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-legacy", action="store_true", help="no v0/v1 segments")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--force", action="store_true", help="delete ROOT first")
    a = ap.parse_args(argv)
    if a.force and a.root.exists():
        shutil.rmtree(a.root)
    g = generate(a.root, partitions=a.partitions, segments=a.segments, topics=a.topics,
                 segment_kib=a.segment_kib, log_dirs=a.log_dirs, seed=a.seed,
                 fixtures=None if a.no_legacy else FIXTURES)
    if a.json:
        print(json.dumps(asdict(g), indent=1))
    else:
        print(f"{g.partitions} partitions, {g.segments} segments, {g.bytes / 2**30:.2f} GiB of "
              f".log, {g.records} records in {g.seconds:.1f} s under {g.root}; codecs "
              f"{g.codecs}; legacy {g.legacy}; {g.switched} partitions switch codec")
        for note in g.notes:
            print("note:", note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
