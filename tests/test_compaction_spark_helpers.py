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
from kafkalog_spark.compaction.spark_job import (chunk_tasks, group_items, key_batches,
                                                 read_retained, rewrite_task, row_schema,
                                                 segment_tasks)
from kafkalog_spark.log.discovery import discover

from test_compaction import T, worked_example


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
def test_key_batches_are_the_key_rows_with_ids(tmp_path: Path, exact_keys: bool) -> None:
    log_dir, _ = worked_example(tmp_path)
    (g, tp, gid, _), *_ = group_items(plans_of(log_dir))
    task = segment_tasks(g)[0]
    expect = key_rows(task)
    got = pa.Table.from_batches(list(key_batches(task, tp=4, gid=9, max_rows=3,
                                                 exact_keys=exact_keys)))
    assert got.column_names == [c.split()[0] for c in row_schema(exact_keys).split(", ")]
    assert got.num_rows == expect.num_rows and got.num_rows > 3
    assert set(got.column("tp").to_pylist()) == {4} and set(got.column("gid").to_pylist()) == {9}
    if exact_keys:
        assert got.column("key").equals(expect.column("key"))
    else:  # the digest of each key, computed in the task
        hi, lo = key_digests(expect.column("key"))
        assert got.column("k1").to_pylist() == hi.tolist()
        assert got.column("k2").to_pylist() == lo.tolist()
    offsets = np.asarray(got.column("offset").to_numpy())
    assert got.column("dirty").to_pylist() == list(offsets >= task.first_dirty)


def test_read_retained_sorted_and_missing(tmp_path: Path) -> None:
    folder = tmp_path / "retained"
    (folder / "gid=3").mkdir(parents=True)
    pq.write_table(pa.table({"offset": pa.array([9, 2], pa.int64())}), folder / "gid=3" / "a.parquet")
    pq.write_table(pa.table({"offset": pa.array([5], pa.int64())}), folder / "gid=3" / "b.parquet")
    (folder / "gid=3" / "_SUCCESS").touch()
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
        (folder / f"gid={gid}").mkdir(parents=True)
        pq.write_table(pa.table({"offset": pa.array(mine[::-1], pa.int64())}),
                       folder / f"gid={gid}" / "part.parquet")
        got_gid, path, stats = rewrite_task(str(folder), str(attempts), (g, gid, pdir))
        assert got_gid == gid and Path(path).parent == attempts
        assert not cleaned_path(pdir, g.base_offset).exists()
        assert not list(plan.state.path.glob("*.cleaned"))
        assert Path(path).read_bytes() == bytes(rewrite_group(g, mine).log)
        assert '"records_kept"' in stats
