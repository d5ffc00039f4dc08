"""Kafka clients for the oracle tests (test harness, not the package): records to produce,
produced by kafka-python or by Kafka's own Java producer (``java/OracleProducer.java``, compiled
against the broker's jars at test time), and what a kafka-python consumer reads back.

A record here is what a consumer returns: ``(offset, key, value, headers, timestamp ms,
timestamp type)``, per ``(topic, partition)`` in offset order.
"""

from __future__ import annotations

import random
import subprocess
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

JAVA_SOURCE = Path(__file__).resolve().parent / "java" / "OracleProducer.java"
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")

Headers = tuple[tuple[str, bytes | None], ...]


@dataclass(frozen=True)
class Send:
    """One record to produce."""

    topic: str
    partition: int
    key: bytes | None
    value: bytes | None
    headers: Headers = ()
    timestamp_ms: int | None = None  # None: the producer's clock


@dataclass(frozen=True)
class Consumed:
    """One record as a consumer returns it."""

    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp_ms: int
    timestamp_type: int


def make_sends(rng: random.Random, topic: str, partitions: int, n: int, *,
               keys: Sequence[bytes] | None = None, java: bool = False) -> list[Send]:
    """``n`` varied records: null / empty / random keys (or keys drawn from ``keys``),
    null (tombstone) / empty / small / compressible values, no or several headers (repeated
    names, a non-ASCII name), the producer's clock or an explicit timestamp up to a day old.
    With ``java`` (Kafka's Java producer) also what kafka-python refuses to send: a null
    header value, a record whose key and value are both null."""
    now = int(time.time() * 1000)
    out = []
    for i in range(n):
        if keys is not None:
            key = rng.choice(keys)
        else:
            key = rng.choice([None, b"", f"key-{rng.randrange(50)}".encode(), rng.randbytes(8)])
        roll = rng.random()
        if roll < 0.08 and (java or key is not None):
            value = None
        elif roll < 0.12:
            value = b""
        elif roll < 0.6:
            value = f"value {i} ".encode() * rng.randrange(1, 40)
        else:
            value = rng.randbytes(rng.randrange(1, 600))
        headers = rng.choice([(), (), (("h", b"v"),), (("trace", rng.randbytes(4)), ("trace", b"")),
                              (("nul", None if java else b""),),
                              (("héader-ü", "wert".encode()), ("b", b"1"))])
        ts = rng.choice([None, None, now - rng.randrange(86_400_000)])
        out.append(Send(topic, rng.randrange(partitions), key, value, headers, ts))
    return out


# --- kafka-python --------------------------------------------------------------------------

def produce_python(bootstrap: str, sends: Iterable[Send], codec: str, **config) -> None:
    """Send with kafka-python (idempotent, its default) and flush."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap,
                             compression_type=None if codec == "none" else codec,
                             linger_ms=20, **config)
    try:
        futures = [producer.send(s.topic, value=s.value, key=s.key, partition=s.partition,
                                 headers=list(s.headers), timestamp_ms=s.timestamp_ms)
                   for s in sends]
        producer.flush()
        for f in futures:
            f.get(timeout=30)
    finally:
        producer.close()


def produce_python_transactions(bootstrap: str, transactions: Sequence[tuple[list[Send], bool]],
                                codec: str, transactional_id: str) -> None:
    """Each ``(sends, commit)`` in one kafka-python transaction, committed or aborted."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id,
                             compression_type=None if codec == "none" else codec, linger_ms=5)
    try:
        producer.init_transactions()
        for sends, commit in transactions:
            producer.begin_transaction()
            for s in sends:
                producer.send(s.topic, value=s.value, key=s.key, partition=s.partition,
                              headers=list(s.headers), timestamp_ms=s.timestamp_ms)
            if commit:
                producer.commit_transaction()
            else:
                producer.flush()  # the records reach the log before the abort marker
                producer.abort_transaction()
    finally:
        producer.close()


# --- Kafka's Java producer -------------------------------------------------------------------

@dataclass
class JavaProducer:
    """``OracleProducer`` compiled into ``build`` against the jars in ``jars``."""

    jars: Path
    build: Path
    script: list[str] = field(default_factory=list)

    def compile(self) -> JavaProducer:
        self.build.mkdir(parents=True, exist_ok=True)
        if not (self.build / "OracleProducer.class").exists():
            done = subprocess.run(["javac", "-nowarn", "-cp", f"{self.jars}/*", "-d",
                                   str(self.build), str(JAVA_SOURCE)],
                                  capture_output=True, text=True, timeout=180)
            if done.returncode != 0:
                raise RuntimeError(f"javac {JAVA_SOURCE.name} failed:\n{done.stderr[-3000:]}")
        return self

    def run(self, bootstrap: str, lines: Iterable[str], log4j: Path) -> str:
        """Run one producer over the command ``lines`` (see the Java source); its stdout."""
        done = subprocess.run(
            ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", f"-Dlog4j2.configurationFile=file:{log4j}",
             "-cp", f"{self.build}:{self.jars}/*", "OracleProducer", bootstrap],
            input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=180)
        if done.returncode != 0:
            raise RuntimeError(f"OracleProducer exited {done.returncode}:\n"
                               f"{(done.stdout + done.stderr)[-3000:]}")
        return done.stdout


def java_config(settings: Mapping[str, str]) -> list[str]:
    """CONFIG lines for ``OracleProducer`` (an empty value removes a setting)."""
    return [f"CONFIG\t{k}={v}" for k, v in settings.items()]


def java_records(sends: Iterable[Send]) -> Iterator[str]:
    for s in sends:
        headers = ",".join(k.encode().hex() + ("" if v is None else "=" + v.hex())
                           for k, v in s.headers)
        yield "\t".join(["REC", s.topic, str(s.partition),
                         "-" if s.timestamp_ms is None else str(s.timestamp_ms),
                         "-" if s.key is None else s.key.hex(),
                         "-" if s.value is None else s.value.hex(), headers])


# --- consuming -------------------------------------------------------------------------------

def consume_all(bootstrap: str, topics: Sequence[str], isolation_level: str,
                timeout: float = 60.0) -> dict[tuple[str, int], list[Consumed]]:
    """Every record of every partition of ``topics`` from the log start to the end a consumer
    of ``isolation_level`` sees (high watermark, or last stable offset), by kafka-python."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation_level,
                             enable_auto_commit=False, group_id=None,
                             auto_offset_reset="earliest", fetch_max_wait_ms=100)
    try:
        tps = [TopicPartition(t, p) for t in topics
               for p in sorted(consumer.partitions_for_topic(t) or ())]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)
        out: dict[tuple[str, int], list[Consumed]] = {(tp.topic, tp.partition): [] for tp in tps}
        deadline = time.monotonic() + timeout
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            if time.monotonic() > deadline:
                behind = {f"{tp.topic}-{tp.partition}": (consumer.position(tp), ends[tp])
                          for tp in tps if consumer.position(tp) < ends[tp]}
                raise TimeoutError(f"consumer did not reach the end offsets: {behind}")
            for tp, records in consumer.poll(timeout_ms=200).items():
                out[(tp.topic, tp.partition)] += [
                    Consumed(r.offset, r.key, r.value, tuple(r.headers or ()), r.timestamp,
                             r.timestamp_type) for r in records]
        return out
    finally:
        consumer.close()


def log_offsets(bootstrap: str, topics: Sequence[str]) -> dict[tuple[str, int], tuple[int, int]]:
    """``(topic, partition) -> (log start offset, end offset)`` as ListOffsets answers (the end:
    the high watermark, the log end offset of a single-replica partition)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    try:
        tps = [TopicPartition(t, p) for t in topics
               for p in sorted(consumer.partitions_for_topic(t) or ())]
        starts, ends = consumer.beginning_offsets(tps), consumer.end_offsets(tps)
        return {(tp.topic, tp.partition): (starts[tp], ends[tp]) for tp in tps}
    finally:
        consumer.close()


def offsets_for_times(bootstrap: str, targets: Mapping[tuple[str, int], Sequence[int]]
                      ) -> dict[tuple[tuple[str, int], int], int | None]:
    """``((topic, partition), timestamp ms) -> offset`` ListOffsets finds for each target (the
    first record at or after the timestamp; ``None`` past the last)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    out: dict[tuple[tuple[str, int], int], int | None] = {}
    try:
        rounds = max((len(ts) for ts in targets.values()), default=0)
        for i in range(rounds):
            ask = {TopicPartition(*tp): ts[i] for tp, ts in targets.items() if i < len(ts)}
            for tp, found in consumer.offsets_for_times(ask).items():
                out[((tp.topic, tp.partition), ask[tp])] = None if found is None else found.offset
        return out
    finally:
        consumer.close()
