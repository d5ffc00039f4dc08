"""spark-submit entry point for the shipping tests and benchmark (tests/test_cluster_shipping.py,
benchmarks/bench_shipping.py): read a log dir through ``format("kafkalog")`` ROUNDS times, take
each scan task's executor run time from the driver's monitoring REST API, then report what the
executors' Python is (interpreter, where ``kafkalog_spark`` and ``pyspark`` were imported from,
whether numba compiled or loaded its kernels from a cache).

    spark-submit ... tests/shipping_job.py LOG_DIR ROUNDS [register]

``register``: call ``kafkalog_spark.spark.register(spark)`` after ``session()`` (a data source
PySpark discovered by itself carries no ``--py-files`` to executors; a registered one does). It
prints one line ``SHIPPING {json}``.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.request


def _rest(spark, path: str):
    url = f"{spark.sparkContext.uiWebUrl}/api/v1/applications/{spark.sparkContext.applicationId}"
    with urllib.request.urlopen(url + path, timeout=30) as r:
        return json.load(r)


def _scan_tasks(spark, group: str, deadline: float) -> list[dict]:
    """The tasks of the job group's largest stage (the scan), once the REST API has them all."""
    tracker = spark.sparkContext.statusTracker()
    stages = [s for j in tracker.getJobIdsForGroup(group) for s in tracker.getJobInfo(j).stageIds]
    infos = [tracker.getStageInfo(s) for s in stages]
    # adaptive execution runs the final aggregate as a later job that lists the scan stage
    # again, skipped: take the largest stage that ran tasks
    scan = max((i for i in infos if i is not None and i.numCompletedTasks > 0),
               key=lambda i: i.numTasks)
    while True:
        listed = _rest(spark, f"/stages/{scan.stageId}/{scan.currentAttemptId}/"
                              f"taskList?length=100000")
        tasks = [t for t in listed if t.get("status") == "SUCCESS" and t.get("taskMetrics")]
        if len(tasks) >= scan.numTasks:
            break
        if time.monotonic() > deadline:  # the listener bus is asynchronous: poll, bounded
            raise TimeoutError(f"REST API shows {len(tasks)} of {scan.numTasks} tasks: "
                               f"{json.dumps(listed)[:1500]}")
        time.sleep(0.2)
    return [{"executor": t["executorId"], "launch": t["launchTime"],
             "run_ms": t["taskMetrics"]["executorRunTime"], "duration_ms": t["duration"]}
            for t in tasks]


def _executor_python(log_dir: str):
    """In an executor's Python worker: where things come from, and numba's cache counters after
    reading the log dir with the library (hits: loaded from a cache; misses: compiled here)."""
    import os
    import sys as s

    import kafkalog_spark
    import pyspark
    from kafkalog_spark.log.reader import read_log

    rows = read_log(log_dir).num_rows
    hits = misses = 0
    for name, mod in list(s.modules.items()):
        if not name.startswith("kafkalog_spark.codec"):
            continue
        for obj in vars(mod).values():
            stats = getattr(obj, "stats", None)
            if stats is not None and hasattr(stats, "cache_hits"):
                hits += sum(stats.cache_hits.values())
                misses += sum(stats.cache_misses.values())
    return {"pid": os.getpid(), "executable": s.executable, "prefix": s.prefix,
            "kafkalog_spark": kafkalog_spark.__file__, "pyspark": pyspark.__file__,
            "rows": rows, "cache_hits": hits, "cache_misses": misses}


def main(log_dir: str, rounds: int, register: bool = False) -> dict:
    from kafkalog_spark.spark import register as register_source
    from kafkalog_spark.spark import session

    spark = session()
    if register:
        register_source(spark)
    sc = spark.sparkContext
    out: dict = {"master": sc.master, "driver_kafkalog_spark": __import__("kafkalog_spark").__file__,
                 "rounds": []}
    for r in range(rounds):
        group = f"round{r}"
        sc.setJobGroup(group, group)
        t = time.perf_counter()
        row = spark.read.format("kafkalog").load(log_dir).selectExpr(
            "count(*) AS n", "sum(offset) AS offsets", "sum(length(value)) AS bytes").collect()[0]
        wall = time.perf_counter() - t
        out["rounds"].append({"wall_s": wall, "rows": row["n"], "offsets": row["offsets"],
                              "bytes": row["bytes"],
                              "tasks": _scan_tasks(spark, group, time.monotonic() + 60)})
    sc.setJobGroup("info", "info")
    n = 2 * sc.defaultParallelism
    out["executors"] = sc.parallelize(range(n), n).map(
        lambda _, d=log_dir: _executor_python(d)).collect()
    spark.stop()
    return out


if __name__ == "__main__":
    res = main(sys.argv[1], int(sys.argv[2]), "register" in sys.argv[3:])
    print("SHIPPING " + json.dumps(res), flush=True)
