"""Kafka itself as the oracle, part 2 (issue 30): log dirs *we* wrote — ``write_log``,
``df.write.format("kafkalog")``, ``compact --execute``, ``retain --execute``, ``recover
--execute`` after damage, ``restore`` and ``erase`` — laid into a real broker's log dir (the
topic created first so KRaft knows its id, the broker stopped cleanly, our partition files put in
its partition dirs with its ``partition.metadata`` kept, our checkpoint entries merged into its
checkpoints) and served by it after a restart: a Kafka consumer fetches exactly our records at
both isolation levels, ListOffsets gives our log start and end offsets and finds the same offset
for a timestamp as our records do, the broker loads them without recovery (its clean-shutdown
marker is there; its log shows no truncation, invalid messages or index rebuild), and its clean
stop leaves our segments and indexes byte for byte as we wrote them.

One restart of the session's broker serves every source. The scenario of ``scenario.py``
provides real transactional data for ``restore`` and ``erase``. The ``kafkalog`` commands run
in this process (``kafkalog_spark.cli.main``, what the ``kafkalog`` script runs): a process per
command would import and compile the package a dozen times.
"""

from __future__ import annotations

import random
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pytest

import kafkalog_spark as kl

from .broker import CLEAN_SHUTDOWN
from .clients import Consumed, consume_all, log_offsets, offsets_for_times
from .compare import differences, records_of, topic_records
from .logdirs import batches, files, lay_in, log_offsets_of, partition_dir
from .ours import kafkalog_here, offsets, read_ours, records_table, renamed_copy

pytestmark = [pytest.mark.broker, pytest.mark.slow, pytest.mark.spark]

ERASED_KEYS = [f"key-{i}" for i in range(0, 50, 3)]  # scenario.make_sends' key-N keys


@dataclass
class Source:
    """One of our log dirs: its topic, partition count, and what a read_committed consumer
    must see when it is not simply our records (``None``)."""

    topic: str
    partitions: int
    log_dir: Path
    committed: dict[tuple[str, int], list[Consumed]] | None = None
    before: dict[tuple[str, int], dict[str, bytes]] = field(default_factory=dict)


def _write_log(root: Path, rng: random.Random, now: int) -> Source:
    """Every codec, several segments and batch sizes, then explicit offsets with gaps (a
    batch whose offsets skip, and a new segment at the first of them)."""
    d = root / "write"
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        kl.write_log(records_table(rng, 400, 3, first_ms=now - 3_600_000), d, topic="ours-write",
                     codec=codec, segment_bytes=16384, max_batch_records=rng.choice([1, 37, 200]))
    gaps = records_table(rng, 5, 1, first_ms=now - 60_000)
    gaps = gaps.append_column("offset", pa.array([2100, 2101, 2150, 2151, 2300], pa.int64()))
    kl.write_log(gaps, d, topic="ours-write", codec="lz4")
    return Source("ours-write", 3, d)


def _spark_write(root: Path, rng: random.Random, now: int, spark) -> Source:
    d = root / "spark"
    table = records_table(rng, 900, 2, first_ms=now - 600_000)
    df = spark.createDataFrame(table)
    (df.write.format("kafkalog").mode("append").option("topic", "ours-spark")
     .option("compression", "zstd").option("segment.bytes", "16384")
     .option("batch.records", "50").save(str(d)))
    return Source("ours-spark", 2, d)


def _compact(root: Path, rng: random.Random, now: int) -> Source:
    """Overwritten keys and tombstones in several segments, compacted by us."""
    d = root / "compact"
    keys = [f"key{i}".encode() for i in range(30)]
    for codec in ("zstd", "gzip", "none"):
        kl.write_log(records_table(rng, 600, 2, first_ms=now - 1_800_000, keys=keys), d,
                     topic="ours-compact", codec=codec, segment_bytes=16384, max_batch_records=20)
    kafkalog_here("compact", "--execute", "--config", "cleanup.policy=compact", "--config",
             "delete.retention.ms=86400000", "--force", d)
    return Source("ours-compact", 2, d)


def _retain(root: Path, rng: random.Random, now: int) -> Source:
    """Three-day-old segments deleted by retention.ms = one day: the log start moves."""
    d = root / "retain"
    kl.write_log(records_table(rng, 300, 2, first_ms=now - 3 * 86_400_000), d,
                 topic="ours-retain", codec="snappy", segment_bytes=16384, max_batch_records=25)
    kl.write_log(records_table(rng, 300, 2, first_ms=now - 3_600_000), d, topic="ours-retain",
                 codec="snappy", segment_bytes=16384, max_batch_records=25)
    kafkalog_here("retain", "--execute", "--config", "retention.ms=86400000", d)
    return Source("ours-retain", 2, d)


def _recover(root: Path, rng: random.Random, now: int) -> Source:
    """A torn last batch in one partition, garbage after the last batch in the other,
    recovered by us (cut, indexes and snapshot rebuilt)."""
    d = root / "recover"
    kl.write_log(records_table(rng, 500, 2, first_ms=now - 3_600_000), d, topic="ours-recover",
                 codec="gzip", segment_bytes=16384, max_batch_records=30)
    torn = sorted((d / "ours-recover-0").glob("*.log"))[-1]
    torn.write_bytes(torn.read_bytes()[:-57])
    tail = sorted((d / "ours-recover-1").glob("*.log"))[-1]
    tail.write_bytes(tail.read_bytes() + rng.randbytes(300))
    kafkalog_here("recover", "--execute", "--quarantine", root / "quarantine", d)
    return Source("ours-recover", 2, d)


def _restore(root: Path, scenario, topic: str, new_topic: str) -> Source:
    """A broker-written topic (transactions committed and aborted, markers, idempotent
    producers; a topic its cleaner compacted; one whose log start DeleteRecords moved into a
    segment) migrated with its markers and restored."""
    src = renamed_copy(scenario.log_dir, topic, new_topic, root / f"{new_topic}-src")
    kafkalog_here("migrate", "--control", src, root / f"{new_topic}-tables")
    d = root / new_topic
    kafkalog_here("restore", root / f"{new_topic}-tables" / new_topic, d)
    committed = {(new_topic, p): recs for (t, p), recs
                 in scenario.consumed["read_committed"].items() if t == topic}
    return Source(new_topic, len(committed), d, committed)


def _erase(root: Path, scenario) -> Source:
    """Keys erased from a broker-written transactional topic."""
    d = renamed_copy(scenario.log_dir, "java-txn", "ours-erase-txn", root / "erase")
    keys = root / "erase-keys.txt"
    keys.write_text("".join(k + "\n" for k in ERASED_KEYS))
    kafkalog_here("erase", "--topic", "ours-erase-txn", "--keys", keys, "--execute", d)
    erased = {k.encode() for k in ERASED_KEYS}
    committed = {("ours-erase-txn", p): [r for r in recs if r.key not in erased]
                 for (t, p), recs in scenario.consumed["read_committed"].items() if t == "java-txn"}
    return Source("ours-erase-txn", len(committed), d, committed)


@pytest.fixture(scope="module")
def sources(tmp_path_factory, oracle_run, spark) -> dict[str, Source]:
    root = tmp_path_factory.mktemp("ours")
    rng = random.Random(302)
    now = int(time.time() * 1000)
    made = [_write_log(root, rng, now), _spark_write(root, rng, now, spark),
            _compact(root, rng, now), _retain(root, rng, now), _recover(root, rng, now),
            _restore(root, oracle_run, "java-txn", "ours-restore-txn"),
            _restore(root, oracle_run, "compacted", "ours-restore-compacted"),
            _restore(root, oracle_run, "deleted-records", "ours-restore-deleted"),
            _erase(root, oracle_run)]
    return {s.topic: s for s in made}


@dataclass
class Served:
    """What the broker served after loading our partitions."""

    consumed: dict[str, dict[tuple[str, int], list[Consumed]]]
    offsets: dict[tuple[str, int], tuple[int, int]]
    by_time: dict[tuple[tuple[str, int], int], int | None]
    time_targets: dict[tuple[str, int], list[int]]
    load_log: str
    marker_before_start: bool
    after_stop: dict[tuple[str, int], dict[str, bytes]]


def _with_markers(s: Source) -> dict[tuple[str, int], list[Consumed]]:
    """Our records and transaction markers: ListOffsets by timestamp counts a marker's
    timestamp too (it is in its batch's max timestamp and the time index)."""
    return records_of(kl.read_log(s.log_dir, topics=[s.topic], include_headers=True,
                                  include_control=True))


def _time_targets(sources: dict[str, Source]) -> dict[tuple[str, int], list[int]]:
    """Per partition: timestamps to look up — each of a few records' own, one below all and
    one above all."""
    out = {}
    for s in sources.values():
        for tp, recs in _with_markers(s).items():
            stamps = sorted({r.timestamp_ms for r in recs})
            picks = stamps[:: max(1, len(stamps) // 6)]
            out[tp] = [stamps[0] - 1, *picks, stamps[-1] + 1]
    return out


@pytest.fixture(scope="module")
def served(kafka_broker, sources) -> Served:
    broker = kafka_broker
    broker.start()
    for s in sources.values():
        # retention off: the broker must not delete our old segments while it serves them
        broker.create_topic(s.topic, s.partitions, {"retention.ms": "-1"})
    broker.stop()
    for s in sources.values():
        tps = [(s.topic, p) for p in range(s.partitions)]
        lay_in(broker.log_dir, s.log_dir, tps)
        s.before = {tp: files(partition_dir(broker.log_dir, tp)) for tp in tps}
    marker = (broker.log_dir / CLEAN_SHUTDOWN).exists()
    mark = len(broker.log_text())
    broker.start()
    topics = list(sources)
    targets = _time_targets(sources)
    consumed = {iso: consume_all(broker.bootstrap, topics, iso)
                for iso in ("read_uncommitted", "read_committed")}
    got_offsets = log_offsets(broker.bootstrap, topics)
    by_time = offsets_for_times(broker.bootstrap, targets)
    broker.stop()
    after = {tp: files(partition_dir(broker.log_dir, tp)) for s in sources.values()
             for tp in s.before}
    return Served(consumed, got_offsets, by_time, targets, broker.log_text()[mark:], marker,
                  after)


TOPICS = ["ours-write", "ours-spark", "ours-compact", "ours-retain", "ours-recover",
          "ours-restore-txn", "ours-restore-compacted", "ours-restore-deleted", "ours-erase-txn"]


@pytest.mark.parametrize("topic", TOPICS)
def test_consumer_fetches_our_records(sources, served, topic):
    s = sources[topic]
    ours = records_of(read_ours(s.log_dir, topic))
    assert sum(map(len, ours.values())) > 0
    assert differences(ours, topic_records(served.consumed["read_uncommitted"], topic)) == []
    committed = s.committed if s.committed is not None else ours
    assert differences(committed, topic_records(served.consumed["read_committed"], topic)) == []


def test_restored_and_erased_topics_keep_the_brokers_records(sources, oracle_run):
    """restore gives back what the broker's consumer read from the original topic; erase
    leaves it without the erased keys — at read_uncommitted, as read_log reads it."""
    erased = {k.encode() for k in ERASED_KEYS}
    for new, old, drop in (("ours-restore-txn", "java-txn", set()),
                           ("ours-restore-compacted", "compacted", set()),
                           ("ours-restore-deleted", "deleted-records", set()),
                           ("ours-erase-txn", "java-txn", erased)):
        original = {(new, p): [r for r in recs if r.key not in drop] for (t, p), recs
                    in oracle_run.consumed["read_uncommitted"].items() if t == old}
        assert differences(original, records_of(read_ours(sources[new].log_dir, new))) == [], new
    assert any(r.key in erased for (t, _), recs in oracle_run.consumed["read_uncommitted"].items()
               if t == "java-txn" for r in recs), "the erase test erased nothing"


@pytest.mark.parametrize("topic", TOPICS)
def test_broker_log_start_and_end_offsets_are_ours(sources, served, topic):
    """ListOffsets answers the log start and end offsets Kafka's loader takes from our files
    (and kafkalog info says the same end offsets)."""
    s = sources[topic]
    ours = {(topic, p): log_offsets_of(s.log_dir, (topic, p)) for p in range(s.partitions)}
    assert {tp: o for tp, o in served.offsets.items() if tp[0] == topic} == ours
    assert {tp: o[1] for tp, o in offsets(s.log_dir).items()} == {tp: o[1] for tp, o in ours.items()}


@pytest.mark.parametrize("topic", TOPICS)
def test_offsets_for_times_through_our_time_indexes(sources, served, topic):
    """ListOffsets by timestamp walks our .timeindex and .index: it finds the first record
    at or after each timestamp, as our records say."""
    ours = _with_markers(sources[topic])
    wrong = []
    for tp, targets in served.time_targets.items():
        if tp[0] != topic:
            continue
        for ts in targets:
            expected = next((r.offset for r in ours[tp] if r.timestamp_ms >= ts), None)
            if served.by_time[(tp, ts)] != expected:
                wrong.append(f"{tp} {ts}: broker {served.by_time[(tp, ts)]}, ours {expected}")
    assert wrong == []


def _loader_lines(load_log: str, topic: str) -> list[str]:
    return [line for line in load_log.splitlines()
            if re.search(rf"partition={re.escape(topic)}-\d+,", line)]


@pytest.mark.parametrize("topic", TOPICS)
def test_broker_loads_our_partitions_without_recovery(sources, served, topic):
    """The clean-shutdown marker was there, and nothing in the broker's log says it
    recovered, truncated, rebuilt an index or found invalid data in our partitions; it
    loaded the producer state up to our log end offset."""
    assert served.marker_before_start
    lines = [line for line in _loader_lines(served.load_log, topic)
             if "Reloading from producer snapshot and rebuilding producer state" not in line]
    suspicious = [line for line in lines if re.search(
        r"Recovering|recovering|Found|Corruption|truncat|Truncat|rebuild|Deleting|corrupt|"
        r"invalid|orphaned|WARN|ERROR", line)]
    assert suspicious == []
    s = sources[topic]
    ends = {(topic, p): log_offsets_of(s.log_dir, (topic, p))[1] for p in range(s.partitions)}
    for (t, p), end in ends.items():
        assert any(f"partition={t}-{p}," in line and f"Loading producer state till offset {end}"
                   in line for line in lines), (t, p, end, lines)
        # the producer state comes from a snapshot at the log end (what a broker's clean stop
        # leaves), not from reading the segments; without any snapshot the broker takes the
        # state to be empty, which is right only for a log without producer ids
        pdir = partition_dir(sources[topic].log_dir, (t, p))
        if not (pdir / f"{end:020d}.snapshot").exists():
            ids = {b.header["producer_id"] for f in sorted(pdir.glob("*.log")) for b in batches(f)}
            assert ids <= {-1}, f"{t}-{p}: producers {sorted(ids)[:5]} but no snapshot at {end}"
    others = [line for line in served.load_log.splitlines()
              if topic in line and (" WARN " in line or " ERROR " in line)]
    assert others == []


@pytest.mark.parametrize("topic", TOPICS)
def test_broker_leaves_our_segments_and_indexes_as_written(sources, served, topic):
    """A clean load and a clean stop change none of our .log, .index, .timeindex and
    .txnindex bytes (the broker rewrote nothing; its leader epochs and producer snapshots are
    its own to add)."""
    changed = []
    for tp, before in sources[topic].before.items():
        after = served.after_stop[tp]
        for name in sorted(set(before) | set(after)):
            if not name.endswith((".log", ".index", ".timeindex", ".txnindex")):
                continue
            if before.get(name) != after.get(name):
                changed.append(f"{tp[0]}-{tp[1]}/{name}: {len(before.get(name) or b'')} bytes "
                               f"-> {len(after.get(name) or b'')}")
    assert changed == []
