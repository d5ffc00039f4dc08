"""numba's compile cost on fresh executors, per way of shipping the package (issue 14.4).

Starts its own standalone cluster (2 workers x 1 core, tests/cluster.py), builds what each route
ships (tests/shipping.py), then submits tests/shipping_job.py once per variant: ROUNDS reads of
a small log dir (4 partitions, 20,000 lz4 records) through format("kafkalog"). Every submit is a
new application, so its executors and their Python workers are fresh processes. Reported per
variant: each executor's first scan task (executorRunTime from Spark's REST API) against the
median scan task of rounds 3+, and numba's cache hits/misses in the executors afterwards.

    .venv/bin/python benchmarks/bench_shipping.py [--rounds 5] [--only a_cold,b_warm,...]

Variants: a_cold / a_warm (package installed; NUMBA_CACHE_DIR on executors empty, then the same
dir again), b_cold / b_warm (packed venv via --archives, packed before / after
``python -m kafkalog_spark.warmup``), c_zip (--py-files; numba caches a zip's kernels under
~/.cache/numba). A wheel in --py-files is not a route (PySpark puts only .zip/.egg/.jar
py-files on the executors' path: tests/test_cluster_shipping.py), so it is not measured.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import shipping  # noqa: E402
from cluster import StandaloneCluster, spark_home, spark_submit  # noqa: E402

VARIANTS = ("a_cold", "a_warm", "b_cold", "b_warm", "c_zip")


def _submit(cluster, log_dir, rounds, conf=None, submit_args=None, env=None) -> dict:
    done = spark_submit(shipping.JOB, str(log_dir), str(rounds), master=cluster.url,
                        conf={"spark.ui.enabled": "true", **(conf or {})},
                        submit_args=submit_args, env=env)
    cluster.wait_idle()
    return shipping.result(done)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", default=",".join(VARIANTS))
    args = ap.parse_args()
    only = args.only.split(",")
    with tempfile.TemporaryDirectory(prefix="bench-shipping-") as tmp:
        root = Path(tmp)
        log_dir = shipping.make_log_dir(root / "kafka-logs")
        wheel = shipping.build_wheel(root / "wheel")
        builds: dict[str, object] = {}
        if "b_cold" in only or "b_warm" in only:
            venv = root / "exec-venv"
            py = shipping.build_venv(venv, wheel)
            builds["b_cold"] = shipping.pack(venv, root / "cold.tar.gz")
            shipping.warm_up(py)
            builds["b_warm"] = shipping.pack(venv, root / "warm.tar.gz")
        if "c_zip" in only:
            deps = str(shipping.build_venv(root / "deps-venv", None))
        cluster = StandaloneCluster(root / "cluster", workers=2)
        rows = []
        try:
            cluster.start()
            for v in [v for v in VARIANTS if v in only]:
                if v.startswith("a_"):
                    res = _submit(cluster, log_dir, args.rounds, conf={
                        "spark.executorEnv.NUMBA_CACHE_DIR": str(root / "numba-cache")})
                elif v.startswith("b_"):
                    res = _submit(cluster, log_dir, args.rounds, conf={
                        "spark.pyspark.python": "./environment/bin/python",
                        "spark.pyspark.driver.python": sys.executable},
                        submit_args=["--archives", f"{builds[v]}#environment"])
                else:
                    art = shipping.build_zip(root / "kafkalog_spark.zip")
                    res = _submit(cluster, log_dir, args.rounds,
                                  conf={"spark.executorEnv.XDG_CACHE_HOME": str(root / v)},
                                  submit_args=["--py-files", str(art)],
                                  env={"PYSPARK_PYTHON": deps, "PYSPARK_DRIVER_PYTHON": deps,
                                       "SPARK_HOME": spark_home()})
                s = shipping.first_vs_steady(res)
                s["cache_hits"] = [e["cache_hits"] for e in res["executors"]]
                s["cache_misses"] = [e["cache_misses"] for e in res["executors"]]
                rows.append((v, s))
                print(v, json.dumps(s), flush=True)
        finally:
            cluster.stop()
    print("\n| variant | first scan task per executor (ms) | steady-state task, median (ms) | "
          "round 1 wall (s) | later rounds wall (s) | numba cache hits / misses (executors) |")
    print("|---|---|---:|---:|---|---|")
    for v, s in rows:
        firsts = ", ".join(str(ms) for ms in s["first_ms"].values())
        print(f"| {v} | {firsts} | {s['steady_median_ms']} | {s['round_wall_s'][0]} | "
              f"{', '.join(map(str, s['round_wall_s'][1:]))} | "
              f"{sum(s['cache_hits'])} / {sum(s['cache_misses'])} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
