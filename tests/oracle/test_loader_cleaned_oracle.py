"""Kafka itself as the oracle, part 4 (issue 30, L3): ``kafkalog recover --execute`` against the
broker's own log loader on compacted transactional logs — which segments the loader recovers,
so which ``.txnindex`` files it rebuilds, and where it leaves producer snapshots.

A compacted topic is written through the broker, a committed and an aborted transaction each
round (time-rolled segments of ~300 KB under ``segment.bytes`` = 1 MiB), copied as the broker
left it (raw), cleaned once by the broker's cleaner (groups of three segments cleaned into one;
each cleaned ``.txnindex`` lists the aborted transactions whose data the cleaner removed, C2 in
docs/kafka-oracle.md) and copied again (cleaned). Each case is a copy in a topic of its own, with
a recovery point and a damage: the broker loads them (the crash cases without the clean-shutdown
marker, then the others with it) and is stopped cleanly; ``recover --execute`` runs on
identical copies. Both must leave the same segments, indexes and producer snapshots byte for
byte, and read_committed readers the same records — a ``.txnindex`` missing below the
recovery point too: both leave it missing, and both then serve that segment's aborted records
as committed (``recover`` names the file; ``rebuild-index`` writes it).
"""

from __future__ import annotations

import random
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from .broker import CLEAN_SHUTDOWN
from .clients import Send, consume_all, log_offsets, produce_python, produce_python_transactions
from .logdirs import (CLEANER, RECOVERY_POINT, copy_partitions, lay_in, log_offsets_of,
                      partition_dir, read_checkpoint, segment_bases, write_checkpoint)
from .ours import kafkalog_here, renamed_copy

pytestmark = [pytest.mark.broker, pytest.mark.slow]

SOURCE = "lc-source"
ROUNDS = 7
ROLL_WAIT_S = 0.6
COMPARED = (".log", ".index", ".timeindex", ".txnindex", ".snapshot")
COMPACTED = {"cleanup.policy": "compact", "segment.ms": "500", "min.compaction.lag.ms": "0",
             "retention.ms": "-1", "file.delete.delay.ms": "0", "segment.bytes": str(1 << 20),
             "delete.retention.ms": "86400000"}
# the cases' topics only hold copies: nothing may roll, clean or delete them
HELD = {"cleanup.policy": "delete", "retention.ms": "-1", "segment.ms": "604800000"}

Damage = Callable[[Path], str | None]  # returns the name of a file it removed, if any


def _at_end(bases: list[int], log_end: int) -> int:
    return log_end


def _removed(segment: int, suffix: str) -> Damage:
    """Remove a file of the ``segment``-th segment (of those with a ``.txnindex`` with entries,
    for a ``.txnindex``)."""
    def damage(pdir: Path) -> str:
        bases = _txn_bases(pdir) if suffix == ".txnindex" else segment_bases(pdir)
        path = pdir / f"{bases[segment]:020d}{suffix}"
        path.unlink()
        return path.name
    return damage


def _txn_bases(pdir: Path) -> list[int]:
    """Bases of the segments (not the active one) that have a ``.txnindex`` with entries."""
    return [b for b in segment_bases(pdir)[:-1]
            if (pdir / f"{b:020d}.txnindex").exists()
            and (pdir / f"{b:020d}.txnindex").stat().st_size]


ENTRY_SIZES = {".index": 8, ".timeindex": 12}


def _indexed_base(pdir: Path, entries: int) -> int:
    """The first segment (not the active one) whose offset and time indexes hold more than
    ``entries`` entries."""
    return next(b for b in segment_bases(pdir)[:-1]
                if all((pdir / f"{b:020d}{s}").stat().st_size > entries * n
                       for s, n in ENTRY_SIZES.items()))


def _shortened(entries: int) -> Damage:
    """Drop the last ``entries`` entries of such a segment's ``.index`` and ``.timeindex``:
    files the load does not read below the recovery point."""
    def damage(pdir: Path) -> None:
        base = _indexed_base(pdir, entries)
        for suffix, size in ENTRY_SIZES.items():
            path = pdir / f"{base:020d}{suffix}"
            data = path.read_bytes()
            path.write_bytes(data[:len(data) - entries * size])
    return damage


def _removed_time_index(pdir: Path) -> str:
    """Remove the ``.timeindex`` of a segment whose indexes have entries."""
    path = pdir / f"{_indexed_base(pdir, 1):020d}.timeindex"
    path.unlink()
    return path.name


def _only_the_last_snapshot(pdir: Path) -> None:
    """Leave only the snapshot at the log end (as write_log leaves a log)."""
    for snap in sorted(pdir.glob("*.snapshot"))[:-1]:
        snap.unlink()


def _ends_below_base(segment: int) -> Damage:
    """The first entry of the ``segment``-th indexed segment's ``.txnindex`` ends below the
    segment's base offset (what ``TransactionIndex.sanityCheck`` rejects)."""
    def damage(pdir: Path) -> None:
        base = _txn_bases(pdir)[segment]
        path = pdir / f"{base:020d}.txnindex"
        data = bytearray(path.read_bytes())
        data[18:26] = (base - 1).to_bytes(8, "big")  # version, producer id, first, LAST offset
        path.write_bytes(bytes(data))
    return damage


@dataclass(frozen=True)
class Case:
    name: str
    source: str  # "raw" or "cleaned"
    point: Callable[[list[int], int], int]  # the recovery point, from the bases and log end
    clean: bool = False  # the clean-shutdown marker stays
    damage: Damage | None = None

    @property
    def topic(self) -> str:
        return f"lc-{self.name}"


CASES = [
    # a crash with nothing unflushed: the broker recovers the active segment only, deleting
    # the snapshot at the log end first: its producer-state rebuild from the log start then
    # takes them at the last two bases (L1)
    Case("at-end", "cleaned", _at_end),
    Case("at-end-one-snapshot", "raw", _at_end, damage=_only_the_last_snapshot),
    # the recovery point in the second cleaned segment: that one and the later ones
    Case("mid-cleaned", "cleaned", lambda bases, end: bases[1] + 1),
    # everything unflushed: every cleaned .txnindex rebuilt from the markers
    Case("all", "cleaned", lambda bases, end: 0),
    # LogSegment.sanityCheck fails: the segment is recovered, below the recovery point
    Case("missing-index", "cleaned", _at_end, damage=_removed(1, ".index")),
    Case("corrupt-txnindex", "cleaned", _at_end, damage=_ends_below_base(1)),
    # not looked at by the load: both leave it missing (the markers abort nothing left)
    Case("missing-txnindex", "cleaned", _at_end, damage=_removed(1, ".txnindex")),
    # the markers abort transactions: both leave it missing, and serve their records
    Case("raw-missing-txnindex", "raw", _at_end, damage=_removed(1, ".txnindex")),
    # LogSegment.sanityCheck creates a missing .timeindex empty; a short index is served
    Case("missing-timeindex", "raw", _at_end, damage=_removed_time_index),
    Case("short-indexes", "raw", _at_end, damage=_shortened(2)),
    Case("clean", "cleaned", _at_end, clean=True),
    Case("clean-missing-index", "cleaned", _at_end, clean=True, damage=_removed(2, ".index")),
]
BY_NAME = {c.name: c for c in CASES}


def _produce(bootstrap: str, rng: random.Random) -> None:
    """Rounds ROLL_WAIT_S apart (a segment each) of ~300 KB of keyed records and two
    transactions (the first committed, the second aborted), then a record rolling the last."""
    keys = [f"key-{i}".encode() for i in range(600)]
    for r in range(ROUNDS):
        sends = [Send(SOURCE, 0, rng.choice(keys), None if rng.random() < 0.1
                      else rng.randbytes(rng.randrange(900, 1100))) for _ in range(300)]
        produce_python(bootstrap, sends, "none", acks="all", batch_size=4096)
        txn = [[Send(SOURCE, 0, rng.choice(keys), rng.randbytes(50)) for _ in range(8)]
               for _ in range(2)]
        produce_python_transactions(bootstrap, [(txn[0], True), (txn[1], False)], "none",
                                    "lc-txn")
        time.sleep(ROLL_WAIT_S)
    # a producer whose last record is three days old (CreateTime): where a load reads a
    # snapshot holding it, it is expired (producer.id.expiration.ms, a day; L6)
    produce_python(bootstrap, [Send(SOURCE, 0, b"idle", b"i",
                                    timestamp_ms=int(time.time() * 1000) - 3 * 86_400_000)],
                   "none")
    produce_python(bootstrap, [Send(SOURCE, 0, b"roll", b"r")], "none")


def _set_ratio(broker, ratio: str) -> None:
    from kafka.admin import ConfigResource, ConfigResourceType

    admin = broker.admin()
    try:
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, SOURCE,
                                            configs={"min.cleanable.dirty.ratio": ratio})])
    finally:
        admin.close()


@dataclass
class Loaded:
    kafka: dict[bool, Path] = field(default_factory=dict)  # clean -> the broker's files after
    ours: dict[bool, Path] = field(default_factory=dict)  # clean -> ours after recover
    removed: dict[str, str] = field(default_factory=dict)  # case -> file its damage removed
    original: dict[str, dict[str, bytes]] = field(default_factory=dict)  # case -> files before
    ends: dict[tuple[str, int], tuple[int, int]] = field(default_factory=dict)
    committed: dict[tuple[str, int], list[int]] = field(default_factory=dict)  # broker's
    load_log: dict[bool, str] = field(default_factory=dict)  # clean -> the broker's log


def _stage(case: Case, root: Path, staged: Path, loaded: Loaded) -> None:
    """The case's copy of the raw or cleaned partition in log dir ``staged``: renamed, with
    its recovery point, damaged."""
    alone = renamed_copy(root / case.source, SOURCE, case.topic, root / "alone" / case.name)
    tp = (case.topic, 0)
    pdir = partition_dir(alone, tp)
    loaded.original[case.name] = {f.name: f.read_bytes() for f in pdir.iterdir()}
    bases = segment_bases(pdir)
    points = read_checkpoint(alone / RECOVERY_POINT)
    points[tp] = case.point(bases, log_offsets_of(alone, tp)[1])
    write_checkpoint(alone / RECOVERY_POINT, points)
    if case.damage is not None:
        name = case.damage(pdir)
        if name is not None:
            loaded.removed[case.name] = name
    copy_partitions(alone, staged, [tp])


def _load(broker, root: Path, clean: bool, loaded: Loaded) -> None:
    """One load by the broker of the cases with or without the clean-shutdown marker, and
    ``recover --execute`` over a copy of what it loaded."""
    cases = [c for c in CASES if c.clean == clean]
    tps = [(c.topic, 0) for c in cases]
    staged, ours = root / f"staged-{clean}", root / f"ours-{clean}" / "logs"
    for case in cases:
        _stage(case, root, staged, loaded)
    shutil.copytree(staged, ours)
    lay_in(broker.log_dir, staged, tps)
    marker = broker.log_dir / CLEAN_SHUTDOWN
    if clean:
        (ours / CLEAN_SHUTDOWN).write_bytes(marker.read_bytes())
    else:
        marker.unlink()
    mark = len(broker.log_text())
    broker.start()
    loaded.ends.update(log_offsets(broker.bootstrap, [c.topic for c in cases]))
    loaded.committed.update({tp: [r.offset for r in records] for tp, records in consume_all(
        broker.bootstrap, [c.topic for c in cases], "read_committed").items()})
    broker.stop()
    loaded.load_log[clean] = broker.log_text()[mark:]
    loaded.kafka[clean] = root / f"kafka-{clean}"
    copy_partitions(broker.log_dir, loaded.kafka[clean], tps)
    kafkalog_here("recover", "--execute", "--quarantine", ours.parent / "quarantine", ours)
    loaded.ours[clean] = ours


@pytest.fixture(scope="module")
def loaded(kafka_broker, tmp_path_factory) -> Loaded:
    broker = kafka_broker
    broker.start()
    broker.create_topic(SOURCE, 1, {**COMPACTED, "min.cleanable.dirty.ratio": "1"})
    for case in CASES:
        broker.create_topic(case.topic, 1, HELD)
    _produce(broker.bootstrap, random.Random(3030))
    broker.stop()
    root = tmp_path_factory.mktemp("loaded-cleaned")
    copy_partitions(broker.log_dir, root / "raw", [(SOURCE, 0)])
    done = read_checkpoint(broker.log_dir / CLEANER)
    broker.start()
    _set_ratio(broker, "0.01")
    broker.wait_for_cleaner({(SOURCE, 0): done.get((SOURCE, 0), 0) + 1})
    _set_ratio(broker, "1")  # cleaned once
    broker.stop()
    copy_partitions(broker.log_dir, root / "cleaned", [(SOURCE, 0)])
    out = Loaded()
    for clean in (False, True):
        _load(broker, root, clean, out)
    return out


def _dirs(loaded: Loaded, case: Case) -> tuple[Path, Path]:
    tp = (case.topic, 0)
    return partition_dir(loaded.kafka[case.clean], tp), partition_dir(loaded.ours[case.clean], tp)


def _files(pdir: Path) -> dict[str, bytes]:
    return {f.name: f.read_bytes() for f in sorted(pdir.iterdir())
            if f.is_file() and f.name.endswith(COMPARED)}


PARAMS = [pytest.param(c, id=c.name) for c in CASES]


# --- the setup did what it claims (else the comparisons below prove little) -------------------

def test_the_cleaner_left_txnindex_entries_a_replay_would_not_give(loaded):
    """Cleaned segments listing aborted transactions whose data is gone: the broker's load
    keeps them where it recovers no segment and rebuilds them from the markers (without those
    entries) where it recovers every one."""
    kept = partition_dir(loaded.kafka[True], (BY_NAME["clean"].topic, 0))
    rebuilt = partition_dir(loaded.kafka[False], (BY_NAME["all"].topic, 0))
    assert len(segment_bases(kept)) >= 4 and len(_txn_bases(kept)) >= 2
    names = [f"{b:020d}.txnindex" for b in _txn_bases(kept)]
    assert [(kept / n).read_bytes() for n in names] == \
        [loaded.original["clean"][n] for n in names]
    shorter = [n for n in names if len((rebuilt / n).read_bytes()) < len((kept / n).read_bytes())]
    assert len(shorter) >= 2, names


def test_the_broker_recovered_the_segments_we_expect(loaded):
    def lines(case: Case) -> list[str]:
        return [line for line in loaded.load_log[case.clean].splitlines()
                if f"{case.topic}-0" in line]

    def recovered(case: Case) -> list[int]:
        return [int(line.split("Recovering unflushed segment ")[1].split(".")[0])
                for line in lines(case) if "Recovering unflushed segment " in line]

    def bases(case: Case) -> list[int]:
        return segment_bases(_dirs(loaded, case)[0])

    assert recovered(BY_NAME["at-end"]) == bases(BY_NAME["at-end"])[-1:]
    assert recovered(BY_NAME["mid-cleaned"]) == bases(BY_NAME["mid-cleaned"])[1:]
    assert recovered(BY_NAME["all"]) == bases(BY_NAME["all"])
    assert recovered(BY_NAME["clean"]) == recovered(BY_NAME["clean-missing-index"]) == []
    for name in ("missing-index", "clean-missing-index"):
        log = f"{bases(BY_NAME[name])[1 if name == 'missing-index' else 2]:020d}.log"
        assert any("Could not find offset index file" in line and log in line
                   for line in lines(BY_NAME[name])), name
    assert any("Found a corrupted index file" in line for line in lines(BY_NAME["corrupt-txnindex"]))


# --- the comparisons --------------------------------------------------------------------------

@pytest.mark.parametrize("case", PARAMS)
def test_same_log_end_offset(loaded, case):
    tp = (case.topic, 0)
    assert log_offsets_of(loaded.ours[case.clean], tp) == loaded.ends[tp]


@pytest.mark.parametrize("case", PARAMS)
def test_same_segments_indexes_and_snapshots(loaded, case):
    """Byte for byte: segments, offset, time and transaction indexes, producer snapshots —
    the cleaner's .txnindex entries kept where the broker does not recover the segment."""
    kafka_dir, ours_dir = _dirs(loaded, case)
    broker, ours = _files(kafka_dir), _files(ours_dir)
    assert sorted(ours) == sorted(broker)
    assert [f"{n}: Kafka {len(broker[n])} bytes, ours {len(ours[n])}" for n in sorted(ours)
            if ours[n] != broker[n]] == []


def _epochs(pdir: Path) -> list[tuple[int, int]]:
    lines = (pdir / "leader-epoch-checkpoint").read_text().split("\n")[2:]
    return [(int(e), int(o)) for e, o in (line.split() for line in lines if line)]


@pytest.mark.parametrize("case", PARAMS)
def test_same_leader_epochs_below_the_log_end(loaded, case):
    """The broker's ``leader-epoch-checkpoint`` but for the epoch it began at the log end when
    it led the partition again (every restart of the test broker is a new epoch): its load
    dropped the one the last restart had begun there (``truncateFromEnd``), as we do."""
    kafka_dir, ours_dir = _dirs(loaded, case)
    end = loaded.ends[(case.topic, 0)][1]
    assert [e for e in _epochs(kafka_dir) if e[1] < end] == _epochs(ours_dir)


@pytest.mark.parametrize("case", PARAMS)
def test_same_records_read_committed(loaded, case):
    """What a read_committed consumer of the broker fetched, and what we read (where a
    .txnindex is missing, both give that segment's aborted records, as the test checks)."""
    from test_datasource_read import read

    tp = (case.topic, 0)
    ours = [r["offset"] for r in read({
        "path": str(loaded.ours[case.clean]), "subscribe": case.topic,
        "kafka.isolation.level": "read_committed", "includeMetadata": "true"})[0].to_pylist()]
    assert ours == loaded.committed[tp]
    if case.name == "raw-missing-txnindex":
        # the aborted records show: more than the same raw log with its .txnindex gives
        assert set(ours) > set(loaded.committed[(BY_NAME["missing-timeindex"].topic, 0)])
