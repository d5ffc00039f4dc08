"""write_log -> read_log round trips, the files a broker needs, and the writer's refusals."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import kafkalog_spark as kl
from kafkalog_spark.codec.files.checkpoints import (parse_leader_epoch_checkpoint,
                                                    parse_offset_checkpoint)
from kafkalog_spark.codec.files.properties import parse_partition_metadata
from kafkalog_spark.codec.files.index_rebuild import build_indexes
from kafkalog_spark.codec.records.schema import HEADERS_TYPE
from kafkalog_spark.errors import InvalidOptionError, LogDirError, LogDirLockedError
from kafkalog_spark.inspect.verify import verify

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def records(n: int, *, topic: str = "orders", partitions: int = 1, start_ms: int = 1_700_000_000_000,
            seed: int = 1) -> pa.Table:
    rng = np.random.default_rng(seed)
    keys = [None if i % 11 == 0 else (b"" if i % 13 == 0 else f"k{i % 37}".encode())
            for i in range(n)]
    values = [None if i % 17 == 0 else (b"" if i % 19 == 0 else bytes(rng.integers(0, 256, 40 + i % 90,
                                                                                    dtype=np.uint8)))
              for i in range(n)]
    headers = [[{"key": "h", "value": None if i % 2 else b"x" * (i % 5)}] if i % 3 == 0 else []
               for i in range(n)]
    # timestamps go backwards now and then (negative deltas inside a batch)
    ts = [(start_ms + i * 10 - (500 if i % 29 == 0 else 0)) * 1000 for i in range(n)]
    return pa.table({
        "topic": pa.array([topic] * n, pa.string()),
        "partition": pa.array([i % partitions for i in range(n)], pa.int32()),
        "key": pa.array(keys, pa.binary()),
        "value": pa.array(values, pa.binary()),
        "timestamp": pa.array(ts, pa.timestamp("us", tz="UTC")),
        "headers": pa.array(headers, HEADERS_TYPE),
    })


def expected_rows(table: pa.Table, first_offset: int = 0) -> list[dict]:
    out, nxt = [], {}
    for row in table.to_pylist():
        tp = (row["topic"], row["partition"])
        row["offset"] = nxt.get(tp, first_offset)
        nxt[tp] = row["offset"] + 1
        out.append(row)
    return sorted(out, key=lambda r: (r["topic"], r["partition"], r["offset"]))


def read_rows(path, **kw) -> list[dict]:
    t = kl.read_log(path, include_headers=True, **kw)
    cols = ["topic", "partition", "offset", "key", "value", "timestamp", "headers"]
    return t.select(cols).to_pylist()


def strip(rows: list[dict]) -> list[dict]:
    cols = ["topic", "partition", "offset", "key", "value", "timestamp", "headers"]
    return [{c: r[c] for c in cols} for r in rows]


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_every_codec(tmp_path: Path, codec: str) -> None:
    table = records(3000, partitions=3)
    metrics = kl.write_log(table, tmp_path, codec=codec, segment_bytes=16 * 1024,
                           max_batch_records=100)
    assert metrics["records"] == 3000 and metrics["partitions"] == 3
    assert read_rows(tmp_path) == strip(expected_rows(table))
    report = verify(tmp_path, deep=True)
    assert report.ok, report.problems
    assert report.records == 3000


def test_segments_indexes_and_checkpoints(tmp_path: Path) -> None:
    table = records(4000)
    kl.write_log(table, tmp_path, codec="none", segment_bytes=32 * 1024, max_batch_records=50,
                 leader_epoch=3, topic_ids={"orders": "Nq2ZD3ATRUu4vhRG2pcSzQ"})
    pdir = tmp_path / "orders-0"
    logs = sorted(pdir.glob("*.log"))
    assert len(logs) > 5
    for log in logs:
        data = log.read_bytes()
        assert len(data) <= 32 * 1024
        base = int(log.name.split(".")[0])
        built = build_indexes(data, base)
        # our files are exactly what Kafka's recovery would build from the .log
        assert log.with_suffix(".index").read_bytes() == built.offset_index.to_bytes()
        assert log.with_suffix(".timeindex").read_bytes() == built.time_index.to_bytes()
        assert len(built.offset_index.offsets) > 0
    assert parse_leader_epoch_checkpoint((pdir / "leader-epoch-checkpoint").read_text())[0].epoch == 3
    meta = parse_partition_metadata((pdir / "partition.metadata").read_text())
    assert meta.topic_id is not None
    rp = parse_offset_checkpoint((tmp_path / "recovery-point-offset-checkpoint").read_text())
    hw = parse_offset_checkpoint((tmp_path / "replication-offset-checkpoint").read_text())
    assert rp == hw == {("orders", 0): 4000}
    assert (tmp_path / "log-start-offset-checkpoint").read_text() == "0\n0\n"
    snapshot = pdir / "00000000000000004000.snapshot"
    assert snapshot.read_bytes() == bytes.fromhex("000148674bc700000000")  # no producers


def test_append_continues_from_log_end(tmp_path: Path) -> None:
    first, second = records(500, seed=1), records(700, seed=2)
    kl.write_log(first, tmp_path, codec="lz4")
    kl.write_log(second, tmp_path, codec="zstd")
    rows = read_rows(tmp_path)
    assert [r["offset"] for r in rows] == list(range(1200))
    assert rows[500:] == strip(expected_rows(second, first_offset=500))
    assert sorted(p.name for p in (tmp_path / "orders-0").glob("*.log")) == [
        "00000000000000000000.log", "00000000000000000500.log"]
    assert verify(tmp_path).ok
    with pytest.raises(LogDirError, match="already has segments"):
        kl.write_log(first, tmp_path, mode="error")


def test_offset_column_preserved_with_gaps(tmp_path: Path) -> None:
    table = records(300).append_column("offset", pa.array(np.arange(300) * 3 + 10, pa.int64()))
    kl.write_log(table, tmp_path, max_batch_records=40)
    rows = read_rows(tmp_path)
    assert [r["offset"] for r in rows] == list(range(10, 910, 3))
    assert verify(tmp_path, deep=True).ok
    with pytest.raises(InvalidOptionError, match="below the log end offset"):
        kl.write_log(table, tmp_path)


def test_read_windows_and_filters(tmp_path: Path) -> None:
    table = records(3000, partitions=2)
    kl.write_log(table, tmp_path, segment_bytes=8 * 1024, max_batch_records=30)
    full = read_rows(tmp_path)
    window = read_rows(tmp_path, start_offset=333, end_offset=1111)
    assert window == [r for r in full if 333 <= r["offset"] < 1111]
    by_tp = read_rows(tmp_path, start_offset={("orders", 1): 1000}, partitions=[1])
    assert by_tp == [r for r in full if r["partition"] == 1 and r["offset"] >= 1000]
    with pytest.raises(InvalidOptionError, match="topic.s. nope not found .*topics there: orders"):
        read_rows(tmp_path, topics=["nope"])  # a typo is an error, not an empty read
    # a partition dir and a single segment file can be named directly
    assert read_rows(tmp_path / "orders-0") == [r for r in full if r["partition"] == 0]
    seg = sorted((tmp_path / "orders-1").glob("*.log"))[2]
    base = int(seg.name.split(".")[0])
    rows = read_rows(seg)
    assert rows and rows[0]["offset"] == base and all(r["partition"] == 1 for r in rows)


def test_metadata_columns(tmp_path: Path) -> None:
    kl.write_log(records(100), tmp_path, codec="snappy", max_batch_records=25, leader_epoch=7)
    t = kl.read_log(tmp_path, include_metadata=True)
    assert set(pc.unique(t["leaderEpoch"]).to_pylist()) == {7}
    assert set(pc.unique(t["compression"]).to_pylist()) == {"snappy"}
    assert t["batchBaseOffset"].to_pylist()[:26] == [0] * 25 + [25]
    assert set(pc.unique(t["magic"]).to_pylist()) == {2}


def test_kafka_python_reads_what_we_wrote(tmp_path: Path) -> None:
    from kafka.record import MemoryRecords

    table = records(600, partitions=1)
    kl.write_log(table, tmp_path, codec="gzip", max_batch_records=64)
    got = []
    for log in sorted((tmp_path / "orders-0").glob("*.log")):
        mr = MemoryRecords(log.read_bytes())
        while mr.has_next():
            batch = mr.next_batch()
            assert batch.validate_crc()
            got += [(r.offset, r.key, r.value) for r in batch]
    assert got == [(r["offset"], r["key"], r["value"]) for r in expected_rows(table)]


def test_refusals(tmp_path: Path) -> None:
    t = records(5)
    with pytest.raises(InvalidOptionError, match="illegal topic name"):
        kl.write_log(t.drop_columns(["topic"]), tmp_path, topic="../escape")
    with pytest.raises(InvalidOptionError, match="mode must be one of"):
        kl.write_log(t, tmp_path, mode="overwrite-everything")
    kl.write_log(t, tmp_path)
    (tmp_path / "orders-0" / "00000000000000000005.log.cleaned").write_bytes(b"x")
    with pytest.raises(LogDirError, match="recover"):
        kl.write_log(t, tmp_path)


def test_refuses_a_log_dir_locked_by_a_live_process(tmp_path: Path, lock_holder) -> None:
    holder = lock_holder(tmp_path)
    with pytest.raises(LogDirLockedError, match=str(holder.pid)):
        kl.write_log(records(5), tmp_path)
    assert not (tmp_path / "orders-0").exists()


# --- staging and publishing (shared with the Spark writer) -------------------------------------


def staging_leftovers(log_dir: Path) -> list[Path]:
    return sorted(log_dir.parent.glob(f".{log_dir.name}.kafkalog-staging-*"))


def test_staging_is_a_sibling_and_is_removed(tmp_path: Path) -> None:
    from kafkalog_spark.log.staging import create_staging_dir

    log_dir = tmp_path / "logs"
    kl.write_log(records(50), log_dir)
    assert staging_leftovers(log_dir) == []
    assert sorted(p.name for p in log_dir.iterdir() if p.is_dir()) == ["orders-0"]
    staging = create_staging_dir(log_dir)
    assert staging.parent == log_dir.parent and staging.name.startswith(".logs.kafkalog-staging-")


def test_overwrite_replaces_only_the_partitions_written(tmp_path: Path) -> None:
    kl.write_log(records(300, partitions=2), tmp_path, codec="gzip")
    topic_id = (tmp_path / "orders-0" / "partition.metadata").read_text()
    (tmp_path / "log-start-offset-checkpoint").write_text("0\n1\norders 0 100\n")
    new = records(40, partitions=1, seed=9)
    metrics = kl.write_log(new, tmp_path, mode="overwrite", codec="zstd", leader_epoch=7)
    assert metrics["written"][0]["replaced"] is True
    got = read_rows(tmp_path, partitions=[0])
    assert got == strip(expected_rows(new))  # offsets start at 0 again
    assert len(read_rows(tmp_path, partitions=[1])) == 150  # untouched
    assert (tmp_path / "orders-0" / "partition.metadata").read_text() == topic_id
    epochs = parse_leader_epoch_checkpoint((tmp_path / "orders-0" / "leader-epoch-checkpoint").read_text())
    assert [(e.epoch, e.start_offset) for e in epochs] == [(7, 0)]
    assert parse_offset_checkpoint((tmp_path / "log-start-offset-checkpoint").read_text()) == {}
    rp = parse_offset_checkpoint((tmp_path / "recovery-point-offset-checkpoint").read_text())
    assert rp == {("orders", 0): 40, ("orders", 1): 150}
    assert sorted(p.name for p in (tmp_path / "orders-0").glob("*.snapshot")) == [
        "00000000000000000040.snapshot"]
    assert verify(tmp_path, deep=True).ok
    assert staging_leftovers(tmp_path) == []


def test_stagers_shift_whole_segments_in_order(tmp_path: Path) -> None:
    """Three writers stage provisional offsets from 0; publishing shifts their segments after
    the log end offset, in ``order``, without re-encoding (CRCs still valid)."""
    from kafkalog_spark.storage.lock import hold_lock
    from kafkalog_spark.log.publish import publish
    from kafkalog_spark.log.staging import (PartitionStager, WriteSettings, create_staging_dir,
                                            remove_staging_dir)

    log_dir = tmp_path / "logs"
    kl.write_log(records(100), log_dir, codec="snappy")
    settings = WriteSettings(codec="lz4", segment_bytes=4096, max_batch_records=30)
    staging = create_staging_dir(log_dir)
    chunks = [records(n, seed=s) for n, s in ((120, 3), (0, 4), (250, 5))]
    staged = []
    for order in (2, 0, 1):  # staged out of order; published by order
        st = PartitionStager(staging / f"t{order}", "orders", 0, order=order, settings=settings)
        for piece in chunks[order].to_batches(max_chunksize=37):
            st.add(piece)
        staged.append(st.finish())
    with hold_lock(log_dir):
        written = publish(log_dir, staged, mode="append", leader_epoch=0, staging=staging)
    remove_staging_dir(staging)
    assert written[0].first_offset == 100 and written[0].next_offset == 470
    want = expected_rows(pa.concat_tables([records(100)] + chunks))
    assert read_rows(log_dir) == strip(want)
    report = verify(log_dir, deep=True)
    assert report.ok, report.problems
    new_logs = [p for p in (log_dir / "orders-0").glob("*.log") if int(p.name[:20]) >= 100]
    assert len(new_logs) > 3 and all(p.stat().st_size <= 4096 for p in new_logs)


def test_kept_offsets_must_not_overlap_between_outputs(tmp_path: Path) -> None:
    from kafkalog_spark.log.publish import publish
    from kafkalog_spark.log.staging import PartitionStager, WriteSettings, create_staging_dir

    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    staging = create_staging_dir(log_dir)
    staged = []
    for order, first in enumerate((10, 15)):
        t = records(10).append_column("offset", pa.array(range(first, first + 10), pa.int64()))
        st = PartitionStager(staging / f"t{order}", "orders", 0, order=order,
                             settings=WriteSettings())
        st.add(t)
        staged.append(st.finish())
    with pytest.raises(InvalidOptionError, match="below the previous output's end 20"):
        publish(log_dir, staged, mode="append", leader_epoch=0, staging=staging)
    assert list(log_dir.iterdir()) == []  # refused before anything moved


def test_skip_mode_returns_valid_records_and_bad_ranges(tmp_path: Path) -> None:
    import json

    from kafkalog_spark.codec.records.scan import scan_entries
    from kafkalog_spark.errors import CorruptRecordError

    kl.write_log(records(400), tmp_path, max_batch_records=50)
    seg = tmp_path / "orders-0" / "00000000000000000000.log"
    data = bytearray(seg.read_bytes())
    entries = scan_entries(bytes(data))
    pos = int(entries.position[2])
    data[pos + 90] ^= 0xFF  # batch 2 (offsets 100..149) fails its CRC
    seg.write_bytes(data)
    with pytest.raises(CorruptRecordError) as err:
        kl.read_log(tmp_path)
    assert (err.value.position, err.value.base_offset) == (pos, 100)
    table = kl.read_log(tmp_path, on_error="skip")
    assert table["offset"].to_pylist() == list(range(100)) + list(range(150, 400))
    (bad,) = json.loads(table.schema.metadata[b"kafkalog.bad_ranges"])
    assert (bad["start"], bad["end"], bad["base_offset"]) == (
        pos, pos + int(entries.entry_size[2]), 100)
    assert bad["file"] == str(seg.resolve())
