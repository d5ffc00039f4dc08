"""Kafka itself as the oracle (issue 30): what a real broker's consumers returned is what
``read_log`` and ``spark.read.format("kafkalog")`` return from its log dir, record for record
(offset, key, value, headers, timestamp, timestamp type), and ``kafkalog verify --deep`` finds
nothing wrong with the files the broker wrote. The scenario is ``scenario.py``."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections import defaultdict

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import kafkalog_spark as kl

from .broker import CLEAN_SHUTDOWN, KafkaBroker
from .clients import Consumed, consume_all, make_sends, produce_python
from .scenario import DELETE_BEFORE, INTERNAL_TOPICS, TOPICS, OracleRun, run_scenario

pytestmark = pytest.mark.broker

# deleted-records-0: DeleteRecords moved its log start (log-start-offset-checkpoint) past
# offsets still in its first .log; a consumer starts at the log start, and so do we
TOPIC_PARAMS = list(TOPICS)


@pytest.fixture(scope="module")
def oracle(kafka_broker, java_producer) -> OracleRun:
    """The scenario, run once on the session's broker (left stopped: its files are read)."""
    kafka_broker.start()
    return run_scenario(kafka_broker, java_producer)


def records_of(table: pa.Table) -> dict[tuple[str, int], list[Consumed]]:
    """Our rows in the consumer's terms (timestamps in ms, -1 for none)."""
    ts = pc.fill_null(pc.divide(pc.cast(table["timestamp"], pa.int64()), 1000), -1)
    out: dict[tuple[str, int], list[Consumed]] = defaultdict(list)
    cols = [table[c].to_pylist() for c in ("topic", "partition", "offset", "key", "value",
                                            "headers", "timestampType")]
    for (topic, part, offset, key, value, headers, ts_type), t in zip(zip(*cols), ts.to_pylist()):
        out[(topic, part)].append(Consumed(offset, key, value,
                                           tuple((h["key"], h["value"]) for h in headers or ()),
                                           t, ts_type))
    for recs in out.values():
        recs.sort(key=lambda r: r.offset)
    return dict(out)


def differences(expected: dict[tuple[str, int], list[Consumed]],
                got: dict[tuple[str, int], list[Consumed]]) -> list[str]:
    """Per partition: the offsets only one side has and the first record that differs."""
    found = []
    for tp in sorted(set(expected) | set(got)):
        want = {r.offset: r for r in expected.get(tp, [])}
        have = {r.offset: r for r in got.get(tp, [])}
        if want == have:
            continue
        missing, extra = sorted(set(want) - set(have)), sorted(set(have) - set(want))
        line = f"{tp[0]}-{tp[1]}: consumer {len(want)} records, ours {len(have)}"
        if missing:
            line += f"; only the consumer has offsets {missing[:10]}{'...' if len(missing) > 10 else ''}"
        if extra:
            line += f"; only we have offsets {extra[:10]}{'...' if len(extra) > 10 else ''}"
        unequal = [o for o in sorted(set(want) & set(have)) if want[o] != have[o]]
        if unequal:
            line += f"; {len(unequal)} differ, first: consumer {want[unequal[0]]} ours {have[unequal[0]]}"
        found.append(line)
    return found


def topic_records(records, topic):
    return {tp: recs for tp, recs in records.items() if tp[0] == topic}


# --- the scenario did what it claims (else the comparisons below prove little) ----------------

def test_scenario_exercises_the_broker(oracle):
    uncommitted, committed = (oracle.consumed[i] for i in ("read_uncommitted", "read_committed"))
    count = {t: sum(len(r) for r in topic_records(uncommitted, t).values()) for t in TOPICS}
    for topic in ("py-codecs", "java-codecs", "java-logappend"):
        assert count[topic] == oracle.produced[topic], topic
    for topic in ("py-txn", "java-txn"):  # aborted records: seen uncommitted, hidden committed
        assert count[topic] == oracle.produced[topic], topic
        assert sum(len(r) for r in topic_records(committed, topic).values()) < count[topic]
    assert count["compacted"] < oracle.produced["compacted"]  # the cleaner removed records
    assert "cleaned log compacted-0" in oracle.broker_log
    assert uncommitted[("deleted-records", 0)][0].offset == DELETE_BEFORE
    assert uncommitted[("retention", 0)][0].offset == 60
    assert any(r.timestamp_type == 1 for r in uncommitted[("java-logappend", 0)])
    open_txn = topic_records(committed, "java-open-txn")  # stops at the open transaction
    assert 0 < sum(map(len, open_txn.values())) < count["java-open-txn"]
    assert topic_records(uncommitted, "__transaction_state")
    segments = list((oracle.log_dir / "py-codecs-0").glob("*.log"))
    assert len(segments) >= 5, "one segment per codec at least"


# --- read_log ----------------------------------------------------------------------------------

@pytest.mark.parametrize("topic", [*TOPIC_PARAMS, *INTERNAL_TOPICS])
def test_read_log_matches_read_uncommitted_consumer(oracle, topic):
    table = kl.read_log(oracle.log_dir, topics=[topic], include_headers=True)
    expected = topic_records(oracle.consumed["read_uncommitted"], topic)
    assert differences(expected, records_of(table)) == []


# --- spark.read.format("kafkalog") -----------------------------------------------------------

@pytest.fixture(scope="module")
def spark_records(oracle, spark):
    """``isolation level -> records`` as one Spark read of every scenario topic returns them."""
    def read(isolation: str):
        df = (spark.read.format("kafkalog").option("subscribe", ",".join(TOPICS))
              .option("includeHeaders", "true").option("kafka.isolation.level", isolation)
              .load(str(oracle.log_dir)))
        return records_of(df.toArrow())

    return {iso: read(iso) for iso in ("read_uncommitted", "read_committed")}


@pytest.mark.spark
@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
@pytest.mark.parametrize("topic", TOPIC_PARAMS)
def test_spark_read_matches_consumer(oracle, spark_records, isolation, topic):
    expected = topic_records(oracle.consumed[isolation], topic)
    assert differences(expected, topic_records(spark_records[isolation], topic)) == []


# --- verify ------------------------------------------------------------------------------------

def verify_deep(log_dir) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kafkalog_spark.cli", "verify", "--deep",
                           str(log_dir)], capture_output=True, text=True, timeout=300)


def test_verify_deep_finds_nothing_in_the_brokers_files(oracle):
    done = verify_deep(oracle.log_dir)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


# --- a crash, and a port taken before the broker binds it -------------------------------------

def test_broker_after_a_crash_and_a_taken_port(kafka_jars, tmp_path):
    """A port taken between picking and binding makes the start retry on new ports; after a
    SIGKILL the broker recovers its log on restart; once it is stopped cleanly we read what
    its consumer read, and verify finds nothing."""
    import random

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        broker = KafkaBroker(tmp_path / "kafka", kafka_jars, port=port)
        try:
            broker.start()
        except BaseException:
            broker.kill()
            raise
    try:
        assert broker.starts == 2 and broker.port != port
        broker.create_topic("crash", 2)
        rng = random.Random(7)
        produce_python(broker.bootstrap, make_sends(rng, "crash", 2, 200), "zstd", acks="all")
        broker.kill()
        assert not (broker.log_dir / CLEAN_SHUTDOWN).exists()
        broker.start()
        produce_python(broker.bootstrap, make_sends(rng, "crash", 2, 50), "gzip")
        consumed = consume_all(broker.bootstrap, ["crash"], "read_uncommitted")
    finally:
        broker.stop()
    assert sum(map(len, consumed.values())) == 250
    table = kl.read_log(broker.log_dir, topics=["crash"], include_headers=True)
    assert differences(consumed, records_of(table)) == []
    done = verify_deep(broker.log_dir)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
