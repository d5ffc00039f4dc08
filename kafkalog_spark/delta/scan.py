"""A table's current rows as Arrow batches (Delta layer), for ``restore`` and ``erase --table``.

delta-rs's pyarrow dataset reads most tables. It refuses a table with deletion vectors (the
``deletionVectors`` reader feature, which delta-spark writes when they are enabled): there the
table's data files are read one by one and each file's deletion vector, which delta-rs decodes
(``DeltaTable.deletion_vectors()``: a keep-mask per file), drops the rows it deletes. Rows
come out with the table's schema either way: partition values from the ``add`` actions, and
columns a file predates (a column added later) as nulls. Any other feature delta-rs cannot
read is refused in one line (:mod:`.features`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from ..errors import InvalidOptionError
from ..storage import storage_for
from .commit import delta_table
from .features import refusal, unreadable

SCAN_ROWS = 1 << 16
"""Rows decoded from the table at a time."""
VECTORS = "deletionVectors"


def table_schema(table: Path) -> pa.Schema:
    """The Arrow schema of the rows :func:`scan` yields."""
    return pa.schema(delta_table(table).schema().to_arrow())


def scan(table: Path, columns: Sequence[str], where: pc.Expression | None = None,
         batch_size: int = SCAN_ROWS, files: Sequence[str] | None = None
         ) -> Iterator[pa.RecordBatch]:
    """The table's rows (``columns`` of them, those matching ``where``), file after file,
    ``batch_size`` at a time: one thread, no read-ahead and no pre-buffering of whole row
    groups. ``where`` may name only integer columns (delta-rs 1.x prunes every file for a
    string equality, the tables migrate writes recording no string statistics). ``files``:
    only those of :func:`data_files` (in the table's order).

    Raises
    ------
    InvalidOptionError
        The table has a reader feature delta-rs cannot read, deletion vectors aside, or one
        of ``files`` is no longer in the table (it changed since they were listed).
    """
    if _readable_by_dataset(table):
        ds = _dataset(table, files)
    else:
        yield from _scan_with_vectors(table, list(columns), where, batch_size, files)
        return
    options = pads.ParquetFragmentScanOptions(pre_buffer=False)
    scanner = ds.scanner(columns=list(columns), filter=where, batch_size=batch_size,
                         use_threads=False, fragment_readahead=1, batch_readahead=1,
                         fragment_scan_options=options)
    yield from scanner.to_batches()


def data_files(table: Path) -> list[tuple[str, int]]:
    """The table's data files in the order :func:`scan` reads them: ``(name, bytes)``, the
    name as ``scan(files=...)`` takes it."""
    if not _readable_by_dataset(table):
        adds = pa.table(delta_table(table).get_add_actions(flatten=False))
        return [(unquote(p), n) for p, n in zip(adds["path"].to_pylist(),
                                                adds["size_bytes"].to_pylist())]
    dt = delta_table(table)
    adds = pa.table(dt.get_add_actions(flatten=True))
    size = {unquote(p): n for p, n in zip(adds["path"].to_pylist(),
                                          adds["size_bytes"].to_pylist())}
    return [(f.path, size.get(unquote(f.path), 0))
            for f in dt.to_pyarrow_dataset().get_fragments()]


def _readable_by_dataset(table: Path) -> bool:
    """Whether delta-rs's dataset reads the table (False: it has deletion vectors, read file
    by file); refuses any other reader feature delta-rs lacks."""
    missing = unreadable(table)
    if missing and missing != [VECTORS]:
        raise InvalidOptionError(refusal(table, missing, "read", "restore and erase read "
                                         "tables with delta-rs"))
    return not missing


def _dataset(table: Path, files: Sequence[str] | None) -> pads.Dataset:
    """delta-rs's dataset of the table, of only ``files`` if given."""
    ds = delta_table(table).to_pyarrow_dataset()
    if files is None:
        return ds
    wanted = set(files)
    kept = [f for f in ds.get_fragments() if f.path in wanted]
    _check_listed(table, files, {f.path for f in kept})
    return pads.FileSystemDataset(kept, ds.schema, ds.format, ds.filesystem)


def _check_listed(table: Path, files: Sequence[str], found: set[str]) -> None:
    gone = [f for f in files if f not in found]
    if gone:
        raise InvalidOptionError(f"{table}: data file {gone[0]} is no longer in the table "
                                 f"(the table changed while it was read); run again")


def _scan_with_vectors(table: Path, columns: list[str], where: pc.Expression | None,
                       batch_size: int, files: Sequence[str] | None = None
                       ) -> Iterator[pa.RecordBatch]:
    dt = delta_table(table)
    schema = table_schema(table)
    # ``where`` names integer columns only: read those too, to evaluate it
    read = columns + [f.name for f in schema if where is not None and f.name not in columns
                      and pa.types.is_integer(f.type)]
    out = pa.schema([schema.field(c) for c in read])
    adds = pa.table(dt.get_add_actions(flatten=False))
    parts = adds["partition"].to_pylist() if "partition" in adds.column_names else None
    keep = _keep_masks(dt)
    fs = storage_for(table)
    names = [unquote(rel) for rel in adds["path"].to_pylist()]
    wanted = None if files is None else set(files)
    if files is not None:
        _check_listed(table, files, set(names))
    for i, name in enumerate(names):
        if wanted is not None and name not in wanted:
            continue
        values = parts[i] if parts is not None else {}
        mask = keep.get(name)
        source = pq.ParquetFile(fs.arrow_path(table / name), filesystem=fs.arrow_fs,
                                pre_buffer=False)
        have = set(source.schema_arrow.names)
        start = 0
        for batch in source.iter_batches(batch_size, columns=[c for c in read if c in have],
                                         use_threads=False):
            n = batch.num_rows
            rows = pa.RecordBatch.from_arrays(
                [_column(batch, f, values, n, have) for f in out], schema=out)
            if mask is not None:
                rows = rows.filter(_slice(mask, start, n))
            start += n
            if where is not None:
                rows = pa.Table.from_batches([rows]).filter(where).combine_chunks()
                rows = rows.to_batches()[0] if rows.num_rows else None
            if rows is not None and rows.num_rows:
                yield rows.select(columns)


def _keep_masks(dt) -> dict[str, pa.BooleanArray]:
    """``{file path relative to the table: keep-mask}`` of the files with a deletion vector."""
    vectors = pa.table(dt.deletion_vectors())
    root = dt.table_uri.rstrip("/") + "/"
    masks = vectors["selection_vector"].combine_chunks()
    return {unquote(uri.removeprefix(root)): masks[i].values
            for i, uri in enumerate(vectors["filepath"].to_pylist())}


def _slice(mask: pa.BooleanArray, start: int, n: int) -> pa.BooleanArray:
    """The keep-mask of rows ``[start, start + n)``; rows past the vector's end are kept."""
    part = mask.slice(start, n).to_numpy(zero_copy_only=False)
    if len(part) < n:
        part = np.concatenate([part, np.ones(n - len(part), dtype=bool)])
    return pa.array(part, pa.bool_())


def _column(batch: pa.RecordBatch, field: pa.Field, partition_values: dict, n: int,
            have: set[str]) -> pa.Array:
    """One column of the table's schema for a file's batch: read, a partition value, or nulls
    (a column the file predates)."""
    if field.name in have:
        return batch.column(field.name).cast(field.type)
    if field.name in partition_values:
        return pa.array([partition_values[field.name]] * n, field.type)
    return pa.nulls(n, field.type)
