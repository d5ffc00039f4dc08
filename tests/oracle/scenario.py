"""The first oracle scenario (test harness): topics written through a real broker by kafka-python
and by Kafka's Java producer — every codec, idempotent and not, transactions committed and
aborted, headers, tombstones, several partitions and segments, LogAppendTime, a compacted topic
the broker's cleaner has cleaned, a topic whose log start was moved by DeleteRecords, one whose
old segments retention deleted and one with a transaction still open (its last stable offset
below the log end), and the coordinator's ``__transaction_state`` — then read back by kafka-python consumers at both
isolation levels, and the broker stopped cleanly so its log dir can be read offline.
"""

from __future__ import annotations

import random
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from .broker import KafkaBroker
from .clients import (CODECS, Consumed, JavaProducer, Send, consume_all, java_config,
                      java_records, make_sends, produce_python, produce_python_transactions)

ROLL = {"segment.ms": "500"}  # Kafka 4 rejects segment.bytes < 1 MiB: roll by time
ROLL_WAIT_MS = 600
COMPACT = {**ROLL, "cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01",
           "min.compaction.lag.ms": "0", "delete.retention.ms": "0"}

# topic -> (partitions, topic configs)
TOPICS: dict[str, tuple[int, dict[str, str]]] = {
    "py-codecs": (3, ROLL),
    "py-txn": (2, ROLL),
    "java-codecs": (3, ROLL),
    "java-txn": (3, ROLL),
    "java-logappend": (2, {**ROLL, "message.timestamp.type": "LogAppendTime"}),
    "compacted": (2, COMPACT),
    "deleted-records": (2, ROLL),
    "retention": (1, {**ROLL, "retention.ms": "3600000"}),
    "java-open-txn": (2, ROLL),
}
# also compared: the coordinators' own logs (written by the broker, not a client): transactions,
# and a consumer group's membership and committed offsets
INTERNAL_TOPICS = ("__transaction_state", "__consumer_offsets")
GROUP = "oracle-group"
DELETE_BEFORE = 40  # DeleteRecords moves deleted-records-0's log start here
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")


@dataclass
class OracleRun:
    """What the broker served, and a copy of its log dir as it was when the broker stopped."""

    log_dir: Path
    consumed: dict[str, dict[tuple[str, int], list[Consumed]]]  # isolation level -> records
    produced: dict[str, int]  # topic -> records sent
    broker_log: str


def run_scenario(broker: KafkaBroker, java: JavaProducer, copy_to: Path, seed: int = 30) -> OracleRun:
    """Run the scenario on a started ``broker``, stop it cleanly and copy its log dir to
    ``copy_to``."""
    rng = random.Random(seed)
    for name, (partitions, configs) in TOPICS.items():
        broker.create_topic(name, partitions, configs)
    produced = {name: 0 for name in TOPICS}
    _python_topics(broker.bootstrap, rng, produced)
    lines = _java_script(rng, produced)
    java.run(broker.bootstrap, lines, broker.tools_log4j())
    _delete_and_retain(broker, rng, produced)
    _consumer_group(broker.bootstrap)
    ends = _end_offsets(broker.bootstrap, ["compacted"])
    # the cleaner never touches the active segment: the roll record (the last) is its base
    broker.wait_for_cleaner({tp: end - 1 for tp, end in ends.items()})
    consumed = {iso: consume_all(broker.bootstrap, [*TOPICS, *INTERNAL_TOPICS], iso)
                for iso in ISOLATION_LEVELS}
    broker.stop()
    shutil.copytree(broker.log_dir, copy_to)
    return OracleRun(copy_to, consumed, produced, broker.log_text())


def _python_topics(bootstrap: str, rng: random.Random, produced: dict[str, int]) -> None:
    """kafka-python: each codec in a segment of its own, idempotent or not in turn; then
    transactions, every other one aborted."""
    for i, codec in enumerate(CODECS):
        sends = make_sends(rng, "py-codecs", 3, 150)
        produce_python(bootstrap, sends, codec, enable_idempotence=i % 2 == 0,
                       acks="all" if i % 2 == 0 else 1)
        produced["py-codecs"] += len(sends)
        time.sleep(ROLL_WAIT_MS / 1000)
    transactions = [(make_sends(rng, "py-txn", 2, rng.randrange(1, 30)), i % 2 == 0)
                    for i in range(8)]
    produce_python_transactions(bootstrap, transactions, "lz4", "py-oracle-txn")
    produced["py-txn"] += sum(len(s) for s, _ in transactions)


def _java_script(rng: random.Random, produced: dict[str, int]) -> list[str]:
    """One OracleProducer run: idempotent per codec, transactional per codec (commit, abort,
    commit across partitions), LogAppendTime, and the compacted topic's overwrites,
    tombstones, committed and aborted transactions and the record that rolls its segment."""
    lines: list[str] = []

    def records(topic: str, sends: list[Send]) -> None:
        lines.extend(java_records(sends))
        produced[topic] += len(sends)

    for codec in CODECS:
        lines += ["NEW", *java_config({"transactional.id": "", "enable.idempotence": "true",
                                       "acks": "all", "compression.type": codec,
                                       "linger.ms": "20"})]
        records("java-codecs", make_sends(rng, "java-codecs", 3, 150, java=True))
        lines.append(f"SLEEP\t{ROLL_WAIT_MS}")
    for codec in CODECS:
        lines += ["NEW", *java_config({"transactional.id": f"java-oracle-{codec}",
                                       "compression.type": codec})]
        for commit in (True, False, True):
            lines.append("BEGIN")
            records("java-txn", make_sends(rng, "java-txn", 3, rng.randrange(5, 60), java=True))
            lines.append("COMMIT" if commit else "ABORT")
        lines.append(f"SLEEP\t{ROLL_WAIT_MS}")
    for codec in ("none", "zstd"):
        lines += ["NEW", *java_config({"transactional.id": "", "compression.type": codec})]
        records("java-logappend", make_sends(rng, "java-logappend", 2, 100, java=True))
    keys = [f"k{i}".encode() for i in range(20)]
    lines += ["NEW", *java_config({"transactional.id": "", "compression.type": "zstd"})]
    for _ in range(3):
        records("compacted", make_sends(rng, "compacted", 2, 120, keys=keys, java=True))
        lines.append(f"SLEEP\t{ROLL_WAIT_MS}")
    lines += ["NEW", *java_config({"transactional.id": "java-oracle-compacted",
                                   "compression.type": "gzip"})]
    for commit in (True, False, True, False):
        lines.append("BEGIN")
        records("compacted", make_sends(rng, "compacted", 2, 40, keys=keys, java=True))
        lines.append("COMMIT" if commit else "ABORT")
    lines += [f"SLEEP\t{ROLL_WAIT_MS}", "NEW",
              *java_config({"transactional.id": "", "compression.type": "none"})]
    records("compacted", [Send("compacted", p, b"roll", b"rolls the segment") for p in (0, 1)])
    # a transaction left open (the producer closes without ending it; the coordinator would
    # abort it only after transaction.timeout.ms): read_committed stops at its first offset
    lines += ["NEW", *java_config({"transactional.id": "java-oracle-open",
                                   "transaction.timeout.ms": "600000", "compression.type": "lz4"})]
    for commit in (True, None):
        lines.append("BEGIN")
        records("java-open-txn", make_sends(rng, "java-open-txn", 2, 30, java=True))
        lines.append("COMMIT" if commit else "FLUSH")
    return lines


def _delete_and_retain(broker: KafkaBroker, rng: random.Random, produced: dict[str, int]) -> None:
    """DeleteRecords inside a segment of deleted-records-0; retention.ms deleting the
    segments of retention-0 whose records are two days old."""
    from kafka import TopicPartition

    sends = make_sends(rng, "deleted-records", 2, 120)
    produce_python(broker.bootstrap, sends, "snappy")
    produced["deleted-records"] += len(sends)
    admin = broker.admin()
    try:
        admin.delete_records({TopicPartition("deleted-records", 0): DELETE_BEFORE})
    finally:
        admin.close()
    old = int(time.time() * 1000) - 2 * 86_400_000
    for i, ts in enumerate([old, old + 1, None]):  # two old segments, then a current one
        sends = [Send("retention", 0, f"r{i}-{j}".encode(), b"x" * 50, (), ts) for j in range(30)]
        produce_python(broker.bootstrap, sends, "none")
        produced["retention"] += len(sends)
        time.sleep(ROLL_WAIT_MS / 1000)
    produce_python(broker.bootstrap, [Send("retention", 0, b"last", b"rolls")], "none")
    produced["retention"] += 1
    deadline = time.monotonic() + 60
    while _start_offsets(broker.bootstrap, ["retention"])[("retention", 0)] < 60:
        if time.monotonic() > deadline:
            raise TimeoutError("retention did not delete retention-0's old segments in 60 s")
        time.sleep(0.3)


def _consumer_group(bootstrap: str) -> None:
    """A consumer group (the classic protocol) joins, reads a little of two topics and commits:
    group metadata and offset commits in __consumer_offsets."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer("py-codecs", "java-codecs", bootstrap_servers=bootstrap,
                             group_id=GROUP, enable_auto_commit=False,
                             auto_offset_reset="earliest", max_poll_records=20)
    try:
        deadline = time.monotonic() + 60
        while not consumer.poll(timeout_ms=200):
            if time.monotonic() > deadline:
                raise TimeoutError(f"group {GROUP} read nothing in 60 s")
        consumer.commit()
    finally:
        consumer.close()


def _offsets(bootstrap: str, topics: list[str], end: bool) -> dict[tuple[str, int], int]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    try:
        tps = [TopicPartition(t, p) for t in topics for p in consumer.partitions_for_topic(t)]
        got = consumer.end_offsets(tps) if end else consumer.beginning_offsets(tps)
        return {(tp.topic, tp.partition): off for tp, off in got.items()}
    finally:
        consumer.close()


def _end_offsets(bootstrap: str, topics: list[str]) -> dict[tuple[str, int], int]:
    return _offsets(bootstrap, topics, end=True)


def _start_offsets(bootstrap: str, topics: list[str]) -> dict[tuple[str, int], int]:
    return _offsets(bootstrap, topics, end=False)
