"""Kafka itself as the oracle for tiered storage (issue 32): a real 4.1 broker with tiered storage
on, Kafka's own LocalTieredStorage as its RemoteStorageManager (from the ``kafka-storage`` test
jar, Maven set ``kafka-tiered``), a topic with ``remote.storage.enable=true`` and a local
retention of one byte, so every rolled segment is copied to the tier and then deleted locally.

What a consumer fetched from offset 0 while the broker ran (remote segments served through the
RSM, then the local ones), at both isolation levels (an aborted transaction leaves a
``.txnindex`` in the tier), is what ``read_log(log_dir, remote_tier=...)``, the data source and
``format("kafkalog")`` read from the stopped broker's files — also without the
``__remote_log_metadata`` log (the tier listed), and what ``kafkalog migrate --remote-tier``
writes; ``info`` and ``verify`` see the whole history without a problem. ``kafkalog dump
--remote-log-metadata-decoder`` prints what ``kafka.tools.DumpLogSegments
--remote-log-metadata-decoder`` prints over the broker's ``__remote_log_metadata`` log, also for
record values damaged on purpose.

One broker run per module (about 15 s): its log dir and tier are copied when it stops.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest

import kafkalog_spark as kl

from . import maven_jars
from .broker import KafkaBroker
from .clients import (Consumed, consume_all, make_sends, produce_python,
                      produce_python_transactions)
from .compare import differences, records_of
from .dumps import kafka_dump, our_dump

pytestmark = [pytest.mark.broker]

TOPIC = "tiered"
PARTITIONS = 2
ROUNDS = 6  # produce rounds, each rolled into its own segment (segment.ms)
PER_ROUND = 40
METADATA_DIR = "__remote_log_metadata-0"


def tiered_config(tier: Path) -> dict[str, str]:
    """Broker settings for tiered storage with LocalTieredStorage (BROKER_ORACLE.md §3)."""
    return {
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.class.name":
            "org.apache.kafka.server.log.remote.storage.LocalTieredStorage",
        "remote.log.metadata.manager.listener.name": "PLAINTEXT",
        "remote.log.manager.task.interval.ms": "500",
        "rsm.config.dir": str(tier),
        "rsm.config.delete.on.close": "false",
        "rlmm.config.remote.log.metadata.topic.replication.factor": "1",
        "rlmm.config.remote.log.metadata.topic.num.partitions": "1",
        "log.retention.check.interval.ms": "500",
    }


@dataclass(frozen=True)
class TieredRun:
    """The stopped broker's log dir and tier (copies), and what a consumer read from offset 0."""

    log_dir: Path
    tier: Path
    consumed: dict[str, dict[tuple[str, int], list[Consumed]]]  # by isolation level
    jars: Path
    log4j: Path


@pytest.fixture(scope="module")
def tiered_run(tmp_path_factory) -> TieredRun:
    if shutil.which("java") is None:
        pytest.fail("'java' is not on PATH: the Kafka broker tests need a JDK (17+)")
    try:
        jars = maven_jars.fetch("kafka-tiered")
    except maven_jars.MavenUnavailable as e:
        pytest.fail(f"{e} (the tiered broker test needs Maven to fetch the jars once)")
    root = tmp_path_factory.mktemp("tiered-broker")
    tier = root / "tier"
    broker = KafkaBroker(root / "kafka", jars, config=tiered_config(tier))
    try:
        broker.start()
        broker.create_topic(TOPIC, PARTITIONS, {
            "remote.storage.enable": "true", "local.retention.bytes": "1",
            "segment.ms": "400", "index.interval.bytes": "1"})
        rng = random.Random(32)
        for i in range(ROUNDS):
            produce_python(broker.bootstrap, make_sends(rng, TOPIC, PARTITIONS, PER_ROUND), "lz4")
            if i == 1:  # an aborted and a committed transaction: .txnindex files in the tier
                produce_python_transactions(
                    broker.bootstrap, [(make_sends(rng, TOPIC, PARTITIONS, 10), False),
                                       (make_sends(rng, TOPIC, PARTITIONS, 10), True)],
                    "none", "tiered-txn")
            time.sleep(0.6)  # past segment.ms: the next round rolls a new segment
        _wait_offloaded(broker, tier)
        consumed = {iso: consume_all(broker.bootstrap, [TOPIC], iso)
                    for iso in ("read_uncommitted", "read_committed")}
    finally:
        if broker.is_running():
            broker.stop()
    out = tmp_path_factory.mktemp("tiered-copy")
    shutil.copytree(broker.log_dir, out / "logs")
    shutil.copytree(tier, out / "tier")
    return TieredRun(out / "logs", out / "tier", consumed, jars, broker.tools_log4j())


def _wait_offloaded(broker: KafkaBroker, tier: Path, timeout: float = 60.0) -> None:
    """Until each partition keeps at most two local segments (the rest copied and deleted)."""
    deadline = time.monotonic() + timeout
    while True:
        local = [len(list((broker.log_dir / f"{TOPIC}-{p}").glob("*.log")))
                 for p in range(PARTITIONS)]
        remote = len(list(tier.rglob("*.log")))
        if max(local) <= 2 and remote >= PARTITIONS * (ROUNDS - 2):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"segments not offloaded after {timeout}s: local {local}, "
                               f"remote {remote}\n{broker.log_text()[-3000:]}")
        time.sleep(0.3)


# --- dump --remote-log-metadata-decoder --------------------------------------------------------

def _metadata_segments(run: TieredRun) -> list[str]:
    return [str(p) for p in sorted((run.log_dir / METADATA_DIR).glob("*.log"))]


def test_dump_remote_log_metadata_decoder_matches_kafka(tiered_run):
    files = _metadata_segments(tiered_run)
    flags = ["--remote-log-metadata-decoder"]
    kafka = kafka_dump(tiered_run.jars, tiered_run.log4j, files, flags)
    ours = our_dump(files, flags)
    assert kafka.returncode == 0, kafka.stderr[-2000:]
    assert "RemoteLogSegmentMetadataUpdate{" in kafka.stdout  # the copies were recorded
    assert ours.stdout == kafka.stdout
    assert ours.returncode == 0


def _damaged_values(values: list[bytes]) -> list[bytes]:
    """Real record values, and copies damaged as a broken writer or disk would: another frame
    version, an unknown api key, a state id no state has, bytes after the message, a
    truncated message, a negative start offset, an end offset below the start."""
    seg = next(v for v in values if v[1] == 0)
    upd = next(v for v in values if v[1] == 1)
    out = list(values)
    out.append(b"\x02" + seg[1:])                      # frame version 2
    out.append(seg[:1] + b"\x07" + seg[2:])            # api key 7
    out.append(upd[:-2] + b"\x09" + upd[-1:])          # update state 9
    out.append(seg + b"\x00\x00")                      # garbage after the message
    out.append(seg[: len(seg) // 2])                   # truncated
    return out


def test_dump_remote_log_metadata_decoder_on_damaged_values_matches_kafka(tiered_run, tmp_path):
    values = kl.read_log(tiered_run.log_dir / METADATA_DIR).column("value").to_pylist()
    damaged = tmp_path / "logs"
    kl.write_log(pa.table({"key": pa.array([None] * (len(values) + 5), pa.binary()),
                           "value": pa.array(_damaged_values(values), pa.binary())}),
                 damaged, topic="__remote_log_metadata", partition=0)
    files = [str(p) for p in sorted((damaged / METADATA_DIR).glob("*.log"))]
    flags = ["--remote-log-metadata-decoder"]
    kafka = kafka_dump(tiered_run.jars, tiered_run.log4j, files, flags)
    ours = our_dump(files, flags)
    assert kafka.stdout.count("Error at offset") == 5
    assert ours.stdout.splitlines() == kafka.stdout.splitlines()


# --- the partition's history: tier + log dir == what the consumer fetched from offset 0 ---------

def test_the_broker_offloaded_and_deleted_locally(tiered_run):
    for p in range(PARTITIONS):
        local = sorted((tiered_run.log_dir / f"{TOPIC}-{p}").glob("*.log"))
        assert int(local[0].stem) > 0  # the first local segment is past offset 0
        assert tiered_run.consumed["read_uncommitted"][(TOPIC, p)][0].offset == 0
    assert len(list(tiered_run.tier.rglob("*.txnindex"))) >= 1  # the aborted transaction


@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_read_log_with_the_tier_is_what_the_consumer_fetched(tiered_run, isolation):
    table = kl.read_log(tiered_run.log_dir, topics=[TOPIC], include_headers=True,
                        remote_tier=tiered_run.tier)
    got = records_of(table)
    if isolation == "read_committed":  # the data source's isolation, over the same history
        from kafkalog_spark.datasource.options import parse_read_options
        from kafkalog_spark.datasource.plan import plan_scan
        from kafkalog_spark.datasource.reader import read_split

        opts = parse_read_options({"path": str(tiered_run.log_dir), "subscribe": TOPIC,
                                   "includeHeaders": "true", "remoteTier": str(tiered_run.tier),
                                   "kafka.isolation.level": "read_committed"})
        batches = [b for s in plan_scan(opts).splits for b in read_split(s, opts)]
        got = records_of(pa.Table.from_batches(batches))
    assert differences(tiered_run.consumed[isolation], got) == []


def test_the_log_dir_alone_is_only_the_tail(tiered_run):
    table = kl.read_log(tiered_run.log_dir, topics=[TOPIC])
    for p in range(PARTITIONS):
        offsets = [o for o, q in zip(table["offset"].to_pylist(), table["partition"].to_pylist())
                   if q == p]
        assert offsets[0] > 0


def test_without_the_metadata_log_the_tier_listing_gives_the_same_history(tiered_run, tmp_path):
    copy = tmp_path / "logs"
    shutil.copytree(tiered_run.log_dir, copy, ignore=shutil.ignore_patterns(METADATA_DIR))
    table = kl.read_log(copy, topics=[TOPIC], include_headers=True, remote_tier=tiered_run.tier)
    assert differences(tiered_run.consumed["read_uncommitted"], records_of(table)) == []


def kafkalog(*args) -> subprocess.CompletedProcess:
    """The ``kafkalog`` CLI in a new process; fails the test unless it exits 0."""
    done = subprocess.run([sys.executable, "-m", "kafkalog_spark.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (args, done.stdout[-3000:], done.stderr[-3000:])
    return done


def test_info_and_verify_with_the_tier(tiered_run):
    info = json.loads(kafkalog("info", "--json", tiered_run.log_dir, "--remote-tier",
                               tiered_run.tier).stdout)
    for part in info["log_dirs"][0]["partitions"]:
        if part["topic"] == TOPIC:
            assert part["start_offset"] == 0 and part["remote"]["remote_segments"] >= ROUNDS - 2
            assert part["remote"]["source"] == "__remote_log_metadata"
            assert part["remote"]["gaps"] == [] and part["remote"]["conflicts"] == []
            n = len(tiered_run.consumed["read_uncommitted"][(TOPIC, part["partition"])])
            assert part["next_offset"] >= n
    rep = json.loads(kafkalog("verify", "--local", "--json", tiered_run.log_dir,
                              "--remote-tier", tiered_run.tier).stdout)
    assert rep["ok"], [p for p in rep["problems"] if p["severity"] == "error"]


@pytest.mark.spark
def test_spark_reads_the_history(tiered_run, spark):
    df = (spark.read.format("kafkalog").option("subscribe", TOPIC)
          .option("includeHeaders", "true").option("remoteTier", str(tiered_run.tier))
          .load(str(tiered_run.log_dir)))
    assert differences(tiered_run.consumed["read_uncommitted"], records_of(df.toArrow())) == []


def test_migrate_with_the_tier(tiered_run, tmp_path):
    import deltalake

    kafkalog("migrate", tiered_run.log_dir, tmp_path / "lake", "--topic", TOPIC,
             "--remote-tier", tiered_run.tier)
    table = deltalake.DeltaTable(str(tmp_path / "lake" / TOPIC)).to_pyarrow_table()
    got = sorted(zip(table["partition"].to_pylist(), table["offset"].to_pylist()))
    want = sorted((p, r.offset) for (_, p), recs in
                  tiered_run.consumed["read_uncommitted"].items() for r in recs)
    assert got == want


# --- maintenance on the tiered topic's local log (issue 32, items 1 and 6) ---------------------

def test_maintenance_refuses_the_tiered_topic_and_recover_keeps_its_history(tiered_run,
                                                                             tmp_path):
    logs = tmp_path / "logs"
    shutil.copytree(tiered_run.log_dir, logs)
    files = {p: p.read_bytes() for p in sorted(logs.rglob("*")) if p.is_file()}
    for args in (["retain", logs, "--execute"], ["compact", logs, "--topic", TOPIC],
                 ["erase", logs, "--topic", TOPIC, "--where", "true", "--execute"]):
        done = subprocess.run([sys.executable, "-m", "kafkalog_spark.cli", *map(str, args)],
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
        assert f"{args[0]} refuses tiered storage's partition(s) {TOPIC}-0, {TOPIC}-1" in \
            done.stderr
        # what the broker left says so three times over
        assert "remote.storage.enable=true (from the metadata log)" in done.stderr
        assert "lies below its first local segment" in done.stderr
        assert "__remote_log_metadata lists" in done.stderr
    # recover: the broker's leader epochs of the remote offsets and its log start stay
    report = json.loads(kafkalog("recover", logs, "--json", "--execute").stdout)
    assert {n.split(":")[0] for n in report["notes"] if "tiered storage" in n} == \
        {f"{TOPIC}-{p}" for p in range(PARTITIONS)}
    for p in range(PARTITIONS):
        epochs = logs / f"{TOPIC}-{p}" / "leader-epoch-checkpoint"
        first_local = int(sorted((logs / f"{TOPIC}-{p}").glob("*.log"))[0].stem)
        assert int(epochs.read_text().splitlines()[2].split()[1]) < first_local
        assert epochs.read_bytes() == files[epochs]
    for name in ("log-start-offset-checkpoint", "leader-epoch-checkpoint"):
        for p in logs.rglob(name):
            assert p.read_bytes() == files[p], p
