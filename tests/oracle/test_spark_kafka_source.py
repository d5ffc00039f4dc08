"""Spark's own Kafka source as the yardstick (issue 31.2): what ``spark.read.format("kafka")``
(spark-sql-kafka-0-10 from Maven) returns from the running broker is what
``format("kafkalog")`` returns from the same broker's log dir once it is stopped — the same
column names and types (``key, value, topic, partition, offset, timestamp, timestampType``,
``headers`` with ``includeHeaders``) and the same rows, at both isolation levels, for explicit
offset ranges, and for a compacted topic the cleaner has left with gaps.

The session with the Kafka source's jars runs in a process of its own (``tests/spark_jars.py``);
the ``kafkalog`` source is registered in it too, so both reads go through one session.
"""

from __future__ import annotations

import json
import random
import time

import pyarrow as pa
import pytest

from spark_jars import JarSpark, spark_jars

from . import maven_jars
from .clients import Send, make_sends, produce_python, produce_python_transactions
from .scenario import COMPACT, ROLL, ROLL_WAIT_MS

pytestmark = [pytest.mark.broker, pytest.mark.spark]

PLAIN, TXN, COMPACTED = "sks-plain", "sks-txn", "sks-compacted"
TOPICS = {PLAIN: (3, ROLL), TXN: (2, ROLL), COMPACTED: (2, COMPACT)}
KEY_COLUMNS = ("topic", "partition", "offset")


@pytest.fixture(scope="module")
def kafka_spark():
    try:
        jars = spark_jars("spark-kafka")
    except maven_jars.MavenUnavailable as e:
        pytest.fail(f"{e} (Spark's Kafka source comes from Maven)")
    js = JarSpark(jars)
    yield js
    js.close()


def _produce(bootstrap: str, broker) -> dict[str, int]:
    """The three topics: plain (every codec but zstd in turn, headers, tombstones, null keys),
    transactional (committed and aborted in turn), compacted (overwrites and tombstones, cleaned
    by the broker). Returns records sent per topic."""
    rng = random.Random(31)
    for name, (partitions, configs) in TOPICS.items():
        broker.create_topic(name, partitions, configs)
    sent = {name: 0 for name in TOPICS}
    for codec in ("none", "lz4", "gzip", "snappy"):
        sends = make_sends(rng, PLAIN, 3, 120)
        produce_python(bootstrap, sends, codec)
        sent[PLAIN] += len(sends)
    transactions = [(make_sends(rng, TXN, 2, rng.randrange(5, 40)), i % 2 == 0) for i in range(6)]
    produce_python_transactions(bootstrap, transactions, "lz4", "sks-txn")
    sent[TXN] = sum(len(s) for s, _ in transactions)
    keys = [f"k{i}".encode() for i in range(15)]
    for _ in range(3):
        sends = make_sends(rng, COMPACTED, 2, 100, keys=keys)
        produce_python(bootstrap, sends, "none")
        sent[COMPACTED] += len(sends)
        time.sleep(ROLL_WAIT_MS / 1000)
    produce_python(bootstrap, [Send(COMPACTED, p, b"roll", b"rolls") for p in (0, 1)], "none")
    sent[COMPACTED] += 2
    return sent


def _end_offsets(bootstrap: str, topic: str) -> dict[tuple[str, int], int]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    try:
        tps = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic)]
        return {(tp.topic, tp.partition): o for tp, o in consumer.end_offsets(tps).items()}
    finally:
        consumer.close()


# --- run in the jar session's process ----------------------------------------------------------


def _read(spark, fmt: str, options: dict[str, str], path: str | None = None):
    """``spark.read.format(fmt).options(**options).load([path])``: its schema (JSON, and as
    ``simpleString``: names and types, no nullability) and its rows."""
    reader = spark.read.format(fmt).options(**options)
    df = reader.load(path) if path is not None else reader.load()
    return df.schema.jsonValue(), df.schema.simpleString(), df.toArrow()


# --- the reads compared ------------------------------------------------------------------------

CASES = {
    "plain": {"subscribe": PLAIN, "includeHeaders": "true"},
    "plain-no-headers": {"subscribe": PLAIN},
    "plain-offsets": {"assign": json.dumps({PLAIN: [0, 2]}),
                      "startingOffsets": json.dumps({PLAIN: {"0": 17, "2": -2}}),
                      "endingOffsets": json.dumps({PLAIN: {"0": 101, "2": -1}}),
                      "includeHeaders": "true"},
    "txn-uncommitted": {"subscribe": TXN, "includeHeaders": "true",
                        "kafka.isolation.level": "read_uncommitted"},
    "txn-committed": {"subscribe": TXN, "includeHeaders": "true",
                      "kafka.isolation.level": "read_committed"},
    "compacted": {"subscribe": COMPACTED, "includeHeaders": "true"},
    "compacted-committed": {"subscribe": COMPACTED, "includeHeaders": "true",
                            "kafka.isolation.level": "read_committed"},
}
# what the Kafka source needs besides: where the broker is; and compacted gaps are not loss
KAFKA_ONLY = {"failOnDataLoss": "false"}


@pytest.fixture(scope="module")
def both(kafka_broker, kafka_spark):
    """Each case read by the Kafka source from the running broker, then (broker stopped) by
    ``kafkalog`` from its log dir: ``{case: (kafka (schema, rows), kafkalog (schema, rows))}``."""
    kafka_broker.start()
    sent = _produce(kafka_broker.bootstrap, kafka_broker)
    ends = _end_offsets(kafka_broker.bootstrap, COMPACTED)
    kafka_broker.wait_for_cleaner({tp: end - 1 for tp, end in ends.items()})
    server = {"kafka.bootstrap.servers": kafka_broker.bootstrap}
    from_kafka = {case: kafka_spark.run(_read, "kafka", {**server, **KAFKA_ONLY, **opts})
                  for case, opts in CASES.items()}
    kafka_broker.stop()
    from_log = {case: kafka_spark.run(_read, "kafkalog", opts, str(kafka_broker.log_dir))
                for case, opts in CASES.items()}
    # the scenario did what it says (else equality proves little)
    rows = {c: t.num_rows for c, (_, _, t) in from_kafka.items()}
    assert rows["plain"] == sent[PLAIN] and 0 < rows["plain-offsets"] < sent[PLAIN]
    assert rows["txn-committed"] < rows["txn-uncommitted"] == sent[TXN]
    assert rows["compacted"] < sent[COMPACTED]
    return {case: (from_kafka[case], from_log[case]) for case in CASES}


def sorted_rows(table: pa.Table) -> list[dict]:
    return sorted(table.to_pylist(), key=lambda r: tuple(r[c] for c in KEY_COLUMNS))




@pytest.mark.parametrize("case", list(CASES))
def test_kafkalog_returns_the_kafka_sources_column_names_and_types(both, case):
    (_, kafka_types, _), (_, log_types, _) = both[case]
    assert log_types == kafka_types


def test_kafkalog_schema_equals_the_kafka_sources_with_nullability(both):
    (kafka_schema, _, _), (log_schema, _, _) = both["plain"]

    def strip(value):  # the column comments are kafkalog's own documentation
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k != "metadata"}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    assert strip(log_schema) == strip(kafka_schema)


@pytest.mark.parametrize("case", list(CASES))
def test_kafkalog_returns_the_kafka_sources_rows(both, case):
    """Every row and value equal, headers null for a record without any on both sides."""
    (_, _, kafka_rows), (_, _, log_rows) = both[case]
    assert sorted_rows(log_rows) == sorted_rows(kafka_rows)


def test_compacted_topic_has_gaps_both_sides_agree_on(both):
    (_, _, kafka_rows), _ = both["compacted"]
    by_partition: dict[int, list[int]] = {}
    for r in sorted_rows(kafka_rows):
        by_partition.setdefault(r["partition"], []).append(r["offset"])
    assert any(o[-1] - o[0] + 1 > len(o) for o in by_partition.values())


def test_swapping_only_the_format_name_reads_the_same(both, kafka_broker, kafka_spark):
    """The read a notebook wrote for the Kafka source, options and all, with
    ``format("kafkalog")`` and the log dir as the path: the same rows."""
    options = {"kafka.bootstrap.servers": "127.0.0.1:9092", **KAFKA_ONLY, **CASES["txn-committed"]}
    _, _, rows = kafka_spark.run(_read, "kafkalog", options, str(kafka_broker.log_dir))
    (_, _, kafka_rows), _ = both["txn-committed"]
    assert sorted_rows(rows) == sorted_rows(kafka_rows)
