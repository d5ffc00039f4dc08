"""Where a local session's Python workers come from (a layer below the session helper): which
daemon forks them, and pyspark imported from the installed package rather than Spark's zip.

The daemon is :mod:`kafkalog_spark.daemon`: pyspark's, after putting the installed pyspark
ahead of Spark's ``pyspark.zip`` where both are the same files (:func:`prefer_installed_pyspark`,
here) and after loading the package's task code once.

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on the path of every Python process it
starts (the daemon, each worker it forks, the driver under spark-submit). Python does not cache
the bytecode of modules imported from a zip, so each of those processes compiled pyspark's
worker modules anew: about 0.5 s of CPU each (0.7 s against 0.15 s from the installed
package's bytecode), paid by every worker of a cold job. :func:`workers_import_this_package`
says where the session helper may choose the daemon.

The daemon reaches only the workers. The other Python processes Spark starts — the driver under
spark-submit and the planning processes of a Python data source (its lookup, schema, read plan,
write set-up and commit: each a process of its own, started by pyspark's daemon whatever
``spark.python.daemon.module`` says) — get the same move from ``kafkalog_spark_pyspark.pth``,
which pip installs beside the package: it calls :func:`at_python_start` in a process that has a
``pyspark.zip`` on its path and has not imported pyspark (about 0.8 s less for each of them).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import shutil
import sys
from pathlib import Path

from .storage import LOCAL

DAEMON_CONF = "spark.python.daemon.module"
DAEMON_MODULE = "kafkalog_spark.daemon"


def prefer_installed_pyspark() -> bool:
    """Import pyspark from the installed package rather than ``pyspark.zip`` when both are
    the same files: moves ``$SPARK_HOME/python/lib/pyspark.zip`` to the end of ``sys.path``
    where it is the zip inside the installed pyspark (pip's pyspark, whose ``SPARK_HOME`` is
    that package; module docstring). Does nothing once pyspark is imported, or when the zip
    belongs to another Spark installation. Returns whether it moved one."""

    zips = [p for p in sys.path if Path(p).name == "pyspark.zip"]
    if not zips or "pyspark" in sys.modules:
        return False
    spec = importlib.machinery.PathFinder.find_spec(
        "pyspark", [p for p in sys.path if p not in zips])
    if spec is None or not spec.submodule_search_locations:
        return False
    own = Path(spec.submodule_search_locations[0]) / "python" / "lib" / "pyspark.zip"
    if not LOCAL.is_file(own):
        return False
    moved = [z for z in zips if LOCAL.is_file(z) and LOCAL.resolve(z) == LOCAL.resolve(own)]
    for z in moved:
        sys.path.remove(z)
        sys.path.append(z)
    return bool(moved)


def at_python_start() -> None:
    """:func:`prefer_installed_pyspark` for ``kafkalog_spark_pyspark.pth`` (module docstring),
    which runs it as Python starts. It must never stop a process from starting: should it fail,
    the process imports pyspark from the zip, as it would without this package."""
    try:
        prefer_installed_pyspark()
    except Exception:  # noqa: BLE001 - see the docstring
        pass


def workers_import_this_package(configured: dict[str, str]) -> bool:
    """Whether a local master's Python workers can run :data:`DAEMON_MODULE`: nothing chose
    a daemon, they run this interpreter, and this package comes from a file on its path (not
    from ``--py-files``, which reach a worker only once its task runs)."""
    python = configured.get("spark.pyspark.python") or os.environ.get("PYSPARK_PYTHON")
    python = shutil.which(python) if python else None
    spec = importlib.util.find_spec("kafkalog_spark")
    # the same bin folder: the same virtualenv (a venv's python links to its base interpreter,
    # which other venvs without this package share)
    return (DAEMON_CONF not in configured and not configured.get("spark.submit.pyFiles")
            and python is not None
            and LOCAL.resolve(Path(python).parent) == LOCAL.resolve(Path(sys.executable).parent)
            and spec is not None and spec.origin is not None and LOCAL.is_file(spec.origin))
