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

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import KafkaLogError, Location
from ..log.atomic import atomic_write_text
from ..log.storage import storage_for

STATE_DIR = "_kafkalog"  # leading underscore: Delta readers and VACUUM leave it alone
FILE_PREFIX = "part-kafkalog-"
RUN_ID_KEY = "kafkalog.runId"
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


def table_exists(path: Path) -> bool:
    """Whether ``path`` holds a Delta table (a ``_delta_log`` with a commit)."""
    from deltalake import DeltaTable

    return DeltaTable.is_deltatable(str(path))


def migrated_offsets(path: Path, app_ids: list[str]) -> dict[str, int]:
    """``{app id: version}`` of the application transactions the table has recorded."""
    if not table_exists(path):
        return {}
    from deltalake import DeltaTable

    table = DeltaTable(str(path))
    out = {}
    for app_id in app_ids:
        version = table.transaction_version(app_id)
        if version is not None:
            out[app_id] = int(version)
    return out


@contextmanager
def table_lock(path: Path) -> Iterator[None]:
    """Hold the table's migration lock (non-blocking: a second run fails at once)."""
    fs = storage_for(path)
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


def begin_run(path: Path, run_id: str) -> Path:
    """Leave the marker of a run in progress; returns the run's staging folder (for engines
    that write elsewhere first)."""
    runs, staging = path / STATE_DIR / "runs", path / STATE_DIR / "staging" / run_id
    fs = storage_for(runs)
    fs.make_dirs(runs, exist_ok=True)
    atomic_write_text(runs / run_id, json.dumps({"run_id": run_id, "started": time.time()}))
    fs.make_dirs(staging, exist_ok=True)
    return staging


def end_run(path: Path, run_id: str) -> None:
    """Drop the marker and staging folder of a run (committed, or nothing to commit)."""
    fs = storage_for(path)
    fs.remove_tree(path / STATE_DIR / "staging" / run_id, ignore_errors=True)
    fs.remove(path / STATE_DIR / "runs" / run_id, missing_ok=True)


def clean_killed_runs(path: Path) -> list[str]:
    """Delete the files of runs that were killed before their commit (their marker is left and
    no commit carries their run id); returns the relative paths deleted."""
    fs = storage_for(path)
    runs_dir = path / STATE_DIR / "runs"
    killed = sorted(fs.listdir(runs_dir)) if fs.is_dir(runs_dir) else []
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
    from deltalake import DeltaTable

    table = DeltaTable(str(path))
    return {str(h[RUN_ID_KEY]) for h in table.history(_HISTORY_LOOKBACK) if RUN_ID_KEY in h}


def data_file(root: Path, relative: str, partition_values: dict[str, str | None]) -> DataFile:
    """Describe a written Parquet file for its Delta ``add`` action: size, record count, null
    counts, and min/max of its integer columns (offsets, partitions: the columns readers skip
    files by; string/timestamp bounds are left out rather than risk truncation errors)."""
    full = root / relative
    fs = storage_for(full)
    meta = pq.read_metadata(full, filesystem=fs.arrow_fs)
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
           versions: dict[str, int], planned_from: dict[str, int], run_id: str,
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
        The versions the run was planned from; a table that no longer has them means another
        writer committed meanwhile, and nothing is committed.
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
    from deltalake import DeltaTable, Schema
    from deltalake.transaction import (AddAction, CommitProperties, Transaction,
                                       create_table_with_add_actions)

    now = int(time.time() * 1000)
    adds = [AddAction(f.path, f.size, f.partition_values, now, True, f.stats) for f in files]
    props = CommitProperties(
        custom_metadata={RUN_ID_KEY: run_id, **(extra_metadata or {})},
        app_transactions=[Transaction(app, v, now) for app, v in sorted(versions.items())])
    if not table_exists(path):
        if planned_from:
            raise ConcurrentMigrationError("the table disappeared while migrating",
                                           Location(str(path)))
        create_table_with_add_actions(str(path), Schema.from_arrow(schema), adds, mode="error",
                                      partition_by=list(partition_by) or None,
                                      commit_properties=props)
        return DeltaTable(str(path)).version()
    table = DeltaTable(str(path))
    for app, v in planned_from.items():
        if table.transaction_version(app) != v:
            raise ConcurrentMigrationError(
                f"application transaction {app} is at {table.transaction_version(app)}, this "
                f"run planned from {v}: another writer migrated meanwhile", Location(str(path)))
    merged = evolve_schema(table, schema, partition_by)
    table.create_write_transaction(adds, "append", merged,
                                   partition_by=table.metadata().partition_columns or None,
                                   commit_properties=props)
    return DeltaTable(str(path)).version()


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
