"""A migration of many small topics with the Spark engine: wall time of one ``migrate`` call
(session start excluded, after a warm-up migration), optionally compared between two checkouts.

``--topics`` topics of ``--records`` records each (one partition, lz4) are written once; each
measurement migrates all of them into a fresh destination with ``migrate(..., spark=...)`` in
a ``local[2]`` session. ``--compare OLD NEW`` runs the measurement in fresh processes that
alternate between two checkouts (``PYTHONPATH``), ``--rounds`` times, and prints each side's best
and the NEW/OLD ratio. ``--s3`` migrates into a bucket of a SeaweedFS server started on
loopback (``tests/s3.py``), where each table's commit is a few requests to the store::

    .venv/bin/python benchmarks/bench_migrate_topics.py                   # this checkout
    git worktree add /tmp/before <commit>
    .venv/bin/python benchmarks/bench_migrate_topics.py --compare /tmp/before .
    .venv/bin/python benchmarks/bench_migrate_topics.py --s3 --compare /tmp/before .

Timings are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def make_data(root: Path, topics: int, records: int) -> None:
    import pyarrow as pa

    import kafkalog_spark as kl

    for t in range(topics):
        table = pa.table({"key": [b"k%d" % i for i in range(records)],
                          "value": [b"value-%d-%d" % (t, i) for i in range(records)]})
        kl.write_log(table, root, topic=f"topic{t:03d}", partition=0, codec="lz4")


def measure(data: Path, scratch: Path, repeat: int, s3: bool = False) -> float:
    if not s3:
        return _measure(data, str(scratch), repeat, None)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from s3 import ACCESS_KEY, SECRET_KEY, SeaweedS3  # the SeaweedFS test server

    with SeaweedS3(scratch / "seaweed") as server:
        server.make_bucket("bench")
        return _measure(data, "s3://bench", repeat, {
            "endpoint": server.endpoint, "access_key_id": ACCESS_KEY,
            "secret_access_key": SECRET_KEY, "allow_http": "true"})


def _measure(data: Path, dest: str, repeat: int, storage: dict[str, str] | None) -> float:
    from kafkalog_spark.delta import migrate
    from kafkalog_spark.spark import session

    spark = session("local[2]")
    # executors and kernels warm
    migrate(str(data), f"{dest}/warm", spark=spark, storage_options=storage,
            source_storage_options={})
    best = float("inf")
    for i in range(repeat):
        t0 = time.perf_counter()
        metrics = migrate(str(data), f"{dest}/run{i}", spark=spark, storage_options=storage,
                          source_storage_options={})
        best = min(best, time.perf_counter() - t0)
        assert metrics["commits"] == len(metrics["tables"]) > 0
    spark.stop()
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--topics", type=int, default=50)
    ap.add_argument("--records", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--data", default=None, help="the log dir to migrate (made if missing)")
    ap.add_argument("--s3", action="store_true",
                    help="migrate into a SeaweedFS bucket (tests/s3.py) instead of a local folder")
    ap.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--compare", nargs=2, metavar=("OLD", "NEW"))
    args = ap.parse_args()
    data = Path(args.data or Path(tempfile.gettempdir()) / f"kafkalog-bench-topics-{args.topics}")
    if not data.exists():
        make_data(data, args.topics, args.records)
    if args.measure or not args.compare:
        scratch = Path(tempfile.mkdtemp(prefix="kafkalog-bench-migrate-"))
        try:
            print(json.dumps({"seconds": measure(data, scratch, args.repeat, args.s3)}))
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        return
    old, new = (str(Path(p).resolve()) for p in args.compare)
    best = {old: float("inf"), new: float("inf")}
    for _ in range(args.rounds):
        for tree in (old, new):
            done = subprocess.run(
                [sys.executable, __file__, "--measure", "--data", str(data),
                 "--repeat", str(args.repeat), *(["--s3"] if args.s3 else [])],
                env=dict(os.environ, PYTHONPATH=tree), capture_output=True, text=True, check=True)
            best[tree] = min(best[tree], json.loads(done.stdout.strip().splitlines()[-1])["seconds"])
    print(f"# bench_migrate_topics --compare: {platform.machine()}, {os.cpu_count()} cores, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {args.topics} topics x "
          f"{args.records} records, {'into SeaweedFS S3, ' if args.s3 else ''}local[2], "
          f"best of {args.repeat} x {args.rounds} rounds")
    print(f"OLD {old}: {best[old]:.2f} s\nNEW {new}: {best[new]:.2f} s\n"
          f"NEW/OLD {best[new] / best[old]:.2f}")


if __name__ == "__main__":
    main()
