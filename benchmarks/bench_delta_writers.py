"""Delta writers benchmark (issue 31.1): one Kafka log dir migrated to Delta by the delta-spark
writer and by the delta-rs writer (both through Spark tasks), against the Parquet baseline of the
same rows (``format("kafkalog") -> write.parquet``: what Spark costs with no Delta at all).

One Spark session (``--master``, default local[2]) with the Delta jars from Maven
(``tests/oracle/maven_jars.py`` set ``delta``, given as ``spark.jars``), the Delta extension and
catalog; every path writes into a fresh destination, ``--repeat`` times (default one run), best
time kept. Records as ``bench_migrate.py`` makes them (16-byte keys, 100-byte values, one
header). Prints the machine, the command, a table of seconds, MB/s of log read and the ratio to
the Parquet baseline, and (``--json``) the figures as JSON. Timings are printed, never asserted.

    .venv/bin/python benchmarks/bench_delta_writers.py --records 7000000     # ~1 GB of log
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
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests")]

import kafkalog_spark as kl  # noqa: E402
from kafkalog_spark.delta import migrate  # noqa: E402

from bench_migrate import make_records  # noqa: E402
from spark_jars import DELTA_CONF, spark_jars  # noqa: E402


def timed(fn: Callable[[Path], object], repeat: int, scratch: Path) -> tuple[float, object]:
    best, result = float("inf"), None
    for i in range(repeat):
        dest = scratch / f"out{i}"
        shutil.rmtree(dest, ignore_errors=True)
        t0 = time.perf_counter()
        result = fn(dest)
        best = min(best, time.perf_counter() - t0)
        shutil.rmtree(dest, ignore_errors=True)
    return best, result


def log_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*.log"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=7_000_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--codec", default="none")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="bench-delta-writers-"))
    try:
        t0 = time.perf_counter()
        logs = scratch / "logs"
        kl.write_log(make_records(args.records, args.partitions), logs, codec=args.codec,
                     max_batch_records=150)
        gen_s, size = time.perf_counter() - t0, log_bytes(logs)
        from kafkalog_spark.spark import session

        t0 = time.perf_counter()
        spark = session(args.master, app_name="bench-delta-writers",
                        conf={"spark.jars": ",".join(spark_jars("delta")), **DELTA_CONF})
        start_s = time.perf_counter() - t0
        # untimed: Python workers started, kernels compiled, Delta classes loaded
        warm = scratch / "warm-logs"
        kl.write_log(make_records(2000, 1), warm)
        spark.read.format("kafkalog").load(str(warm)).count()
        migrate(warm, scratch / "warm", spark=spark, writer="delta-spark")
        shutil.rmtree(scratch / "warm")

        def parquet(dest: Path) -> None:
            (spark.read.format("kafkalog").option("includeHeaders", "true")
             .option("includeMetadata", "true").load(str(logs)).write.parquet(str(dest)))

        paths = [
            ("parquet baseline (kafkalog -> write.parquet)", parquet),
            ("migrate, delta-rs writer (Spark tasks + delta-rs commit)",
             lambda d: migrate(logs, d, spark=spark, writer="delta-rs")),
            ("migrate, delta-spark writer (format('delta'), commit per partition)",
             lambda d: migrate(logs, d, spark=spark, writer="delta-spark")),
        ]
        results = []
        for name, fn in paths:
            seconds, _ = timed(fn, args.repeat, scratch)
            results.append({"path": name, "seconds": round(seconds, 2)})
            print(f"  {name}: {seconds:.1f} s", file=sys.stderr, flush=True)
        spark.stop()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    base = results[0]["seconds"]
    for r in results:
        r["MB_per_s"] = round(size / 1e6 / r["seconds"], 1)
        r["vs_parquet"] = round(r["seconds"] / base, 2)
    meta = {"machine": f"{platform.node()} {platform.machine()}, {os.cpu_count()} cpus, "
                       f"load average {os.getloadavg()[0]:.1f} at the end",
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None
                                                          else sys.argv[1:])]),
            "records": args.records, "partitions": args.partitions, "codec": args.codec,
            "log_bytes": size, "generate_s": round(gen_s, 1),
            "session_start_s": round(start_s, 1), "master": args.master}
    if args.json:
        print(json.dumps({**meta, "results": results}, indent=2))
        return 0
    for k, v in meta.items():
        print(f"{k}: {v}")
    print("\n| path | seconds | log MB/s | time / parquet baseline |\n|---|---|---|---|")
    for r in results:
        print(f"| {r['path']} | {r['seconds']} | {r['MB_per_s']} | {r['vs_parquet']}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
