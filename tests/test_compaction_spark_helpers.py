"""The Spark compaction engine's pieces without a Spark session: chunking, the key shuffle's map
and reduce tasks (the surviving offsets per piece equal the local engine's), and a task's
rewrite (same bytes as the local rewrite)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from kafkalog_spark.compaction.compact import plan_log_dir
from kafkalog_spark.codec.files.index_rebuild import build_indexes
from kafkalog_spark.codec.records.digest import key_digests
from kafkalog_spark.codec.records.scan import scan_entries
from kafkalog_spark.compaction.rewrite import key_rows, retained_offsets_local, rewrite_group
from kafkalog_spark.compaction.cleaned import cleaned_path
from kafkalog_spark.compaction.key_map import combine_keys
from kafkalog_spark.compaction.key_shuffle import (bucket_count, buckets_of, key_table, key_task,
                                                   most_rows, retained_task, row_schema)
from kafkalog_spark.compaction.spark_job import (chunk_tasks, finish_task, group_items,
                                                 rewrite_pieces, rewrite_task, segment_tasks)
from kafkalog_spark.errors import CorruptRecordError
from kafkalog_spark.log.discovery import discover

from test_compaction import T, build_partition, rec, worked_example


def plans_of(log_dir: Path, **options):
    found = discover(log_dir).log_dirs[0]
    return plan_log_dir(found, now_ms=T, options={"cleanup.policy": "compact", **options},
                        config_file=None, topics=None, force=True, skipped=[])


def test_chunk_tasks_keeps_order_and_balances() -> None:
    sizes = [5, 1, 1, 1, 1, 1, 5, 5]
    chunks = chunk_tasks(sizes, 3)
    assert [x for c in chunks for x in c] == sizes  # consecutive, order kept
    assert len(chunks) <= 3 and all(chunks)
    assert max(sum(c) for c in chunks) <= 10  # an even share is 20/3
    assert chunk_tasks([], 4) == []
    assert chunk_tasks([7], 4) == [[7]]
    items = [("a", 3), ("b", 3)]
    assert chunk_tasks(items, 2, size=lambda i: i[1]) == [[("a", 3)], [("b", 3)]]


def test_group_items_and_segment_tasks(tmp_path: Path) -> None:
    log_dir, _ = worked_example(tmp_path)
    plans = plans_of(log_dir, **{"segment.bytes": 200})
    items = group_items(plans)
    assert [gid for _, _, gid, _ in items] == list(range(len(items)))
    assert all(pdir == str(plans[tp].state.path) for _, tp, _, pdir in items)
    for g, _, _, _ in items:
        subs = segment_tasks(g)
        assert [s.sources for s in subs] == [(src,) for src in g.sources]
        assert {s.group for s in subs} == {g.group}


@pytest.mark.parametrize("exact_keys", [False, True])
def test_key_table_is_the_key_rows_with_ids(tmp_path: Path, exact_keys: bool) -> None:
    log_dir, _ = worked_example(tmp_path)
    (g, tp, gid, _), *_ = group_items(plans_of(log_dir))
    task = segment_tasks(g)[0]
    expect = key_rows(task)
    got = key_table(task, tp=4, piece=9, exact_keys=exact_keys)
    assert got.column_names == row_schema(exact_keys)
    assert got.num_rows == expect.num_rows and got.num_rows > 3
    assert set(got.column("tp").to_pylist()) == {4} and set(got.column("piece").to_pylist()) == {9}
    if exact_keys:
        assert got.column("key").equals(expect.column("key"))
    else:  # the digest of each key, computed in the task
        hi, lo = key_digests(expect.column("key"))
        assert got.column("k1").to_pylist() == hi.tolist()
        assert got.column("k2").to_pylist() == lo.tolist()
    offsets = np.asarray(got.column("offset").to_numpy())
    assert got.column("dirty").to_pylist() == list(offsets >= task.first_dirty)


def test_combine_keys_one_row_per_key_but_all_rows_of_clean_repeats() -> None:
    #        key: a  a  b  c  c  d  a  e  e
    k1 = np.array([1, 1, 2, 3, 3, 4, 1, 5, 5])
    k2 = np.array([9, 9, 9, 9, 9, 9, 9, 8, 8])
    offsets = np.array([10, 11, 12, 13, 14, 15, 16, 17, 18])
    dirty = np.array([0, 0, 0, 0, 0, 0, 1, 0, 1], bool)
    pieces = np.array([0, 0, 0, 1, 1, 1, 2, 2, 2])
    got = combine_keys(k1, k2, offsets, dirty, pieces)
    rows = sorted(zip(*(got[c].tolist() for c in ("k1", "k2", "offset", "piece", "n",
                                                   "dirty"))))
    assert rows == [(1, 9, 16, 2, 3, True),   # a: seen dirty -> its largest offset, n = 3
                    (2, 9, 12, 0, 1, False),  # b: once
                    (3, 9, 13, 1, 1, False),  # c: twice, both clean -> both rows as they are
                    (3, 9, 14, 1, 1, False),
                    (4, 9, 15, 1, 1, False),  # d: once
                    (5, 8, 18, 2, 2, True)]   # e: same k1 as nothing else, dirty
    assert combine_keys(*(np.zeros(0, np.int64),) * 5)["n"].tolist() == []


def _shuffled(pairs, exact_keys: bool) -> dict[int, list[pa.Table]]:
    """What Spark's shuffle hands each reduce task: the map tasks' tables by bucket."""
    by_bucket: dict[int, list[pa.Table]] = {}
    for bucket, table in pairs:
        by_bucket.setdefault(bucket, []).append(table)
    return by_bucket


@pytest.mark.parametrize("exact_keys", [False, True])
def test_key_shuffle_gives_each_piece_the_local_engine_offsets(tmp_path: Path,
                                                               exact_keys: bool) -> None:
    """Two map tasks over the same segments as two partitions (tp 0 and 1, so one key lives
    in two partitions and every chunk sees it), three buckets: every row lands in its key's
    bucket, the digest rows are combined per key and partition, and the reduce tasks' offsets
    per piece are the local engine's retained offsets of each partition."""
    log_dir = tmp_path / "logs"
    build_partition(log_dir, [[rec(i, b"k%d" % (i % 7), None if i % 11 == 0 else b"v%d" % i)
                               for i in range(j, j + 10)] for j in range(0, 40, 10)] + [[]])
    (plan,) = plans_of(log_dir, **{"segment.bytes": 200})
    items = [(s, tp, gid) for g, tp, gid, _ in group_items([plan]) for s in segment_tasks(g)]
    half = len(items) // 2
    chunks = [items[:half] + [(t, 1, gid) for t, _, gid in items[:half]],
              items[half:] + [(t, 1, gid) for t, _, gid in items[half:]]]
    rows = pa.concat_tables([key_rows(t) for t, _, _ in items])
    pairs = [p for chunk in chunks for p in key_task(chunk, 3, exact_keys)]
    for bucket, table in pairs:
        assert table.column_names == row_schema(exact_keys)
        assert set(buckets_of(table, 3, exact_keys).tolist()) == {bucket}
    mapped = sum(t.num_rows for _, t in pairs)
    keys = len(set(rows.column("key").to_pylist()))
    # exact keys: one row per record; digests: at most one per key, partition and chunk
    assert mapped == 2 * rows.num_rows if exact_keys else mapped <= 2 * 2 * keys
    got: dict[int, list[int]] = {}
    for tables in _shuffled(pairs, exact_keys).values():
        for piece, offsets in retained_task(iter([(0, t) for t in tables]),
                                            {0: plan.first_dirty, 1: plan.first_dirty},
                                            exact_keys):
            assert offsets.tolist() == sorted(offsets.tolist())
            got.setdefault(piece, []).extend(offsets.tolist())
    expected = sorted(retained_offsets_local(rows, plan.first_dirty).tolist())
    assert sorted(v for offsets in got.values() for v in offsets) == sorted(expected * 2)
    bases = sorted({t.base_offset: gid for t, _, gid in items}.items())
    for piece, offsets in got.items():  # each offset in the piece of its own segment
        assert {[gid for base, gid in bases if base <= o][-1] for o in offsets} == {piece}
    assert list(retained_task(iter([]), {}, exact_keys)) == []


def test_bucket_count_bounds_the_rows_of_a_reduce_task() -> None:
    assert bucket_count(most_rows(1000, 10 << 20), 2) == 2  # small: one per core
    assert bucket_count(most_rows(40 << 20, 10 << 30), 2) == 10  # 4 Mi rows each at most
    assert most_rows(40 << 20, 80 << 20) == 10 << 20  # bytes bound the rows too (8 B each)


def test_rewrite_task_writes_the_local_bytes_into_its_attempt_file(tmp_path: Path) -> None:
    """A rewrite attempt writes its own file outside the log dir (a retried or speculative
    attempt can never truncate another's output); the bytes are the local engine's."""
    log_dir, _ = worked_example(tmp_path)
    plans = plans_of(log_dir)
    (plan,) = plans
    retained = retained_offsets_local(pa.concat_tables([key_rows(g) for g in plan.groups]),
                                      plan.first_dirty)
    attempts = tmp_path / "attempts"
    attempts.mkdir()
    for g, _, gid, pdir in group_items(plans):
        mine = retained[retained >= g.base_offset]
        piece = 7 + gid
        item = (g, gid, piece, pdir)
        # the shuffle by piece: offsets from two reduce tasks, in any order
        got = rewrite_task(item, iter([(piece, mine[1::2]), (piece, mine[0::2])]),
                           str(attempts))
        got_gid, got_piece, path, stats, _ = got
        assert (got_gid, got_piece) == (gid, piece) and Path(path).parent == attempts
        assert not cleaned_path(pdir, g.base_offset).exists()
        assert not list(plan.state.path.glob("*.cleaned"))
        assert Path(path).read_bytes() == bytes(rewrite_group(g, mine).log)
        assert '"records_kept"' in stats


def test_pieces_of_a_group_joined_are_the_group(tmp_path: Path) -> None:
    """A group cut into pieces (one per segment here) and joined in order by finish_task is
    byte for byte the group rewritten whole, with the indexes the swap builds from it and the
    offset after its last batch; a group of one piece keeps its file."""
    log_dir = tmp_path / "logs"
    build_partition(log_dir, [[rec(i, b"k%d" % (i % 7), None if i % 11 == 0 else b"v%d" % i)
                               for i in range(j, j + 10)] for j in range(0, 40, 10)] + [[]])
    (plan,) = plans_of(log_dir)
    retained = retained_offsets_local(pa.concat_tables([key_rows(g) for g in plan.groups]),
                                      plan.first_dirty)
    items = group_items([plan])
    assert len(rewrite_pieces(items)) == len(items)  # small: one piece per group
    attempts = tmp_path / "attempts"
    attempts.mkdir()
    for piece_bytes in (1, 1 << 30):  # every segment its own piece; one piece per group
        pieces = rewrite_pieces(items, piece_bytes=piece_bytes)
        assert [p[2] for p in pieces] == list(range(len(pieces)))  # numbered over all groups
        if piece_bytes == 1:
            assert len(pieces) == sum(len(g.sources) for g, _, _, _ in items) > len(items)
        for g, _, gid, pdir in items:
            mine = [p for p in pieces if p[1] == gid]
            paths = [rewrite_task(p, iter([(p[2], retained)]), str(attempts))[2]
                     for p in mine]
            got_gid, log, index, timeindex, end = finish_task(
                str(attempts), (gid, paths, g.base_offset, 64))
            whole = bytes(rewrite_group(g, retained).log)
            built = build_indexes(whole, g.base_offset, index_interval_bytes=64)
            assert got_gid == gid and Path(log).read_bytes() == whole
            assert (log == paths[0]) == (len(paths) == 1)
            assert Path(index).read_bytes() == built.offset_index.to_bytes()
            assert len(built.offset_index.to_bytes()) > 8  # several entries at 64 bytes apart
            assert Path(timeindex).read_bytes() == built.time_index.to_bytes()
            assert end == int(scan_entries(whole).last_offset[-1]) + 1
            assert {Path(p).parent for p in (log, index, timeindex)} == {attempts}


def test_a_cleaned_segment_that_does_not_read_back_is_refused(tmp_path: Path) -> None:
    """finish_task checks what a rewrite task wrote before the swap may take it: a damaged
    byte is a typed error naming the file, the byte position and the base offset."""
    log_dir = tmp_path / "logs"
    build_partition(log_dir, [[rec(i, b"k%d" % i, b"v%d" % i) for i in range(j, j + 4)]
                              for j in (0, 4)] + [[]])
    (plan,) = plans_of(log_dir)
    ((g, _, gid, _),) = group_items([plan])
    attempts = tmp_path / "attempts"
    attempts.mkdir()
    piece = attempts / "piece.log"
    data = bytearray(rewrite_group(g, np.arange(0, 8, dtype=np.int64)).log)
    data[-1] ^= 0xFF  # the last batch's last byte: its CRC fails
    piece.write_bytes(bytes(data))
    last = int(scan_entries(bytes(data)).position[-1])
    with pytest.raises(CorruptRecordError, match=f"byte position {last}") as err:
        finish_task(str(attempts), (gid, [str(piece)], g.base_offset, 4096))
    assert str(piece) in str(err.value) and "base offset 0" in str(err.value)
