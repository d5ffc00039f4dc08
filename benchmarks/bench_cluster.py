"""Cluster scaling: scan, write and compaction on a Spark standalone cluster with one worker
and with two workers (one core each), next to local mode, on the same data.

A master and two workers are started from the installed pyspark (``tests/cluster.py``, on
loopback, stopped by pid at the end). Every configuration is a real ``spark-submit`` of a small
driver script that times its operation after ``--warmup`` untimed runs of it (executor start-up,
numba loading, the page cache and each executor JVM's compilation of its hot code are out of
the figure: with one warm-up run the two-worker runs still paid for two JVMs' JIT), on:

* ``scan``: ``format("kafkalog")`` over an lz4 log dir, ``sum(length(key)), sum(length(value)),
  count(*)`` — decompression and decoding on the executors (CPU-bound);
* ``write``: a cached DataFrame of the same records written with ``format("kafkalog")``, lz4;
* ``compact``: ``compact(engine="spark", force=True)`` of a copy of a compacted topic (8
  partitions of 4 MiB segments, 20,000 keys; every partition must be cleaned).

One worker is the cluster with ``spark.cores.max=1`` (one executor of one core), two workers
``spark.cores.max=2`` (two executors, one core each). A Spark "core" is a task slot, not a CPU:
an executor's JVM and its Python worker are two processes, so on a 2-CPU machine one slot
already keeps both CPUs busy (decode in Python, aggregation in the JVM). So that "one core per
worker" means one CPU, as on separate hosts, each worker (and the executors and Python workers
it starts) is pinned to its own CPU with ``taskset`` (``--no-pin`` to leave them free), and
``local[n]`` runs on n CPUs; the drivers are not pinned. Prints a markdown table with seconds and
the 1 → 2 speed-up, headed by machine, date and command. Timings are printed, never asserted.

    .venv/bin/python benchmarks/bench_cluster.py                         # 4 M records
    .venv/bin/python benchmarks/bench_cluster.py --records 500000 --repeat 1
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import textwrap
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from cluster import StandaloneCluster, spark_submit  # noqa: E402

DRIVER = textwrap.dedent(r'''
    import json, shutil, sys, time
    from pathlib import Path
    from pyspark.sql import functions as F
    import kafkalog_spark as kl
    from kafkalog_spark.spark import session
    op, data, scratch, repeat = sys.argv[1], sys.argv[2], Path(sys.argv[3]), int(sys.argv[4])
    warmup = int(sys.argv[5])
    spark = session()
    cores = spark.sparkContext.defaultParallelism

    def scan():
        df = spark.read.format("kafkalog").load(data + "/lz4")
        df.select(F.sum(F.length("key")), F.sum(F.length("value")), F.count("*")).collect()

    records = None
    if op == "write":
        records = (spark.read.format("kafkalog").load(data + "/lz4")
                   .select("key", "value", "partition").repartition(8).cache())
        records.count()

    def write(i):
        target = scratch / f"write-{i}"
        return lambda: (records.write.format("kafkalog").mode("append").option("topic", "w")
                        .option("compression", "lz4").save(str(target)))

    def compact(i):
        from kafkalog_spark.compaction.compact import compact as run

        copy = scratch / f"compact-{i}"
        shutil.copytree(data + "/compacted", copy)  # not timed
        def go():
            r = run([str(copy)], execute=True, force=True, engine="spark", spark=spark,
                    options={"cleanup.policy": "compact"})
            assert r.metrics["partitions_cleaned"] == 8, r.to_dict()  # never time a no-op
        return go

    prepare = {"scan": lambda i: scan, "write": write, "compact": compact}[op]
    for i in range(warmup):  # executors started, numba loaded, files cached, the JVMs' JIT done
        prepare(-1 - i)()
    best = float("inf")
    for i in range(1, repeat + 1):
        fn = prepare(i)
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    print("RESULT " + json.dumps({"op": op, "seconds": best, "cores": cores}))
    spark.stop()
''')


def make_data(root: Path, records: int) -> None:
    import pyarrow as pa

    import kafkalog_spark as kl
    from bench_codec import make_table

    table = make_table(records, 100)
    table = table.append_column("partition", pa.array([i % 8 for i in range(records)], pa.int32()))
    kl.write_log(table, root / "lz4", topic="bench", codec="lz4", segment_bytes=64 << 20)
    keys = pa.array([b"key-%06d" % (i % 20_000) for i in range(records)])
    compacted = table.set_column(0, "key", keys)
    # several segments per partition: the active one is never cleaned
    kl.write_log(compacted, root / "compacted", topic="changelog", codec="lz4",
                 segment_bytes=4 << 20, max_batch_records=500)


def run(master: str, op: str, data: Path, scratch: Path, repeat: int, warmup: int,
        conf: dict[str, str], cpus: set[int] | None = None) -> float:
    """One spark-submit of the driver script; ``cpus``: the CPUs it (and, in local mode, its
    tasks) may run on — children inherit this process's affinity while it is set."""
    script = scratch / "driver.py"
    script.write_text(DRIVER)
    every = os.sched_getaffinity(0)
    if cpus:
        os.sched_setaffinity(0, cpus)
    try:
        done = spark_submit(script, op, str(data), str(scratch), str(repeat), str(warmup), master=master,
                            conf={"spark.ui.enabled": "false", **conf}, timeout=3600)
    finally:
        os.sched_setaffinity(0, every)
    line = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])["seconds"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=4_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=2,
                    help="untimed runs first: every executor JVM compiles its own hot code, so "
                         "two workers need as many warm-up runs as one")
    ap.add_argument("--ops", default="scan,write,compact")
    ap.add_argument("--root", default=None, help="scratch folder (default: a temp dir)")
    ap.add_argument("--no-pin", action="store_true",
                    help="do not pin workers and local runs to CPUs (module docstring)")
    args = ap.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    pin = not args.no_pin and len(cpus) >= 2
    root = Path(args.root or tempfile.mkdtemp(prefix="kafkalog-bench-cluster-"))
    data = root / "data"
    if not data.exists():
        make_data(data, args.records)
    cluster = StandaloneCluster(root / "cluster", workers=2, cores=1, memory="3g",
                                cpus=tuple(cpus[:2]) if pin else None).start()
    rows = []
    try:
        configs = [("local[1]", "local[1]", {}, {cpus[0]} if pin else None),
                   ("local[2]", "local[2]", {}, set(cpus[:2]) if pin else None),
                   ("cluster, 1 worker", cluster.url, {"spark.cores.max": "1"}, None),
                   ("cluster, 2 workers", cluster.url, {"spark.cores.max": "2"}, None)]
        for op in args.ops.split(","):
            times = {}
            for name, master, conf, on in configs:
                scratch = root / f"scratch-{op}-{len(times)}"
                scratch.mkdir(parents=True, exist_ok=True)
                times[name] = run(master, op, data, scratch, args.repeat, args.warmup,
                                  {"spark.executor.memory": "2g", **conf}, on)
                shutil.rmtree(scratch, ignore_errors=True)
                cluster.wait_idle()
            rows.append((op, times))
    finally:
        cluster.stop()
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                if line.startswith("model name")), platform.processor())
    print(f"# bench_cluster: {platform.machine()} {cpu}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"# {' '.join(sys.argv)}\n# {args.records:,} records x 100 B, best of {args.repeat} "
          f"after {args.warmup} warm-up runs; "
          + ("workers and local runs pinned to CPUs (one CPU per worker)\n" if pin
             else "no CPU pinning\n"))
    print("| op | local[1] s | local[2] s | local 1→2 | cluster 1 worker s | cluster 2 workers s "
          "| cluster 1→2 |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for op, t in rows:
        l1, l2 = t["local[1]"], t["local[2]"]
        c1, c2 = t["cluster, 1 worker"], t["cluster, 2 workers"]
        print(f"| {op} | {l1:.2f} | {l2:.2f} | {l1 / l2:.2f}x | {c1:.2f} | {c2:.2f} | "
              f"{c1 / c2:.2f}x |")
    if args.root is None:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
