"""Build what the shipping routes send to executors (tests/test_cluster_shipping.py,
benchmarks/bench_shipping.py): a wheel and a zip of the package, a small virtualenv with the
package and its executor-side dependencies (no pyspark: executors import Spark's own
``python/lib/pyspark.zip``), packed with venv-pack; and the small log dir the jobs read.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
JOB = Path(__file__).resolve().parent / "shipping_job.py"
# what an executor's Python needs to run the package's tasks (pyproject's dependencies less
# pyspark, which Spark puts on executors itself, and the Delta libraries, driver-side only)
EXECUTOR_DEPS = ("numpy", "numba", "llvmlite", "pyarrow", "crc32c", "lz4", "python-snappy",
                 "cramjam", "zstandard", "xxhash", "click")


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    done = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if done.returncode != 0:
        raise AssertionError(f"{cmd} failed ({done.returncode}):\n{done.stdout[-3000:]}\n"
                             f"{done.stderr[-3000:]}")
    return done


def build_wheel(out_dir: Path) -> Path:
    """``pip wheel --no-deps .`` on a clean copy of the sources (setuptools' ``build/`` in the
    checkout could hold stale modules, and the checkout stays untouched)."""
    src = out_dir / "src"
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for top in ("kafkalog_spark", "pyspark_kafkalog"):
        shutil.copytree(REPO / top, src / top, ignore=skip)
    for f in ("pyproject.toml", "setup.py", "kafkalog_spark_pyspark.pth", "README.md"):
        shutil.copy2(REPO / f, src / f)
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out_dir), str(src)])
    return next(out_dir.glob("kafkalog_spark-*.whl"))


def build_zip(path: Path) -> Path:
    """A zip of the two top-level packages (``kafkalog_spark``, ``pyspark_kafkalog``) for
    ``--py-files``: sources only, no ``__pycache__``."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for top in ("kafkalog_spark", "pyspark_kafkalog"):
            for f in sorted((REPO / top).rglob("*")):
                if f.is_file() and "__pycache__" not in f.parts and f.suffix in (".py", ".typed"):
                    z.write(f, f.relative_to(REPO).as_posix())
    return path


def pins() -> list[str]:
    """The executor dependencies at the versions this venv has (pip then takes them from its
    cache)."""
    return [f"{name}=={metadata.version(name)}" for name in EXECUTOR_DEPS]


def _pip_install(py: Path, *args: str) -> None:
    """This venv's pip installing into the venv of ``py`` (``pip --python``: the venvs need no
    pip of their own)."""
    _run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q",
          "--disable-pip-version-check", *args])


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:  # another file system
        shutil.copy2(src, dst)


def build_venv(path: Path, wheel: Path | None, base: Path | None = None) -> Path:
    """``python -m venv`` + the executor dependencies (+ the package's wheel, without its
    dependencies: no pyspark); returns the venv's python. ``base``: a venv built here without
    the wheel, whose installed dependencies are hard-linked in instead of installed again."""
    _run([sys.executable, "-m", "venv", "--without-pip", str(path)])
    py = path / "bin" / "python"
    if base is None:
        _pip_install(py, *pins())
    else:
        # nothing writes into a linked file (pip, Python, numba add files): base stays as is
        site = next(base.glob("lib/python*/site-packages"))
        shutil.copytree(site, path / site.relative_to(base), copy_function=_link_or_copy,
                        dirs_exist_ok=True)
    if wheel is not None:
        _pip_install(py, "--no-deps", str(wheel))
    return py


def warm_up(py: Path) -> None:
    """``python -m kafkalog_spark.warmup`` in that venv: numba's cache lands in the installed
    package's ``__pycache__`` folders, so it travels in the archive."""
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "PYTHONPATH")}
    _run([str(py), "-m", "kafkalog_spark.warmup"], env=env, cwd=py.parent)


def pack(venv: Path, out: Path) -> Path:
    """``venv-pack -p VENV -o OUT`` (fast gzip level 1) (venv-pack installed in the test venv)."""
    _run([sys.executable, "-m", "venv_pack", "-p", str(venv), "-o", str(out), "-q",
          "--compress-level", "1"])
    return out


def cache_files(venv: Path) -> int:
    """How many numba cache files the installed package holds."""
    return sum(1 for _ in venv.glob("lib/python*/site-packages/kafkalog_spark/**/*.nbc"))


def make_log_dir(path: Path, partitions: int = 4, records: int = 20_000) -> Path:
    """A small log dir: ``partitions`` partitions of one topic, lz4 batches of 500 records."""
    import pyarrow as pa

    from kafkalog_spark.log.writer import write_log

    table = pa.table({"partition": pa.array([i % partitions for i in range(records)], pa.int32()),
                      "key": pa.array([f"k{i % 97}".encode() for i in range(records)]),
                      "value": pa.array([bytes([i % 251]) * 64
                                         for i in range(records)])})
    write_log(table, path, topic="ship", codec="lz4", max_batch_records=500)
    return path


def first_error(output: str, width: int = 4000) -> str:
    """The first Python traceback in spark-submit's output (the tail is mostly shutdown)."""
    at = output.find("Traceback (most recent call last)")
    return output[at:at + width] if at >= 0 else output[-width:]


def result(done: subprocess.CompletedProcess) -> dict:
    """The job's ``SHIPPING {json}`` line."""
    line = [x for x in done.stdout.splitlines() if x.startswith("SHIPPING ")][-1]
    return json.loads(line[len("SHIPPING "):])


def first_vs_steady(res: dict) -> dict:
    """Per executor, its first scan task's run time (round 0) against the median of its tasks
    in rounds 2 and later (ms)."""
    firsts: dict[str, int] = {}
    for t in sorted(res["rounds"][0]["tasks"], key=lambda t: t["launch"]):
        firsts.setdefault(t["executor"], t["run_ms"])
    steady = sorted(t["run_ms"] for r in res["rounds"][2:] for t in r["tasks"])
    return {"first_ms": firsts, "steady_median_ms": steady[len(steady) // 2] if steady else None,
            "round_wall_s": [round(r["wall_s"], 2) for r in res["rounds"]],
            "tasks_per_round": len(res["rounds"][0]["tasks"])}
