"""Kafka itself as the oracle, part 5 (issue 30): ``kafkalog retain --execute`` against the
broker's own retention. Topics are written through the broker with retention off (several
time-rolled segments, some of three-day-old records), the broker is stopped and their partitions
copied; then the broker gets ``retention.bytes``, ``retention.ms`` or a DeleteRecords log start
and deletes what its retention deletes, while ``retain`` runs on the copy with the same configs
(the DeleteRecords offset written into the copy's ``log-start-offset-checkpoint``, as the broker
checkpoints it). The same segments must be left, with the same log start offset checkpointed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest

from .clients import Send, log_offsets, produce_python
from .logdirs import (LOG_START, copy_partitions, log_offsets_of, partition_dir, read_checkpoint,
                      segment_bases, write_checkpoint)
from .ours import kafkalog_here, offsets

pytestmark = [pytest.mark.broker, pytest.mark.slow]

DAY_MS = 86_400_000
ROUNDS = 5  # segments per topic (each round's first record rolls the previous segment)
ROLL_WAIT_S = 0.6  # > segment.ms


@dataclass(frozen=True)
class Case:
    """A topic, the config the broker gets after the copy (and ``retain`` gets), and which
    rounds of records are three days old."""

    topic: str
    config: dict[str, str]
    old_rounds: tuple[int, ...]
    delete_records: int | None = None


CASES = [
    # 5 segments of ~6 KiB: keep what fits in 14000 bytes (Kafka counts the active segment)
    Case("ret-bytes", {"retention.bytes": "14000"}, ()),
    Case("ret-ms", {"retention.ms": str(DAY_MS)}, (0, 1, 2)),
    # old records after recent ones do not roll a segment (Kafka rolls by the time between a
    # record's timestamp and the segment's first): a segment mixing both is kept
    Case("ret-ms-mixed", {"retention.ms": str(DAY_MS)}, (0, 2, 3)),
    # every segment, the active one too, past retention.ms: Kafka rolls an empty segment at
    # the log end and deletes all the others (log start = log end)
    Case("ret-ms-all", {"retention.ms": str(DAY_MS)}, (0, 1, 2, 3, 4)),
    # DeleteRecords inside the fourth segment: the three below it go
    Case("ret-delete-records", {}, (), delete_records=3 * 40 + 7),
]
RECORDS_PER_ROUND = 40

# (test, topic) -> why Kafka and we differ: strict xfails; none is left (the differences found
# and fixed: docs/kafka-oracle.md, R1-R3)
XFAILS: dict[tuple[str, str], str] = {}


def cases(test: str) -> list:
    return [pytest.param(c, id=c.topic, marks=[pytest.mark.xfail(
        strict=True, reason=XFAILS[(test, c.topic)])] if (test, c.topic) in XFAILS else [])
        for c in CASES]


def _produce(bootstrap: str) -> None:
    """ROUNDS rounds of RECORDS_PER_ROUND records to every case's topic, ROLL_WAIT_S apart
    (a time roll at each round's first record)."""
    now = int(time.time() * 1000)
    for r in range(ROUNDS):
        sends = []
        for case in CASES:
            # old rounds a second apart: a time roll needs > segment.ms between timestamps
            ts = now - 3 * DAY_MS + r * 1000 if r in case.old_rounds else None
            sends += [Send(case.topic, 0, f"{r}-{i}".encode(), b"v" * 120, (), ts)
                      for i in range(RECORDS_PER_ROUND)]
        produce_python(bootstrap, sends, "none", acks="all")
        time.sleep(ROLL_WAIT_S)


@dataclass
class Outcome:
    broker_log_dir: object
    ours: object
    broker_log_starts: dict


@pytest.fixture(scope="module")
def retained(kafka_broker, tmp_path_factory) -> Outcome:
    broker = kafka_broker
    broker.start()
    for case in CASES:
        broker.create_topic(case.topic, 1, {"retention.ms": "-1", "retention.bytes": "-1",
                                            "segment.ms": "500", "file.delete.delay.ms": "0"})
    _produce(broker.bootstrap)
    broker.stop()
    ours = tmp_path_factory.mktemp("retained") / "logs"
    copy_partitions(broker.log_dir, ours, [(c.topic, 0) for c in CASES])
    for case in CASES:
        assert len(segment_bases(partition_dir(ours, (case.topic, 0)))) >= 2, case.topic
    broker.start()
    _apply(broker)
    starts = _wait_for_retention(broker)
    broker.stop()
    now = int(time.time() * 1000)
    for case in CASES:
        if case.delete_records is not None:
            entries = read_checkpoint(ours / LOG_START)
            entries[(case.topic, 0)] = case.delete_records
            write_checkpoint(ours / LOG_START, entries)
        kafkalog_here("retain", "--execute", "--topic", case.topic, "--now", now,
                 *[a for k, v in case.config.items() for a in ("--config", f"{k}={v}")], ours)
    return Outcome(broker.log_dir, ours, starts)


def _apply(broker) -> None:
    from kafka import TopicPartition
    from kafka.admin import ConfigResource, ConfigResourceType

    admin = broker.admin()
    try:
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, c.topic, configs=c.config)
                             for c in CASES if c.config])
        admin.delete_records({TopicPartition(c.topic, 0): c.delete_records
                              for c in CASES if c.delete_records is not None})
    finally:
        admin.close()


def _wait_for_retention(broker, timeout: float = 60.0) -> dict:
    """Until every case's log start moved and its deleted segments' files are gone."""
    deadline = time.monotonic() + timeout
    while True:
        starts = {tp[0]: start for tp, (start, _) in
                  log_offsets(broker.bootstrap, [c.topic for c in CASES]).items()}
        pending = [c.topic for c in CASES if starts[c.topic] == 0 or
                   any(partition_dir(broker.log_dir, (c.topic, 0)).glob("*.deleted"))]
        if not pending:
            return starts
        if time.monotonic() > deadline:
            raise TimeoutError(f"retention did not run for {pending}: {starts}")
        time.sleep(0.3)


@pytest.mark.parametrize("case", cases("segments"))
def test_retain_deletes_the_segments_the_broker_deletes(retained, case):
    tp = (case.topic, 0)
    broker_dir = partition_dir(retained.broker_log_dir, tp)
    ours_dir = partition_dir(retained.ours, tp)
    assert segment_bases(ours_dir) == segment_bases(broker_dir)


@pytest.mark.parametrize("case", cases("checkpoint"))
def test_retain_checkpoints_the_brokers_log_start_offset(retained, case):
    tp = (case.topic, 0)
    assert read_checkpoint(retained.ours / LOG_START).get(tp) == \
        read_checkpoint(retained.broker_log_dir / LOG_START).get(tp)


@pytest.mark.parametrize("case", cases("log-start"))
def test_retain_moves_the_log_start_where_the_broker_does(retained, case):
    """The log start offset a consumer sees on the broker is what Kafka's loader takes from
    our files, and what ``kafkalog info`` says."""
    tp = (case.topic, 0)
    assert log_offsets_of(retained.ours, tp)[0] == retained.broker_log_starts[case.topic]


def test_info_says_the_log_start_offset(retained):
    tp = ("ret-delete-records", 0)
    assert offsets(retained.ours)[tp][0] == retained.broker_log_starts[tp[0]]


@pytest.mark.parametrize("case", cases("files"))
def test_retain_leaves_the_kept_segments_files_as_the_broker_does(retained, case):
    """The kept segments' files (log, indexes, producer snapshots) are those the broker
    kept, byte for byte."""
    tp = (case.topic, 0)
    names = lambda d: {f.name: f.read_bytes() for f in d.iterdir()  # noqa: E731
                       if f.suffix in (".log", ".index", ".timeindex", ".txnindex", ".snapshot")}
    broker_files = names(partition_dir(retained.broker_log_dir, tp))
    ours = names(partition_dir(retained.ours, tp))
    assert sorted(ours) == sorted(broker_files)
    assert [n for n in sorted(ours) if ours[n] != broker_files[n]] == []
