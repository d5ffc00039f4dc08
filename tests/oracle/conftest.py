"""Fixtures of the oracle tests (test harness): the Kafka jars, one real broker for the session,
Kafka's Java producer compiled against those jars."""

from __future__ import annotations

import shutil

import pytest

from . import maven_jars
from .broker import KafkaBroker
from .clients import JavaProducer


@pytest.fixture(scope="session")
def kafka_jars():
    """The folder of the Kafka broker and tools jars (fetched by ``mvn`` once, then cached
    outside the repo); skips, saying why, only where ``mvn`` or Java is missing."""
    for tool in ("mvn", "java", "javac"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool!r} is not on PATH: the Kafka broker tests need Maven and a JDK")
    return maven_jars.fetch("kafka")


@pytest.fixture(scope="session")
def kafka_broker_session(kafka_jars, tmp_path_factory):
    """One broker for the whole run; tests that stop it leave it stopped (``kafka_broker``
    starts it again on the same dirs)."""
    broker = KafkaBroker(tmp_path_factory.mktemp("kafka-broker"), kafka_jars)
    yield broker
    if broker.is_running():
        broker.stop()


@pytest.fixture
def kafka_broker(kafka_broker_session):
    """The session's broker, running."""
    kafka_broker_session.start()
    return kafka_broker_session


@pytest.fixture(scope="session")
def java_producer(kafka_jars, tmp_path_factory):
    """``OracleProducer`` (tests/oracle/java) compiled against the Kafka jars."""
    return JavaProducer(kafka_jars, tmp_path_factory.mktemp("oracle-java")).compile()
