"""Fixtures of the oracle tests (test harness): the Kafka jars, one real broker for the session,
Kafka's Java producer compiled against those jars."""

from __future__ import annotations

import shutil

import pytest

from . import maven_jars
from .broker import KafkaBroker
from .clients import JavaProducer
from .scenario import OracleRun, run_scenario


@pytest.fixture(scope="session")
def kafka_jars():
    """The folder of the Kafka broker and tools jars (fetched by ``mvn`` once, then cached
    outside the repo); skips, saying why, only where a JDK is missing, or ``mvn`` is while the
    jars are not cached yet."""
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool!r} is not on PATH: the Kafka broker tests need a JDK (17+)")
    try:
        return maven_jars.fetch("kafka")
    except maven_jars.MavenUnavailable as e:
        pytest.fail(f"{e} (the Kafka broker tests need Maven to fetch the broker's jars once)")


@pytest.fixture(scope="session")
def kafka_broker(kafka_jars, tmp_path_factory):
    """One real broker for the whole run, started (``tests/oracle/broker.py``). A test may stop
    it to read its files; ``start()`` (a no-op while it runs) brings it back on the same dirs,
    so a test that needs it running calls that first."""
    broker = KafkaBroker(tmp_path_factory.mktemp("kafka-broker"), kafka_jars)
    try:
        broker.start()
        yield broker
    finally:
        if broker.is_running():
            broker.stop()


@pytest.fixture(scope="session")
def java_producer(kafka_jars, tmp_path_factory):
    """``OracleProducer`` (tests/oracle/java) compiled against the Kafka jars."""
    return JavaProducer(kafka_jars, tmp_path_factory.mktemp("oracle-java")).compile()


@pytest.fixture(scope="session")
def oracle_run(kafka_broker, java_producer, tmp_path_factory) -> OracleRun:
    """The broker scenario (``scenario.py``), run once per session on the session's broker: what
    its consumers read, and a copy of its log dir made when it stopped (later tests restart the
    broker; the copy stays as the scenario left it)."""
    kafka_broker.start()
    return run_scenario(kafka_broker, java_producer, tmp_path_factory.mktemp("scenario") / "logs")
