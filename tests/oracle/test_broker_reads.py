"""Kafka itself as the oracle (issue 30): what a real broker's consumers returned is what
``read_log`` and ``spark.read.format("kafkalog")`` return from its log dir, record for record
(offset, key, value, headers, timestamp, timestamp type), and ``kafkalog verify --deep`` finds
nothing wrong with the files the broker wrote. The scenario is ``scenario.py``."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

import kafkalog_spark as kl

from .broker import CLEAN_SHUTDOWN, KafkaBroker
from .clients import consume_all, make_sends, produce_python
from .compare import differences, records_of, topic_records
from .scenario import DELETE_BEFORE, INTERNAL_TOPICS, TOPICS, OracleRun

pytestmark = pytest.mark.broker

# deleted-records-0: DeleteRecords moved its log start (log-start-offset-checkpoint) past
# offsets still in its first .log; a consumer starts at the log start, and so do we
TOPIC_PARAMS = list(TOPICS)


@pytest.fixture(scope="module")
def oracle(oracle_run) -> OracleRun:
    """The scenario, run once for the session (conftest.py), its log dir frozen when the broker
    stopped."""
    return oracle_run


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
