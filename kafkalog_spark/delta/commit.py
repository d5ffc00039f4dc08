"""Delta commits with delta-rs (Delta layer): adopt Parquet files written by a run, atomically.

A run writes its Parquet files inside the table directory under names that carry its run id
(``part-kafkalog-<run id>-<n>.snappy.parquet``) and leaves a marker
``_kafkalog/runs/<run id>`` while it works. Nothing it writes is visible until one Delta commit
adds the files *and* the new application-transaction versions (the offsets reached) together:
``deltalake``'s :func:`create_table_with_add_actions` for a new table,
``DeltaTable.create_write_transaction`` for an existing one. A run killed before that commit
leaves files no Delta reader sees; the next run finds the marker, confirms the run never
committed, and deletes its files before planning. Columns new to the table (a topic that gained
headers or metadata columns) are added with ``alter.add_columns`` first; older files read them
as null.

Runs on one table are serialised by an ``flock`` on ``_kafkalog/migrate.lock``; a run also
checks, just before committing, that the versions it planned from are still the table's.
"""

from __future__ import annotations

import importlib
import json
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import KafkaLogError, Location
from ..storage import is_local, storage_for
from ..storage.atomic import atomic_write_text
from ..storage.options import for_delta_rs
from ..storage.paths import ObjectPath
from .history import RUN_ID_KEY, run_id_of

STATE_DIR = "_kafkalog"  # leading underscore: Delta readers and VACUUM leave it alone
FILE_PREFIX = "part-kafkalog-"
_HISTORY_LOOKBACK = 1000  # commits searched for a killed run's id


class ConcurrentMigrationError(KafkaLogError):
    """Another migration holds the table, or committed to it while this run was working."""


@dataclass(frozen=True)
class DataFile:
    """One Parquet file of a run, relative to the table root, with its Delta partition values."""

    path: str
    partition_values: dict[str, str | None]
    size: int
    records: int
    stats: str


def delta_options(path: Path | ObjectPath) -> dict[str, str] | None:
    """delta-rs ``storage_options`` for a table at ``path``: an object-store path's own options
    in delta-rs's names (:func:`~kafkalog_spark.storage.options.for_delta_rs`), else none."""
    if isinstance(path, ObjectPath):
        return for_delta_rs(path.store, path.options, path.account)
    return None


def delta_table(path: Path | ObjectPath):
    """The ``deltalake.DeltaTable`` at ``path`` (local or on an object store)."""
    from deltalake import DeltaTable

    return DeltaTable(str(path), storage_options=delta_options(path))


def table_exists(path: Path) -> bool:
    """Whether ``path`` holds a Delta table (a ``_delta_log`` with a commit). A local folder
    without ``_delta_log`` holds none: known without loading ``deltalake`` (0.14 s, a migration
    into new tables asks before its job starts)."""
    fs = storage_for(path)
    if is_local(fs) and not fs.is_dir(path / "_delta_log"):
        return False
    from deltalake import DeltaTable

    return DeltaTable.is_deltatable(str(path), storage_options=delta_options(path))


def load_in_background() -> None:
    """Import what the commits need in a thread, while the caller waits on a Spark job (a
    driver blocked in py4j holds no GIL): the commits after the job start at once. A failed
    import says nothing here: the commit's own import raises it, typed, in the caller."""
    threading.Thread(target=_import_quietly, args=("deltalake.transaction",),
                     name="kafkalog-import-deltalake", daemon=True).start()


def _import_quietly(module: str) -> None:
    with suppress(Exception):
        importlib.import_module(module)


def migrated_offsets(path: Path, app_ids: list[str]) -> dict[str, int]:
    """``{app id: version}`` of the application transactions the table has recorded."""
    if not table_exists(path):
        return {}
    table = delta_table(path)
    out = {}
    for app_id in app_ids:
        version = table.transaction_version(app_id)
        if version is not None:
            out[app_id] = int(version)
    return out


@contextmanager
def table_lock(path: Path, single_writer: bool = False) -> Iterator[None]:
    """Hold the table's migration lock (non-blocking: a second run fails at once).

    An object store has no lock: there a run relies on the commit alone, which writes the next
    version file only if it does not exist yet (the store's conditional write) and fails
    otherwise; :func:`require_conditional_commits` checks the store honours that, unless
    ``single_writer`` accepts the risk."""
    fs = storage_for(path)
    if not is_local(fs):
        if not single_writer:
            require_conditional_commits(path)
        yield
        return
    state = path / STATE_DIR
    fs.make_dirs(state, exist_ok=True)
    fd = fs.lock(state / "migrate.lock", record=False)  # a BSD flock
    if fd is None:
        raise ConcurrentMigrationError("another migration is writing this table",
                                       Location(str(path)))
    try:
        yield
    finally:
        fs.unlock(fd)  # closing drops the flock


_CONDITIONAL: dict[tuple, bool] = {}  # per store, bucket and options: probed once per process


def require_conditional_commits(path: ObjectPath) -> None:
    """Refuse a store that does not make a Delta commit exclusive.

    Probed once per bucket: on a scratch table under the table's ``_kafkalog`` folder, two
    writers that both read version 0 commit version 1; the store must refuse the second
    (``If-None-Match`` on S3, generation preconditions on GCS, ``If-None-Match`` on Azure).

    Raises
    ------
    ConcurrentMigrationError
        The store accepted both commits: concurrent runs could lose each other's commits. The
        message names ``single_writer``, the option that accepts that risk.
    """
    key = (path.store, path.account, path.bucket, tuple(sorted(path.options.items())))
    if key not in _CONDITIONAL:
        _CONDITIONAL[key] = _probe_conditional_commits(path / STATE_DIR / f"probe-{uuid.uuid4().hex}")
    if not _CONDITIONAL[key]:
        raise ConcurrentMigrationError(
            "this store does not refuse a second commit of the same Delta version (no "
            "conditional writes), so two runs on one table could silently lose a commit; run "
            "one migration at a time per table and set single_writer=True (--single-writer) to "
            "accept that", Location(str(path)))


def _probe_conditional_commits(probe: ObjectPath) -> bool:
    from deltalake import Schema
    from deltalake.exceptions import CommitFailedError
    from deltalake.transaction import CommitProperties, create_table_with_add_actions

    schema = pa.schema([pa.field("x", pa.int64())])
    once = CommitProperties(max_commit_retries=0)
    try:
        create_table_with_add_actions(str(probe), Schema.from_arrow(schema), [],
                                      storage_options=delta_options(probe))
        first, second = delta_table(probe), delta_table(probe)
        first.create_write_transaction([], "append", schema, commit_properties=once)
        try:
            second.create_write_transaction([], "append", schema, commit_properties=once)
        except CommitFailedError:
            return True
        return False
    finally:
        storage_for(probe).remove_tree(probe, ignore_errors=True)


def begin_run(path: Path, run_id: str) -> Path:
    """Leave the marker of a run in progress; returns the run's staging folder (for engines
    that write elsewhere first)."""
    runs, staging = path / STATE_DIR / "runs", path / STATE_DIR / "staging" / run_id
    fs = storage_for(runs)
    fs.make_dirs(runs, exist_ok=True)
    atomic_write_text(runs / run_id, json.dumps({"run_id": run_id, "started": time.time()}))
    fs.make_dirs(staging, exist_ok=True)
    return staging


def end_run(path: Path, run_id: str, committed: Sequence[str] | None = None) -> None:
    """Drop the marker and staging folder of a run (committed, or nothing to commit). On an
    object store, where Spark attempts write into the table itself, the run's data files that
    were not ``committed`` (failed or speculative attempts) are deleted too."""
    fs = storage_for(path)
    if committed is not None and not is_local(fs):
        keep = set(committed)
        for f in fs.glob(path, f"**/{FILE_PREFIX}{run_id}-*"):
            rel = str(f.relative_to(path))
            if rel not in keep and STATE_DIR not in f.relative_to(path).parts:
                fs.remove(f, missing_ok=True)
    fs.remove_tree(path / STATE_DIR / "staging" / run_id, ignore_errors=True)
    fs.remove(path / STATE_DIR / "runs" / run_id, missing_ok=True)


def clean_killed_runs(path: Path, grace_s: float = 0) -> list[str]:
    """Delete the files of runs that were killed before their commit (their marker is left and
    no commit carries their run id); returns the relative paths deleted.

    Locally the table's lock says no other run is alive. An object store has no lock: another
    run's marker may be a live run's, so only markers older than ``grace_s`` seconds are taken
    for killed runs (younger ones are left with their files, which no commit references)."""
    fs = storage_for(path)
    runs_dir = path / STATE_DIR / "runs"
    killed = sorted(fs.listdir(runs_dir)) if fs.is_dir(runs_dir) else []
    if not is_local(fs):
        now = time.time()
        killed = [r for r in killed if now - fs.stat(runs_dir / r).st_mtime >= grace_s]
    if not killed:
        return []
    committed = _committed_runs(path) if table_exists(path) else set()
    deleted: list[str] = []
    for run_id in killed:
        if run_id not in committed:
            for f in fs.glob(path, f"**/{FILE_PREFIX}{run_id}-*"):  # Path.rglob, sorted
                if STATE_DIR not in f.relative_to(path).parts:
                    fs.remove(f)
                    deleted.append(str(f.relative_to(path)))
        end_run(path, run_id)
    return deleted


def _committed_runs(path: Path) -> set[str]:
    """The run ids the table's commits carry (either writer's: :mod:`.history`)."""
    runs = (run_id_of(h) for h in delta_table(path).history(_HISTORY_LOOKBACK))
    return {r for r in runs if r is not None}


def data_file(root: Path, relative: str, partition_values: dict[str, str | None]) -> DataFile:
    """Describe a written Parquet file for its Delta ``add`` action: size, record count, null
    counts, and min/max of its integer columns (offsets, partitions: the columns readers skip
    files by; string/timestamp bounds are left out rather than risk truncation errors)."""
    full = root / relative
    fs = storage_for(full)
    meta = pq.read_metadata(fs.arrow_path(full), filesystem=fs.arrow_fs)
    schema = meta.schema.to_arrow_schema()
    mins: dict[str, int] = {}
    maxs: dict[str, int] = {}
    nulls: dict[str, int] = {}
    for i, field in enumerate(schema):
        if pa.types.is_nested(field.type):
            continue
        col = [meta.row_group(g).column(_leaf_index(meta, field.name))
               for g in range(meta.num_row_groups)]
        stats = [c.statistics for c in col]
        if all(s is not None and s.has_null_count for s in stats):
            nulls[field.name] = sum(s.null_count for s in stats)
        if pa.types.is_integer(field.type) and stats and all(
                s is not None and s.has_min_max for s in stats):
            mins[field.name] = min(int(s.min) for s in stats)
            maxs[field.name] = max(int(s.max) for s in stats)
    stats_json = json.dumps({"numRecords": meta.num_rows, "minValues": mins, "maxValues": maxs,
                             "nullCount": nulls})
    return DataFile(relative, partition_values, fs.stat(full).st_size, meta.num_rows, stats_json)


def _leaf_index(meta: pq.FileMetaData, name: str) -> int:
    for i in range(meta.num_columns):
        if meta.schema.column(i).path == name:
            return i
    raise KeyError(name)


def commit(path: Path, schema: pa.Schema, partition_by: tuple[str, ...], files: list[DataFile],
           versions: dict[str, int], planned_from: dict[str, int | None], run_id: str,
           extra_metadata: dict | None = None) -> int:
    """Commit ``files`` and the application-transaction ``versions`` in one Delta commit.

    Parameters
    ----------
    path : Path
        The table root (created with ``schema`` and ``partition_by`` if it is not a table yet).
    schema : pyarrow.Schema
        Schema of the rows of ``files`` (partition columns included).
    files : list of DataFile
    versions : dict
        ``{app id: next offset}`` to record.
    planned_from : dict
        The version each app id of ``versions`` had when the run was planned (``None``: not
        migrated yet); a table that no longer has them means another writer committed
        meanwhile, and nothing is committed.
    run_id : str
        Stored in the commit info (``kafkalog.runId``), to tell committed runs from killed ones.

    Returns
    -------
    int
        The new table version.

    Raises
    ------
    ConcurrentMigrationError
        The table moved on since planning.
    InvalidOptionError
        Partition columns or column types that differ from the existing table's.
    """
    from deltalake import Schema
    from deltalake.exceptions import CommitFailedError, DeltaError
    from deltalake.transaction import (AddAction, CommitProperties, Transaction,
                                       create_table_with_add_actions)

    now = int(time.time() * 1000)
    adds = [AddAction(f.path, f.size, f.partition_values, now, True, f.stats) for f in files]
    # no retries: a commit that meets another writer's fails (the store's conditional write
    # refuses the version file) instead of being rebased onto offsets it did not plan from
    props = CommitProperties(
        custom_metadata={RUN_ID_KEY: run_id, **(extra_metadata or {})},
        app_transactions=[Transaction(app, v, now) for app, v in sorted(versions.items())],
        max_commit_retries=0)
    try:
        if not table_exists(path):
            if any(v is not None for v in planned_from.values()):
                raise ConcurrentMigrationError("the table disappeared while migrating",
                                               Location(str(path)))
            try:
                create_table_with_add_actions(str(path), Schema.from_arrow(schema), adds,
                                              mode="error",
                                              partition_by=list(partition_by) or None,
                                              storage_options=delta_options(path),
                                              commit_properties=props)
            except DeltaError as exc:
                if not table_exists(path):
                    raise
                raise CommitFailedError(f"another writer created the table: {exc}") from None
            return delta_table(path).version()
        return _append(path, schema, partition_by, adds, planned_from, props)
    except CommitFailedError as exc:
        raise ConcurrentMigrationError(f"another writer committed to the table while this run "
                                       f"did ({exc}); nothing was committed: run again",
                                       Location(str(path))) from None


def _append(path: Path, schema: pa.Schema, partition_by: tuple[str, ...], adds: list,
            planned_from: dict[str, int | None], props: Any) -> int:
    table = delta_table(path)
    for app, v in planned_from.items():
        if table.transaction_version(app) != v:
            raise ConcurrentMigrationError(
                f"application transaction {app} is at {table.transaction_version(app)}, this "
                f"run planned from {v}: another writer migrated meanwhile", Location(str(path)))
    merged = evolve_schema(table, schema, partition_by)
    table.create_write_transaction(adds, "append", merged,
                                   partition_by=table.metadata().partition_columns or None,
                                   commit_properties=props)
    return delta_table(path).version()


def evolve_schema(table, schema: pa.Schema, partition_by: tuple[str, ...]) -> pa.Schema:
    """Add the columns of ``schema`` the table lacks (nullable, one ``alter`` commit without
    data) and return the table's resulting schema as Arrow."""
    from deltalake import Schema

    from ..errors import InvalidOptionError

    existing_parts = list(table.metadata().partition_columns)
    if existing_parts != list(partition_by):
        raise InvalidOptionError(f"the table at {table.table_uri} is partitioned by "
                                 f"{existing_parts or 'nothing'}; this run asks for "
                                 f"{list(partition_by) or 'nothing'} (a table keeps its "
                                 f"partitioning)")
    current = pa.schema(table.schema().to_arrow())
    missing = [f for f in schema if f.name not in current.names]
    for f in schema:
        if f.name in current.names and not _same_type(current.field(f.name).type, f.type):
            raise InvalidOptionError(f"column {f.name} of the table at {table.table_uri} is "
                                     f"{current.field(f.name).type}, this run writes {f.type}")
    if missing:
        table.alter.add_columns(list(Schema.from_arrow(pa.schema(missing)).fields))
        current = pa.schema(table.schema().to_arrow())
    return current


def _same_type(a: pa.DataType, b: pa.DataType) -> bool:
    # delta-rs hands back view / large types and its own list field names; compare by meaning
    from deltalake import Schema

    return (Schema.from_arrow(pa.schema([pa.field("c", a)])).to_json()
            == Schema.from_arrow(pa.schema([pa.field("c", b)])).to_json())
