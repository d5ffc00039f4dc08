"""The Spark engine's key pass as task functions around Spark's shuffles (log-management layer):
which records of a cleaning round survive, found without per-record work in the JVM.

    key_task       map side: one chunk of consecutive one-segment tasks (about
                   ``KEY_CHUNK_BYTES`` of segments) decodes its keyed records
                   (rewrite.key_rows), digests the keys in the numba kernel and combines its rows
                   per key and partition (key_map.combine_keys: one row per key with its largest
                   offset, that record's rewrite piece and whether it is dirty, except keys seen
                   several times and never dirty, whose rows stay). It yields one Arrow table
                   of :func:`row_schema` columns per **key bucket** (the digest's high half
                   modulo the bucket count), which Spark shuffles as a whole: columnar in and
                   out of Python, nothing per record in the JVM
    retained_task  reduce side: every row of a bucket's keys, from all chunks; per partition,
                   the rows combined again give exactly the surviving records (a key seen dirty
                   keeps its largest offset, as clean offsets precede dirty ones; a key never
                   seen dirty keeps every record, since no chunk combined its rows). Yields
                   ``(piece, sorted offsets)``, which Spark shuffles to the rewrite task of the
                   piece

With ``exact_keys`` the rows carry the key bytes instead of their digest (no map-side combine),
the digest only picks the bucket, and the reduce side groups by the bytes
(rewrite.retained_offsets_local, Arrow's hash aggregation).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..codec.records.digest import key_digests
from ..datasource.executors import planned_files
from .key_map import combine_keys
from .plan import GroupTask
from .rewrite import key_columns, key_rows, keyed_rows, retained_offsets_local

ROWS_PER_BUCKET = 4 << 20  # most key rows a reduce task should hold (~200 MB with its table)
ROW_BYTES_AT_LEAST = 8  # a keyed v2 record takes at least this many bytes of a segment


def row_schema(exact_keys: bool = False) -> list[str]:
    """The key rows' columns: ``tp, piece, k1, k2, offset, dirty`` (``tp`` numbers the
    partition, ``piece`` the rewrite task of the record's segment, ``k1, k2`` the key's 128-bit
    MurmurHash3 digest), or with ``exact_keys`` ``key`` (bytes) for ``k1, k2``."""
    return ["tp", "piece", *key_columns(exact_keys), "offset", "dirty"]


def key_table(task: GroupTask, tp: int, piece: int, *, exact_keys: bool = False) -> pa.Table:
    """The key rows of one (single-segment) task, one row per keyed record (keys digested
    here, on the executor, unless ``exact_keys``)."""
    with planned_files(Path(task.sources[0].log).parent):
        rows = keyed_rows(key_rows(task), exact_keys)
    offsets = rows.column("offset")
    n = rows.num_rows
    return pa.table({
        "tp": pa.array(np.full(n, tp, np.int32)),
        "piece": pa.array(np.full(n, piece, np.int32)),
        **{c: rows.column(c) for c in key_columns(exact_keys)},
        "offset": offsets,
        "dirty": pc.greater_equal(offsets, task.first_dirty),
    })


def _combined(table: pa.Table) -> dict[str, np.ndarray]:
    """``table``'s digest rows (one partition's) combined per key (key_map.combine_keys)."""
    return combine_keys(*(table.column(c).to_numpy() for c in
                          ("k1", "k2", "offset", "dirty", "piece")))


def _runs(values: np.ndarray) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of each run of equal values in ``values`` (sorted)."""
    starts = np.flatnonzero(np.r_[True, values[1:] != values[:-1]]) if len(values) else []
    yield from zip((int(s) for s in starts), (int(e) for e in np.r_[starts[1:], len(values)]))


def buckets_of(table: pa.Table, buckets: int, exact_keys: bool = False) -> np.ndarray:
    """Each key row's bucket: the high half of its key's digest modulo ``buckets``."""
    k1 = (key_digests(table.column("key"))[0] if exact_keys
          else np.asarray(table.column("k1").to_numpy()))
    return (k1.view(np.uint64) % np.uint64(buckets)).astype(np.int64)


def key_task(chunk: Sequence[tuple[GroupTask, int, int]], buckets: int,
             exact_keys: bool = False) -> Iterator[tuple[int, pa.Table]]:
    """Map side of the key shuffle: the key rows of one chunk's ``(one-segment task, tp,
    piece)`` items, combined per key within each partition (unless ``exact_keys``), as
    ``(bucket, rows)`` — one table per bucket that holds any of them."""
    parts = []
    for tp, run in itertools.groupby(chunk, key=lambda item: item[1]):
        table = pa.concat_tables([key_table(task, tp, piece, exact_keys=exact_keys)
                                  for task, _, piece in run])
        if not exact_keys:
            cols = _combined(table)
            table = pa.table({"tp": pa.array(np.full(len(cols["k1"]), tp, np.int32)),
                              **{c: pa.array(cols[c]) for c in row_schema()[1:]}})
        parts.append(table)
    if not parts:
        return
    rows = pa.concat_tables(parts).combine_chunks()
    which = buckets_of(rows, buckets, exact_keys)
    order = np.argsort(which, kind="stable")
    for lo, hi in _runs(which[order]):
        yield int(which[order[lo]]), rows.take(pa.array(order[lo:hi]))


def retained_task(pairs: Iterable[tuple[int, pa.Table]], first_dirty: Mapping[int, int],
                  exact_keys: bool = False) -> Iterator[tuple[int, np.ndarray]]:
    """Reduce side of the key shuffle: the surviving records among one bucket's key rows (all
    rows of its keys, from every chunk), as ``(piece, sorted offsets)`` per rewrite piece.
    ``first_dirty`` maps ``tp`` to its partition's first dirty offset (exact keys)."""
    tables = [t for _, t in pairs if t.num_rows]
    if not tables:
        return
    rows = pa.concat_tables(tables).combine_chunks()
    tps = np.asarray(rows.column("tp").to_numpy())
    by_tp = np.argsort(tps, kind="stable")
    pieces, offsets = [], []
    for lo, hi in _runs(tps[by_tp]):
        mine = rows.take(pa.array(by_tp[lo:hi]))
        if exact_keys:
            kept = retained_offsets_local(mine.select(["key", "offset"]),
                                          first_dirty[int(tps[by_tp[lo]])], exact_keys=True)
            own = np.asarray(mine.column("offset").to_numpy())
            keep = np.isin(own, kept)  # one row per record: offsets are unique in a partition
            pieces.append(np.asarray(mine.column("piece").to_numpy())[keep])
            offsets.append(own[keep])
        else:
            cols = _combined(mine)
            pieces.append(cols["piece"])
            offsets.append(cols["offset"])
    piece, offset = np.concatenate(pieces), np.concatenate(offsets)
    order = np.lexsort((offset, piece))
    piece, offset = piece[order], offset[order]
    for lo, hi in _runs(piece):
        yield int(piece[lo]), offset[lo:hi]


def most_rows(offset_span: int, total_bytes: int) -> int:
    """An upper bound on the key rows of a round: its partitions' offset spans, and its
    segments' bytes over the smallest keyed record."""
    return min(offset_span, total_bytes // ROW_BYTES_AT_LEAST)


def bucket_count(rows: int, parallelism: int) -> int:
    """Reduce tasks of the key shuffle for at most ``rows`` key rows (:func:`most_rows`):
    enough that none holds more than about :data:`ROWS_PER_BUCKET`, and at least one per
    core."""
    return max(parallelism, -(-rows // ROWS_PER_BUCKET))
