"""The Spark compaction engine's pieces without a Spark session: key batches, chunking, the
retained-offset folder a task reads, and a task's in-place rewrite (same bytes as the local
rewrite)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kafkalog_spark.compaction.compact import plan_log_dir
from kafkalog_spark.codec.digest import key_digests
from kafkalog_spark.compaction.rewrite import (cleaned_path, key_rows, retained_offsets_local,
                                               rewrite_group)
from kafkalog_spark.compaction.key_map import combine_keys
from kafkalog_spark.compaction.spark_job import (chunk_batches, chunk_tasks, concat_task,
                                                 group_items, key_table, read_retained,
                                                 rewrite_pieces, rewrite_task, row_schema,
                                                 segment_tasks)
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
    assert got.column_names == [c.split()[0] for c in row_schema(exact_keys).split(", ")]
    assert set(got.column("n").to_pylist()) == {1}
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


def test_chunk_batches_combine_within_each_partition(tmp_path: Path) -> None:
    """A chunk's rows are combined per partition: the same key in two partitions stays two
    keys; the sum of ``n`` is the number of key rows."""
    log_dir, _ = worked_example(tmp_path)
    (plan,) = plans_of(log_dir, **{"segment.bytes": 200})
    items = [(s, tp, gid) for g, tp, gid, _ in group_items([plan]) for s in segment_tasks(g)]
    twice = items + [(task, 1, gid) for task, _, gid in items]  # as if a second partition
    got = pa.Table.from_batches(list(chunk_batches(twice, max_rows=2)))
    rows = pa.concat_tables([key_rows(t) for t, _, _ in items])
    keys = len(set(rows.column("key").to_pylist()))
    assert got.num_rows == 2 * keys  # worked example: every key seen dirty or once
    assert sum(got.column("n").to_pylist()) == 2 * rows.num_rows
    for tp in (0, 1):
        mine = got.filter(pa.compute.equal(got.column("tp"), tp))
        assert sorted(mine.column("offset").to_pylist()) == \
            sorted(retained_offsets_local(rows, plan.first_dirty).tolist())


def test_read_retained_sorted_and_missing(tmp_path: Path) -> None:
    folder = tmp_path / "retained"
    (folder / "piece=3").mkdir(parents=True)
    pq.write_table(pa.table({"offset": pa.array([9, 2], pa.int64())}), folder / "piece=3" / "a.parquet")
    pq.write_table(pa.table({"offset": pa.array([5], pa.int64())}), folder / "piece=3" / "b.parquet")
    (folder / "piece=3" / "_SUCCESS").touch()
    assert read_retained(folder, 3).tolist() == [2, 5, 9]
    assert read_retained(folder, 4).tolist() == []  # a group with no surviving keyed record


def test_rewrite_task_writes_the_local_bytes_into_its_attempt_file(tmp_path: Path) -> None:
    """A rewrite attempt writes its own file outside the log dir (a retried or speculative
    attempt can never truncate another's output); the bytes are the local engine's."""
    log_dir, _ = worked_example(tmp_path)
    plans = plans_of(log_dir)
    (plan,) = plans
    retained = retained_offsets_local(pa.concat_tables([key_rows(g) for g in plan.groups]),
                                      plan.first_dirty)
    folder = tmp_path / "retained"
    attempts = tmp_path / "attempts"
    attempts.mkdir()
    for g, _, gid, pdir in group_items(plans):
        mine = retained[retained >= g.base_offset]
        piece = 7 + gid
        (folder / f"piece={piece}").mkdir(parents=True)
        pq.write_table(pa.table({"offset": pa.array(mine[::-1], pa.int64())}),
                       folder / f"piece={piece}" / "part.parquet")
        got = rewrite_task(str(folder), str(attempts), (g, gid, piece, pdir))
        got_gid, got_piece, path, stats = got
        assert (got_gid, got_piece) == (gid, piece) and Path(path).parent == attempts
        assert not cleaned_path(pdir, g.base_offset).exists()
        assert not list(plan.state.path.glob("*.cleaned"))
        assert Path(path).read_bytes() == bytes(rewrite_group(g, mine).log)
        assert '"records_kept"' in stats


def test_pieces_of_a_group_joined_are_the_group(tmp_path: Path) -> None:
    """A group cut into pieces (one per segment here) and joined in order by concat_task is
    byte for byte the group rewritten whole."""
    log_dir = tmp_path / "logs"
    build_partition(log_dir, [[rec(i, b"k%d" % (i % 7), None if i % 11 == 0 else b"v%d" % i)
                               for i in range(j, j + 10)] for j in range(0, 40, 10)] + [[]])
    (plan,) = plans_of(log_dir)
    retained = retained_offsets_local(pa.concat_tables([key_rows(g) for g in plan.groups]),
                                      plan.first_dirty)
    items = group_items([plan])
    assert len(rewrite_pieces(items)) == len(items)  # small: one piece per group
    pieces = rewrite_pieces(items, piece_bytes=1)  # every segment its own piece
    assert len(pieces) == sum(len(g.sources) for g, _, _, _ in items) > len(items)
    folder, attempts = tmp_path / "retained", tmp_path / "attempts"
    attempts.mkdir()
    for _, _, piece, _ in pieces:
        (folder / f"piece={piece}").mkdir(parents=True)
        pq.write_table(pa.table({"offset": pa.array(retained, pa.int64())}),
                       folder / f"piece={piece}" / "part.parquet")
    assert [p[2] for p in pieces] == list(range(len(pieces)))  # numbered over all groups
    for g, _, gid, pdir in items:
        mine = [p for p in pieces if p[1] == gid]
        paths = [rewrite_task(str(folder), str(attempts), p)[2] for p in mine]
        got_gid, joined = concat_task(str(attempts), (gid, paths))
        assert got_gid == gid
        assert Path(joined).read_bytes() == bytes(rewrite_group(g, retained).log)
