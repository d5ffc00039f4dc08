"""Erase from Delta (Delta layer): the rows of a topic whose key is in a key set, deleted from
the tables ``migrate`` wrote, so one ``kafkalog erase`` run covers the log dirs and the lake.

Rows are deleted with delta-rs's DELETE (``topic = '<topic>' AND key IN (X'..', ...)``, at most
:data:`KEYS_PER_DELETE` keys per commit): the table's current version no longer holds them, but
older versions' files still do until they are vacuumed — the report says how. ``check`` counts
the matching rows left in the current version.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from .commit import delta_table
from .restore import migrate_tables

KEYS_PER_DELETE = 1000
VACUUM_HINT = ("deleted rows stay in the files of earlier table versions until those are "
               "vacuumed: DeltaTable(path).vacuum(retention_hours=0, "
               "enforce_retention_duration=False, dry_run=False) (delta-rs), or VACUUM path "
               "RETAIN 0 HOURS (Spark with spark.databricks.delta.retentionDurationCheck."
               "enabled=false) — this also ends time travel to those versions")


def erase_table(table: str | os.PathLike[str], topic: str, keys: Sequence[bytes], *,
                execute_plan: bool = True) -> list[dict]:
    """Delete ``topic``'s rows whose key is in ``keys`` from the migrate table(s) at ``table``
    (a single-layout table, or the folder of per-topic tables). Returns per table the rows
    matching before (``execute_plan=False``: what is left) and, when executed, the new version.

    Raises
    ------
    InvalidOptionError
        Not a table written by ``migrate`` (:func:`~.restore.migrate_tables`).
    """
    out = []
    distinct = sorted(set(keys))
    for path in migrate_tables(Path(table), ("topic", "key"), "erase"):
        matching = _matching(path, topic, distinct)
        entry = {"table": str(path), "rows_matching": matching}
        if execute_plan and matching:
            dt = delta_table(path)
            for i in range(0, len(distinct), KEYS_PER_DELETE):
                literals = ", ".join(f"X'{k.hex()}'" for k in distinct[i:i + KEYS_PER_DELETE])
                dt.delete(f"topic = '{topic}' AND key IN ({literals})")
            entry["version"] = delta_table(path).version()
            entry["vacuum"] = VACUUM_HINT
        out.append(entry)
    return out


def _matching(path: Path, topic: str, keys: list[bytes]) -> int:
    n = 0
    value_set = pa.array(keys, pa.binary())
    for b in delta_table(path).to_pyarrow_dataset().to_batches(columns=["topic", "key"]):
        hit = pc.and_(pc.equal(b.column(0), topic),
                      pc.fill_null(pc.is_in(b.column(1), value_set=value_set), False))
        n += pc.sum(hit.cast(pa.int64())).as_py() or 0
    return n
