"""``migrate`` (Delta layer): Kafka log dirs into Delta tables, incremental and exactly-once.

One run, per table (:mod:`~kafkalog_spark.delta.plan` says which): take the table's migration
lock, delete what killed runs left, read the offsets the table has reached, plan
``[reached, log end)`` per partition, write the records as Parquet (this process table by
table, or one Spark job for every table of the run), and commit files plus new offsets in one
Delta commit per table (:mod:`~kafkalog_spark.delta.commit`). ``step(name)`` is called at each point a run can die —
``planned``, ``files-written``, ``before-commit``, ``committed`` — with the table path; tests
use it to kill a run there. The delta-spark writer, which writes and commits each Kafka partition
in one Spark write, calls ``before-commit`` and ``committed`` around each of them.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InvalidOptionError, Location, LogDirError
from ..log.model import LogDirs
from ..storage import as_path, storage_for, user_paths
from ..storage.paths import ObjectPath
from .commit import (begin_run, clean_killed_runs, commit, delta_table, end_run, migrated_offsets,
                     table_exists, table_lock)
from .history import RUN_ID_KEY, run_commits
from .options import MigrateOptions, parse_migrate_options
from .plan import SourceListing, TablePlan, plan_table, source_partitions

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PathLike = str | os.PathLike[str]
Step = Callable[[str, Path], None]
COMMIT_THREADS = 8  # tables committed at once after the Spark engine's job


def migrate(sources: PathLike | Sequence[PathLike], dest: PathLike, *,
            spark: "SparkSession | None" = None, dry_run: bool = False,
            step: Step | None = None, options: MigrateOptions | None = None,
            storage_options: Mapping[str, str] | None = None,
            source_storage_options: Mapping[str, str] | None = None,
            **kwargs: Any) -> dict:
    """Migrate the records of Kafka log dirs into Delta tables, continuing where the last run
    stopped.

    Parameters
    ----------
    sources : path or sequence of paths
        Log dirs (JBOD: several), or partition dirs.
    dest : path
        With ``layout="per-topic"`` a folder holding one table per topic (``dest/<topic>``);
        with ``layout="single"`` the table itself.
    spark : SparkSession, optional
        Runs the Spark engine (``engine="auto"``); without one the local engine runs.
    dry_run : bool
        Only plan: report per partition the offsets a run would migrate; write nothing.
    step : callable, optional
        ``step(name, table_path)`` at each point a run can be killed (see the module doc).
    storage_options : mapping, optional
        For ``s3://``, ``gs://``, ``abfss://`` paths: endpoint, region, credentials (the names
        delta-rs takes, :mod:`kafkalog_spark.storage.options`), for the destination and,
        unless ``source_storage_options`` are given, for the sources. Default with ``spark``:
        the session's ``spark.hadoop.fs.s3a.*`` settings
        (:func:`~kafkalog_spark.spark.session_storage_options`).
    source_storage_options : mapping, optional
        The sources' store options when they differ from the destination's.
    options : MigrateOptions, optional
        Parsed options; else ``kwargs`` are parsed (see
        :data:`~kafkalog_spark.delta.options.MIGRATE_OPTIONS`: ``topics``, ``topic_pattern``,
        ``layout``, ``partition_by``, ``include_headers``, ``include_metadata``,
        ``isolation_level``, ``decode_internal``, ``fail_on_data_loss``, ``app_id_prefix``,
        ``engine``, ``writer``).

    Returns
    -------
    dict
        Metrics: ``run_id``, ``engine``, ``writer``, ``dry_run``, ``records``, ``files``,
        ``commits``, ``data_loss`` (gaps, with ``fail_on_data_loss=False``), ``cleaned`` (files
        of killed runs deleted) and ``tables``: per table its path, new version (``None`` when
        nothing was committed), records, files and ``partitions`` ``{"topic-p": [start, end]}``.

    Raises
    ------
    DataLossError
        A partition's log start moved past the offset migrated (``fail_on_data_loss``).
    ConcurrentMigrationError
        Another run holds or changed a table.
    KafkaLogError
        Corrupt input (the first bad batch, located) or bad options.
    """
    opts = options if options is not None else parse_migrate_options(kwargs)
    if options is not None and kwargs:
        raise InvalidOptionError("give either options= or option keywords, not both")
    if storage_options is None and spark is not None:  # as a Spark user configured the store
        from ..spark import session_storage_options

        storage_options = session_storage_options(spark) or None
    srcs = user_paths(sources, storage_options if source_storage_options is None
                      else source_storage_options)
    engine = _engine(opts, spark)
    writers = _Writers(opts, spark, engine)
    run_id = f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:8]}"
    metrics: dict[str, Any] = {"run_id": run_id, "engine": engine, "writer": None,
                               "dry_run": dry_run, "records": 0, "files": 0, "commits": 0,
                               "data_loss": [], "cleaned": [], "tables": []}
    dest = as_path(dest, storage_options)
    with contextlib.ExitStack() as held:  # the migration lock of every table of the run
        planned: list[tuple[TablePlan, dict[str, int], str]] = []
        tables, listing = source_partitions(srcs, opts)
        for name, parts in sorted(tables.items()):
            path = dest / name if opts.layout == "per-topic" else dest
            app_ids = [opts.app_id(s.part.topic or "", s.part.partition or 0) for s in parts]
            if dry_run:
                plan = plan_table(path, parts, opts, migrated_offsets(path, app_ids))
                metrics["data_loss"] += plan.gaps
                metrics["tables"].append(_table_metrics(plan, writers.of(path), _Done()))
                continue
            storage_for(path).make_dirs(path, exist_ok=True)
            held.enter_context(table_lock(path, opts.single_writer))
            metrics["cleaned"] += [str(path / f) for f in
                                   clean_killed_runs(path, opts.killed_run_grace_s)]
            reached = migrated_offsets(path, app_ids)
            plan = plan_table(path, parts, opts, reached)
            metrics["data_loss"] += plan.gaps
            _step(step, "planned", path)
            planned.append((plan, reached, writers.of(path)))
        for (plan, _, writer), done in zip(planned, _run_tables(planned, opts, spark, run_id,
                                                                step, listing)):
            metrics["tables"].append(_table_metrics(plan, writer, done))
            metrics["records"] += done.records
            metrics["files"] += done.files
            metrics["commits"] += done.commits
    metrics["writer"] = writers.used(metrics["tables"])
    return metrics


def pending(metrics: dict) -> int:
    """How many partitions a run's ``metrics`` moved (a dry run's: would move) forward."""
    return sum(len(t["partitions"]) for t in metrics["tables"])


def _run_tables(planned: list[tuple[TablePlan, dict[str, int], str]], opts: MigrateOptions,
                spark: Any, run_id: str, step: Step | None, listing: SourceListing
                ) -> Iterator["_Done"]:
    """What was committed to each planned table, in order; the tables' reads are planned
    from ``listing``, what planning the run read of its sources. The Spark engine writes the
    files of every delta-rs table in one Spark job (a job per table cost ~1.7 s each: many
    small topics added up), then commits table by table; the local engine and the delta-spark
    writer go table by table."""
    if spark is None or opts.engine == "local":
        for plan, reached, writer in planned:
            yield _run_table(plan, opts, spark, writer, run_id, reached, step, listing.found)
        return
    from .spark_job import TableWrite, write_spark

    pending = [(plan, reached) for plan, reached, writer in planned
               if plan.pending and writer == "delta-rs"]
    jobs = [TableWrite(str(plan.path), str(begin_run(plan.path, run_id)), plan.schema,
                       plan.read_options(opts),
                       plan.path.options if isinstance(plan.path, ObjectPath) else None)
            for plan, _ in pending]
    written = write_spark(spark, jobs, opts.partition_by, run_id, listing)
    commits = _commits([partial(_commit_table, plan, files, opts, run_id, reached, step)
                        for (plan, reached), files in zip(pending, written)], step is None)
    for plan, reached, writer in planned:
        if writer == "delta-spark" or not plan.pending:
            yield _run_table(plan, opts, spark, writer, run_id, reached, step, listing.found)
        else:
            yield next(commits)


def _commits(calls: list[Callable[[], "_Done"]], at_once: bool) -> Iterator["_Done"]:
    """The results of the tables' commits ``calls``, in order. ``at_once``: up to
    :data:`COMMIT_THREADS` at a time — each table's commit is its own (its folder, its log,
    its offsets), and most of one is waiting on the store (a commit is several requests on
    an object store: a run of 50 small topics into S3 took 5.3 s committing one by one, 3.8
    s so); the first failure cancels those not started and is raised. Else (``step`` given:
    crash tests, progress) one after the other, as a run that dies at a step stops there."""
    if not at_once or len(calls) < 2:
        yield from (call() for call in calls)
        return
    pool = ThreadPoolExecutor(min(COMMIT_THREADS, len(calls)), "kafkalog-commit")
    try:
        for future in [pool.submit(call) for call in calls]:
            yield future.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _run_table(plan: TablePlan, opts: MigrateOptions, spark: Any, writer: str,
               run_id: str, reached: dict[str, int], step: Step | None, found: LogDirs
               ) -> "_Done":
    if not plan.pending:
        return _Done()
    read_options = plan.read_options(opts)
    if writer == "delta-spark":
        return _run_delta_spark(plan, read_options, opts, spark, run_id, step)
    begin_run(plan.path, run_id)
    from .files import write_local

    files = write_local(plan, read_options, opts.partition_by, run_id, found)
    return _commit_table(plan, files, opts, run_id, reached, step)


def _commit_table(plan: TablePlan, files: list, opts: MigrateOptions, run_id: str,
                  reached: dict[str, int], step: Step | None) -> "_Done":
    """Commit a table's written files with the offsets reached, after checking that every
    planned segment and written file is still there."""
    _step(step, "files-written", plan.path)
    _check_inputs(plan, files)
    versions = {opts.app_id(p.topic, p.partition): p.end for p in plan.pending}
    planned_from = {app: reached.get(app) for app in versions}
    extra = {"kafkalog.dataLoss": plan.gaps} if plan.gaps else None
    _step(step, "before-commit", plan.path)
    version = commit(plan.path, plan.schema, opts.partition_by, files, versions, planned_from,
                     run_id, extra)
    _step(step, "committed", plan.path)
    end_run(plan.path, run_id, committed=[f.path for f in files])
    return _Done(version, sum(f.records for f in files), len(files), 1)


def _run_delta_spark(plan: TablePlan, read_options: dict[str, str], opts: MigrateOptions,
                     spark: Any, run_id: str, step: Step | None) -> "_Done":
    """Append the table's pending partitions with delta-spark; what its commits say they
    wrote (an idempotent skip of a partition already recorded commits nothing)."""
    from .spark_job import write_delta_spark

    before = delta_table(plan.path).version() if table_exists(plan.path) else -1
    extra = {"kafkalog.dataLoss": plan.gaps} if plan.gaps else {}
    write_delta_spark(spark, plan, read_options, opts, {RUN_ID_KEY: run_id, **extra},
                      lambda name: _step(step, name, plan.path))
    if not table_exists(plan.path):
        return _Done()
    table = delta_table(plan.path)
    made = run_commits(table.history(table.version() - before), before, run_id)
    counted = [c.get("operationMetrics") or {} for c in made]
    return _Done(made[-1]["version"] if made else None,
                 sum(int(m.get("numOutputRows", 0)) for m in counted),
                 sum(int(m.get("numFiles", 0)) for m in counted), len(made))


@dataclass(frozen=True)
class _Done:
    """What one table's part of a run committed."""

    version: int | None = None  # the table's version after the run (None: no commit)
    records: int = 0
    files: int = 0
    commits: int = 0


def _table_metrics(plan: TablePlan, writer: str, done: _Done) -> dict:
    return {"path": str(plan.path), "writer": writer, "version": done.version,
            "records": done.records, "files": done.files,
            "partitions": {f"{p.topic}-{p.partition}": [p.start, p.end] for p in plan.pending},
            "up_to_date": [f"{p.topic}-{p.partition}" for p in plan.partitions if not p.pending]}


def _check_inputs(plan: TablePlan, files: list) -> None:
    """Refuse to commit when a planned segment or a written data file is gone: a segment
    removed while the run read (retention, a hand-made cleanup) would leave a hole the
    recorded offsets would hide forever, and an ``add`` of a missing file breaks the table.
    Nothing is committed; the run's files are deleted by the next run."""
    logs = [as_path(log, plan.source_storage) for p in plan.pending for log in p.segments]
    missing = [(str(log), "segment") for log in _gone(logs)]
    fs = storage_for(plan.path)  # a file each: the table's folder may hold many more
    missing += [(str(plan.path / f.path), "data file") for f in files
                if not fs.exists(plan.path / f.path)]
    if missing:
        where, what = missing[0]
        raise LogDirError(f"a {what} vanished while migrating ({len(missing)} file(s) in all); "
                          f"nothing was committed to {plan.path}: run again once the files are "
                          f"stable", Location(where))


def _gone(segments: list) -> list:
    """Those of ``segments`` that are not there, from one listing per partition dir (not a
    stat, or on an object store a HEAD request, per segment: a run over 4,146 segments sent as
    many)."""
    by_folder: dict[Any, list] = {}
    for path in segments:
        by_folder.setdefault(path.parent, []).append(path)
    gone = []
    for folder, inside in by_folder.items():
        try:
            names = set(storage_for(folder).listdir(folder))
        except FileNotFoundError:
            names = set()
        gone += [p for p in inside if p.name not in names]
    return gone


def _step(step: Step | None, name: str, path: Path) -> None:
    if step is not None:
        step(name, path)


def _engine(opts: MigrateOptions, spark: Any) -> str:
    if opts.engine == "spark" and spark is None:
        raise InvalidOptionError("engine='spark' needs a SparkSession (spark=...)")
    if opts.engine == "auto":
        return "spark" if spark is not None else "local"
    return opts.engine


class _Writers:
    """Which writer each table of a run gets. ``delta-rs`` unless asked otherwise: one Spark
    job writes every table's Parquet with pyarrow and one commit per table follows (8.6x
    faster than delta-spark's job and commit per Kafka partition on a 1 GB log: docs/delta.md);
    ``auto`` takes delta-spark only for an existing table with a feature delta-rs cannot write
    (deletion vectors, ...: :func:`~.features.unwritable`)."""

    def __init__(self, opts: MigrateOptions, spark: Any, engine: str) -> None:
        self.asked = opts.writer
        self.spark = spark if engine == "spark" and opts.writer != "delta-rs" else None
        self._jars: bool | None = None
        if opts.writer == "delta-spark" and not self.jars():
            raise InvalidOptionError("writer='delta-spark' needs the Spark engine with the "
                                     "Delta jars on the classpath (see docs/delta.md); use "
                                     "writer='delta-rs'")

    def jars(self) -> bool:
        """Whether delta-spark can write: asked of the JVM once, and with ``auto`` only when a
        table needs it (py4j round trips before the run's first task)."""
        if self._jars is None:
            self._jars = False
            if self.spark is not None:
                from .spark_job import delta_jars_available

                self._jars = delta_jars_available(self.spark)
        return self._jars

    def of(self, path: Path) -> str:
        """The writer of the table at ``path``; refuses delta-rs for a table it cannot write."""
        if self.asked == "delta-spark":
            return "delta-spark"
        from .features import refusal, unwritable

        features = unwritable(path) if table_exists(path) else []
        if not features:
            return "delta-rs"
        if self.asked == "auto" and self.jars():
            return "delta-spark"
        raise InvalidOptionError(refusal(path, features, "write", "migrate it with writer "
                                         "auto or delta-spark on a Spark session with the "
                                         "Delta jars (docs/delta.md)"))

    def used(self, tables: list[dict]) -> str:
        """The run's writer: the one its tables used (both, joined by ``+``, when they
        differed); with no table, the one asked for (``auto``: delta-rs)."""
        found = sorted({t["writer"] for t in tables})
        return "+".join(found) if found else ("delta-rs" if self.asked == "auto" else self.asked)
