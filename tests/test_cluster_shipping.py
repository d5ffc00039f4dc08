"""Shipping the package to executors, the standard ways, on the standalone cluster (issue 14.4):

(a) the package installed in the executors' Python (what the ``spark_cluster`` fixture does);
(b) a packed virtualenv: ``--archives venv.tar.gz#environment`` with
    ``spark.pyspark.python=./environment/bin/python``, numba's cache warmed before packing;
(c) ``--py-files`` with a zip, or a wheel, of the package for executors whose Python has the
    dependencies but not the package (and a driver likewise: ``pyspark_kafkalog`` discovery
    must find the data source in the zip).

Each submits ``tests/shipping_job.py`` with the real spark-submit, reads a small log dir
through ``format("kafkalog")`` and compares with the local engine's read of the same dir.
"""

from __future__ import annotations

import sys
import zipfile
import zipimport
from pathlib import Path

import pytest

import shipping
from cluster import spark_home, spark_submit

pytestmark = [pytest.mark.spark, pytest.mark.cluster]

ROUNDS = 3
# short-lived JVMs start much sooner with the C1 compiler alone (about a third off a submit)
QUICK_JVM = {f"spark.{side}.extraJavaOptions": "-XX:TieredStopAtLevel=1"
             for side in ("driver", "executor")}


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory) -> Path:
    return shipping.make_log_dir(tmp_path_factory.mktemp("ship") / "kafka-logs")


@pytest.fixture(scope="module")
def expected(log_dir) -> dict:
    """What the local engine reads from the log dir."""
    import pyarrow.compute as pc

    from kafkalog_spark.log.reader import read_log

    t = read_log(log_dir)
    return {"rows": t.num_rows, "offsets": pc.sum(t["offset"]).as_py(),
            "bytes": pc.sum(pc.binary_length(t["value"])).as_py()}


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory) -> dict[str, Path]:
    """A wheel and a zip of the package, and a venv with only its executor dependencies
    (route b's venv links them from it)."""
    root = tmp_path_factory.mktemp("artifacts")
    return {"wheel": shipping.build_wheel(root / "wheel"),
            "zip": shipping.build_zip(root / "kafkalog_spark.zip"),
            "deps_python": shipping.build_venv(root / "deps-venv", wheel=None)}


def _submit(cluster, log_dir, *job_args: str, **kw) -> dict:
    conf = {"spark.ui.enabled": "true", **QUICK_JVM, **kw.pop("conf", {})}
    done = spark_submit(shipping.JOB, str(log_dir), str(ROUNDS), *job_args, master=cluster.url,
                        conf=conf, check=False, **kw)
    cluster.wait_idle()
    if done.returncode != 0:
        log = Path(str(log_dir) + ".submit.log")
        log.write_text(done.stdout + "\n" + done.stderr)
        raise AssertionError(f"spark-submit failed ({done.returncode}), output in {log}:\n"
                             + shipping.first_error(done.stdout + done.stderr))
    return shipping.result(done)


def _check_reads(res: dict, expected: dict) -> None:
    assert len(res["rounds"]) == ROUNDS
    for r in res["rounds"]:
        assert {k: r[k] for k in expected} == expected
    # the scan ran as tasks on both executors
    assert len({t["executor"] for r in res["rounds"] for t in r["tasks"]}) == 2
    for e in res["executors"]:
        assert e["rows"] == expected["rows"]


def test_route_a_package_installed_on_executors(spark_cluster, log_dir, expected):
    """(a) Executors run the venv's python, which has the package installed: the data source
    and the library load from the checkout in every executor process."""
    res = _submit(spark_cluster, log_dir)
    print("route a:", shipping.first_vs_steady(res))
    _check_reads(res, expected)
    for e in res["executors"]:
        assert Path(e["executable"]).parent == Path(sys.executable).parent
        assert e["kafkalog_spark"].startswith(str(shipping.REPO / "kafkalog_spark"))


@pytest.mark.slow
def test_route_b_packed_virtualenv(spark_cluster, log_dir, expected, artifacts, tmp_path):
    """(b) A venv with the wheel and the executor dependencies (no pyspark), warmed up, packed
    with venv-pack and sent with --archives: executors run ./environment/bin/python, import the
    package from the archive and pyspark from Spark's own pyspark.zip, and load every kernel
    from the numba cache that travelled in the archive (no compile on the executor)."""
    venv = tmp_path / "exec-venv"
    py = shipping.build_venv(venv, artifacts["wheel"], base=artifacts["deps_python"].parents[1])
    shipping.warm_up(py)
    assert shipping.cache_files(venv) > 0
    # the wheel's start-up hook lands beside the package (without a pyspark here, it moves
    # nothing: the executors below import Spark's zip)
    assert [p.parent.name for p in venv.glob("lib/python*/site-packages/*.pth")
            if p.name == "kafkalog_spark_pyspark.pth"] == ["site-packages"]
    archive = shipping.pack(venv, tmp_path / "venv.tar.gz")
    res = _submit(spark_cluster, log_dir,
                  conf={"spark.pyspark.python": "./environment/bin/python",
                        "spark.pyspark.driver.python": sys.executable},
                  submit_args=["--archives", f"{archive}#environment"])
    print("route b (warm cache shipped):", shipping.first_vs_steady(res),
          [(e["cache_hits"], e["cache_misses"]) for e in res["executors"]])
    _check_reads(res, expected)
    assert res["driver_kafkalog_spark"].startswith(str(shipping.REPO))  # its own python
    for e in res["executors"]:
        assert "/environment" in e["prefix"] and not e["prefix"].startswith(str(venv)), e
        assert "/environment/lib/python" in e["kafkalog_spark"], e
        assert e["pyspark"].startswith(f"{spark_home()}/python/lib/pyspark.zip/"), e
        assert e["cache_misses"] == 0 and e["cache_hits"] > 0, e


def _route_c(cluster, log_dir, artifacts, artifact: Path, cache_home: Path, *job_args: str,
             conf: dict[str, str] | None = None) -> dict:
    deps = str(artifacts["deps_python"])
    return _submit(cluster, log_dir, *job_args, submit_args=["--py-files", str(artifact)],
                   conf={"spark.executorEnv.XDG_CACHE_HOME": str(cache_home), **(conf or {})},
                   # spark-submit looks for SPARK_HOME with the driver's python, which has
                   # no pyspark here: name it (as with a Spark distribution)
                   env={"PYSPARK_PYTHON": deps, "PYSPARK_DRIVER_PYTHON": deps,
                        "SPARK_HOME": spark_home()})


def test_route_c_py_files_zip(spark_cluster, log_dir, expected, artifacts, tmp_path):
    """(c) --py-files kafkalog_spark.zip, driver and executors on a python without the
    package: session() registers the data source itself (PySpark's own pyspark_* discovery
    finds it through the zip on the driver but gives the executors' read tasks no --py-files);
    numba caches the zip's kernels in the user's cache dir."""
    res = _route_c(spark_cluster, log_dir, artifacts, artifacts["zip"], tmp_path / "cache")
    print("route c (zip):", shipping.first_vs_steady(res),
          [(e["cache_hits"], e["cache_misses"]) for e in res["executors"]])
    _check_reads(res, expected)
    assert "kafkalog_spark.zip/kafkalog_spark" in res["driver_kafkalog_spark"]
    for e in res["executors"]:
        assert e["executable"] == str(artifacts["deps_python"])
        assert "kafkalog_spark.zip/kafkalog_spark" in e["kafkalog_spark"], e
    assert list((tmp_path / "cache" / "numba").rglob("*.nbi")), "no numba cache written"


def test_route_c_py_files_wheel_is_not_a_route(spark_cluster, log_dir, artifacts, tmp_path):
    """(c) --py-files with a .whl: PySpark 4.2 puts only .zip/.egg/.jar py-files on the
    executors' path (SparkContext.PACKAGE_EXTENSIONS), so the read tasks cannot import the
    package. The driver imports it from the wheel (numba could not cache there: the codec's
    njit drops cache=True instead of raising at import) and its warning names the routes that
    work; the job fails rather than returning anything."""
    with pytest.raises(AssertionError) as failed:
        _route_c(spark_cluster, log_dir, artifacts, artifacts["wheel"], tmp_path / "cache",
                 "register", conf={"spark.task.maxFailures": "1"})
    output = Path(str(log_dir) + ".submit.log").read_text()
    assert "No module named 'kafkalog_spark'" in str(failed.value)
    assert "where numba cannot cache compiled kernels" in output
    assert "put a .zip (not a wheel) in --py-files" in output


def test_cacheable_decides_by_where_the_module_is(tmp_path):
    """The codec's njit caches for source files and zips, never for a wheel on sys.path."""
    from numba.core import caching

    from kafkalog_spark.codec import _jit

    assert _jit.cacheable(_jit.__spec__) and _jit.CACHEABLE
    specs = {}
    for name in ("pkg.zip", "pkg-0.1-py3-none-any.whl"):
        with zipfile.ZipFile(tmp_path / name, "w") as z:
            z.writestr("mod.py", "x = 1\n")
        specs[name] = zipimport.zipimporter(str(tmp_path / name)).find_spec("mod")
    assert _jit.cacheable(specs["pkg.zip"]) == hasattr(caching, "ZipCacheLocator")
    assert not _jit.cacheable(specs["pkg-0.1-py3-none-any.whl"])
