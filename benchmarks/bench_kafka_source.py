"""Spark's Kafka source vs ``format("kafkalog")`` benchmark (issue 31.2): the same topics read
through a real broker by ``spark.read.format("kafka")`` (spark-sql-kafka-0-10 from Maven) and
from that broker's log dir, once it is stopped, by ``format("kafkalog")``.

A Kafka 4.1.2 broker (``tests/oracle/broker.py``, jars from Maven) gets two topics of
``--partitions`` partitions, ``--gb`` GB of records each (``--record-size``-byte JSON-like
event payloads, null keys, Kafka's own ``ProducerPerformance``), one uncompressed, one lz4.
One Spark session (``--master``, default local[2]) with the Kafka source's jars reads each topic
twice per source: a full scan (every column, ``write.format("noop")``) and a two-column
aggregation (``groupBy("partition").agg(count, sum(length(value)))``), with the same session
settings and each source's default options. Besides wall time it records the CPU seconds spent
in the broker's JVM, Spark's JVM (driver and local executors) and Spark's Python workers
(``/proc``), which is where the time goes on each side. One run; printed, never asserted.

    .venv/bin/python benchmarks/bench_kafka_source.py --gb 1
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests")]

from oracle import maven_jars  # noqa: E402
from oracle.broker import KafkaBroker  # noqa: E402
from spark_jars import spark_jars  # noqa: E402
from tree_cpu import cpu_seconds, descendants  # noqa: E402


class CpuMeter:
    """CPU seconds of the broker, Spark's JVM and its Python workers between two readings."""

    def __init__(self, jvm: int, broker: int | None) -> None:
        self.jvm, self.broker = jvm, broker

    def read(self) -> dict[str, float]:
        python = sum(cpu_seconds(p, True) for p in descendants(self.jvm))
        return {"broker": cpu_seconds(self.broker, False) if self.broker else 0.0,
                "spark_jvm": cpu_seconds(self.jvm, False), "python_workers": python}


def spark_jvm_pid() -> int:
    """The JVM pyspark launched for this process (spark-submit's scripts exec into it; the
    broker is another java descendant)."""
    for pid in descendants(os.getpid()):
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if args[0].endswith(b"java") and b"org.apache.spark.deploy.SparkSubmit" in args:
            return pid
    raise RuntimeError("no Spark JVM among this process's children")


def payload_file(path: Path, size: int, lines: int = 20_000, seed: int = 31) -> Path:
    """``lines`` JSON-like event payloads of ``size`` bytes (fields from small vocabularies,
    as application events are: lz4 gets them to about half), one per line."""
    import random

    rng = random.Random(seed)
    users, kinds = [f"user-{i:05d}" for i in range(2000)], ["click", "view", "buy", "scroll"]
    with open(path, "w") as f:
        for i in range(lines):
            event = (f'{{"id":{i},"user":"{rng.choice(users)}","kind":"{rng.choice(kinds)}",'
                     f'"page":"/p/{rng.randrange(500)}","ms":{rng.randrange(10**6)},"tags":"')
            f.write((event + "x" * size)[:size - 2] + '"}\n')
    return path


def produce(broker: KafkaBroker, topic: str, records: int, payloads: Path, codec: str) -> float:
    t0 = time.perf_counter()
    broker.java("org.apache.kafka.tools.ProducerPerformance", "--topic", topic,
                "--num-records", str(records), "--payload-file", str(payloads),
                "--throughput", "-1", "--producer-props", f"bootstrap.servers={broker.bootstrap}",
                "acks=1", "linger.ms=50", "batch.size=524288", f"compression.type={codec}",
                timeout=3600)
    return time.perf_counter() - t0


def measure(spark, meter: CpuMeter, reader, what: str) -> dict:
    from pyspark.sql import functions as F

    out = {}
    for query in ("full scan", "aggregation"):
        before, t0 = meter.read(), time.perf_counter()
        df = reader()
        if query == "full scan":
            df.write.format("noop").mode("overwrite").save()
        else:
            df.groupBy("partition").agg(F.count("*"), F.sum(F.length("value"))).collect()
        seconds = time.perf_counter() - t0
        after = meter.read()
        out[query] = {"seconds": round(seconds, 2),
                      **{f"cpu_{k}_s": round(after[k] - before[k], 1) for k in after}}
        print(f"  {what} {query}: {seconds:.1f} s {out[query]}", file=sys.stderr, flush=True)
    return out


def cpu(result: dict) -> float:
    return sum(v for k, v in result.items() if k.startswith("cpu_"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gb", type=float, default=1.0, help="GB of record payload per topic")
    ap.add_argument("--record-size", type=int, default=200)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    records = int(args.gb * 1e9 / args.record_size)
    scratch = Path(tempfile.mkdtemp(prefix="bench-kafka-source-"))
    topics = {"bench-none": "none", "bench-lz4": "lz4"}
    broker = KafkaBroker(scratch / "broker", maven_jars.fetch("kafka"), heap="1g")
    results: dict = {"kafka": {}, "kafkalog": {}}
    try:
        broker.start()
        payloads = payload_file(scratch / "payloads.txt", args.record_size)
        produced = {}
        for topic, codec in topics.items():
            broker.create_topic(topic, args.partitions)
            produced[topic] = round(produce(broker, topic, records, payloads, codec), 1)
        from kafkalog_spark.spark import session

        spark = session(args.master, app_name="bench-kafka-source",
                        conf={"spark.jars": ",".join(spark_jars("spark-kafka"))})
        meter = CpuMeter(spark_jvm_pid(), broker.pid)

        def kafka(topic: str):
            return (spark.read.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
                    .option("subscribe", topic).option("startingOffsets", "earliest")
                    .option("endingOffsets", "latest").load())

        def kafkalog(topic: str):
            return spark.read.format("kafkalog").option("subscribe", topic).load(
                str(broker.log_dir))

        kafka("bench-lz4").limit(10).collect()  # untimed warm-up: consumer classes, workers
        for topic in topics:
            results["kafka"][topic] = measure(spark, meter, lambda t=topic: kafka(t),
                                              f"kafka {topic}")
        broker.stop()
        meter.broker = None
        sizes = {t: sum(p.stat().st_size for p in broker.log_dir.glob(f"{t}-*/*.log"))
                 for t in topics}
        kafkalog("bench-lz4").limit(10).collect()  # untimed warm-up: workers, kernels
        for topic in topics:
            results["kafkalog"][topic] = measure(spark, meter, lambda t=topic: kafkalog(t),
                                                 f"kafkalog {topic}")
        spark.stop()
    finally:
        if broker.is_running():
            broker.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    meta = {"machine": f"{platform.node()} {platform.machine()}, {os.cpu_count()} cpus, "
                       f"load average {os.getloadavg()[0]:.1f} at the end",
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None
                                                          else sys.argv[1:])]),
            "records_per_topic": records, "record_size": args.record_size,
            "partitions": args.partitions, "log_bytes": sizes, "produce_s": produced,
            "master": args.master}
    if args.json:
        print(json.dumps({**meta, "results": results}, indent=2))
        return 0
    for k, v in meta.items():
        print(f"{k}: {v}")
    print("\n| topic | query | Kafka source s | kafkalog s | Kafka / kafkalog | CPU s Kafka "
          "(broker / Spark JVM / Python) | CPU s kafkalog (Spark JVM / Python) | CPU Kafka / "
          "kafkalog |")
    print("|---|---|---|---|---|---|---|---|")
    for topic in topics:
        for query in ("full scan", "aggregation"):
            k, o = results["kafka"][topic][query], results["kafkalog"][topic][query]
            print(f"| {topic} | {query} | {k['seconds']} | {o['seconds']} | "
                  f"{k['seconds'] / o['seconds']:.2f}x | {k['cpu_broker_s']} / "
                  f"{k['cpu_spark_jvm_s']} / {k['cpu_python_workers_s']} | "
                  f"{o['cpu_spark_jvm_s']} / {o['cpu_python_workers_s']} | "
                  f"{cpu(k) / max(cpu(o), 0.1):.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
