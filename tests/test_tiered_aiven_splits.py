"""Spark splits over Aiven remote segments (issue 32, item 5): planned from the offset index alone
(the driver fetches no ``.log`` chunk), each split an offset range its executor finds by
validated lookups, so every offset is read exactly once — also when the index entry at a cut is
damaged (the executor then fetches the whole segment and walks it). Untransformed chunks are
fetched as exact byte ranges; transformed ones (zstd, AES-GCM) whole, with cuts at least
``MIN_CHUNKS_PER_SPLIT`` chunks apart at the first index entry past a chunk boundary."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from aiven_fixtures import aiven_offload, rsa_key
from test_tiered_aiven import TOPIC, kl_segment_bytes, s3  # noqa: F401 (s3: a fixture)
from test_tiered_aiven import _log as aiven_log

import kafkalog_spark as kl
from kafkalog_spark.codec.files.index import read_offset_index
from kafkalog_spark.datasource.options import parse_read_options
from kafkalog_spark.datasource.cuts import MIN_CHUNKS_PER_SPLIT
from kafkalog_spark.datasource.plan import plan_scan
from kafkalog_spark.datasource.reader import bad_ranges, read_split
from kafkalog_spark.log.lookup import forget_remote_indexes
from kafkalog_spark.tiered import aiven_storage


CHUNK = 10000  # bytes of a chunk: a few of _log's batches (about 2,700 bytes each)
TIERS = {"plain": {}, "zstd+aes": {"compression": True, "encrypted": True},
         "zstd": {"compression": True}}


def _log(tmp_path, n=6000, segment_bytes=256 << 10):
    return aiven_log(tmp_path, n, segment_bytes)


def _tier(tmp_path, tier: str, n=6000):
    log_dir, before = _log(tmp_path, n)
    kw = dict(TIERS[tier])
    key = rsa_key() if kw.pop("encrypted", False) else None
    off = aiven_offload(log_dir, TOPIC, 0, tmp_path / "bucket", 3, chunk_size=CHUNK, key=key, **kw)
    return log_dir, before, off


def _options(log_dir, off, split_bytes: int, **more) -> dict:
    out = {"path": str(log_dir), "subscribe": TOPIC, "remoteTier": str(off.tier),
           "remoteTierLayout": "aiven", "maxBytesPerPartition": str(split_bytes), **more}
    if off.key_file:
        out["remoteTierPrivateKey"] = str(off.key_file)
    return out


def _first_read() -> None:
    aiven_storage._CACHE.clear()
    forget_remote_indexes()
    aiven_storage.STATS.update(object_bytes=0, chunks=0)


def _rows(splits, opts) -> pa.Table:
    return pa.Table.from_batches([b for s in splits for b in read_split(s, opts)])


def _window(lo: int, hi: int) -> dict:
    return {"startingOffsets": json.dumps({TOPIC: {"0": lo}}),
            "endingOffsets": json.dumps({TOPIC: {"0": hi}})}


@pytest.mark.parametrize("tier", ["plain", "zstd+aes"])
def test_splits_of_aiven_segments_read_each_offset_once(tmp_path, tier):
    log_dir, before, off = _tier(tmp_path, tier)
    for split_bytes in (4096, 16384):
        opts = parse_read_options(_options(log_dir, off, split_bytes))
        _first_read()
        splits = plan_scan(opts).splits
        assert aiven_storage.STATS["chunks"] == 0  # the driver restored no .log chunk
        remote = [s for s in splits if s.segment.remote_id is not None]
        assert all(s.by_offset for s in remote) and len(remote) >= 3 * len(off.segments)
        got = _rows(splits, opts)
        assert got.equals(before.select(got.column_names))  # each offset once, in order
        # an offset window starting and ending at the splits' own bounds and between them
        cuts = [s.min_offset for s in remote if s.min_offset]
        for lo, hi in ((cuts[1], cuts[4]), (cuts[1] - 1, cuts[4] + 1), (cuts[2] + 5, cuts[2] + 6),
                       (7, before.num_rows - 3)):
            w = parse_read_options(_options(log_dir, off, split_bytes, **_window(lo, hi)))
            assert _rows(plan_scan(w).splits, w).column("offset").to_pylist() == \
                list(range(lo, hi))


def test_chunked_segments_are_cut_at_chunk_boundaries_ten_chunks_apart(tmp_path):
    log_dir, before, off = _tier(tmp_path, "zstd+aes")
    opts = parse_read_options(_options(log_dir, off, 4096))
    _first_read()
    splits = [s for s in plan_scan(opts).splits if s.segment.remote_id is not None]
    cuts = 0
    for seg_id, start, _, size in off.segments:
        mine = [s for s in splits if s.segment.remote_id == seg_id]
        index = read_offset_index(kl_segment_bytes(off, start, "index"), start)
        positions = index.positions
        step = MIN_CHUNKS_PER_SPLIT * CHUNK  # 4096 bytes asked: ten chunks at the least
        for k, s in enumerate(mine[1:], 1):
            # the first index entry at or after the k-th boundary of ten chunks: every split
            # but the last spans ten chunks
            assert s.start_position == int(positions[np.searchsorted(positions, k * step)])
            assert s.start_position // CHUNK - mine[k - 1].start_position // CHUNK >= \
                MIN_CHUNKS_PER_SPLIT
        cuts += len(mine) - 1
    _first_read()
    got = _rows(splits, opts)
    assert got.column("offset").to_pylist() == list(range(got.num_rows))
    # each cut costs at most the one chunk both of its splits fetch
    chunks = sum(-(-size // CHUNK) for *_, size in off.segments)
    assert chunks < aiven_storage.STATS["chunks"] <= chunks + cuts


def _damage_offset_index(off, split, field: str, delta: int) -> None:
    """Move the entry of ``split``'s cut in its segment's offset index (the ``.indexes``
    object, stored in clear): its position by ``delta`` bytes (into a batch), or its offset."""
    seg = split.segment
    base = off.folder / f"{seg.base_offset:020d}-{seg.remote_id}"
    entry = json.loads(Path(f"{base}.rsm-manifest").read_bytes())["segmentIndexes"]["offset"]
    raw = bytearray(Path(f"{base}.indexes").read_bytes())
    index = read_offset_index(bytes(raw[entry["position"]:entry["position"] + entry["size"]]),
                              seg.base_offset)
    k = int(np.flatnonzero(index.positions == split.start_position)[0])
    at = entry["position"] + 8 * k + (4 if field == "position" else 0)
    raw[at:at + 4] = (int.from_bytes(raw[at:at + 4], "big") + delta).to_bytes(4, "big")
    Path(f"{base}.indexes").write_bytes(bytes(raw))


@pytest.mark.parametrize("tier", ["plain", "zstd"])
@pytest.mark.parametrize("field,delta", [("position", 3), ("position", -3), ("offset", -1),
                                         ("offset", 1)])
def test_a_damaged_index_entry_at_a_cut_costs_bytes_not_records(tmp_path, tier, field, delta):
    log_dir, before, off = _tier(tmp_path, tier)
    options = _options(log_dir, off, 16384)
    opts = parse_read_options(options)
    _first_read()
    cut = next(s for s in plan_scan(opts).splits if s.segment.remote_id and s.start_position)
    _damage_offset_index(off, cut, field, delta)
    _first_read()
    splits = plan_scan(opts).splits
    assert aiven_storage.STATS["chunks"] == 0
    got = _rows(splits, opts)
    assert got.equals(before.select(got.column_names))
    # the split starting at the damaged entry found its records by walking the whole segment
    damaged = next(s for s in splits if s.segment == cut.segment
                   and abs(s.start_position - cut.start_position) <= 3 and s.start_position)
    _first_read()
    rows = _rows([damaged], opts).column("offset").to_pylist()
    assert rows == list(range(damaged.min_offset, damaged.max_offset + 1))
    assert aiven_storage.STATS["chunks"] > -(-cut.segment.log_size // CHUNK)  # its window too
    # nothing is taken for damaged data: the log itself is whole
    _first_read()
    assert bad_ranges(options) == []


@pytest.mark.spark
def test_spark_reads_an_encrypted_aiven_tier_in_small_splits(spark, tmp_path):
    log_dir, before, off = _tier(tmp_path, "zstd+aes")
    df = spark.read.format("kafkalog").options(**_options(log_dir, off, 4096)).load()
    assert df.rdd.getNumPartitions() > 1
    got = df.select("offset", "value").orderBy("offset").collect()
    assert [(r.offset, bytes(r.value)) for r in got] == list(zip(
        before.column("offset").to_pylist(), before.column("value").to_pylist()))


# --- on S3: what the driver and the executors fetch ---------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("tier", ["plain", "zstd+aes"])
def test_on_s3_the_driver_fetches_no_log_and_the_splits_about_the_tier(tmp_path, s3, tier):
    from s3 import ACCESS_KEY, SECRET_KEY
    from test_object_storage_read import upload

    from kafkalog_spark.storage import as_path, storage_for

    log_dir, before, off = _tier(tmp_path, tier, n=12000)
    uri = upload(s3, off.tier, f"tier/splits-{tier.replace('+', '-')}")
    store = {"endpoint": s3.endpoint, "access_key_id": ACCESS_KEY,
             "secret_access_key": SECRET_KEY, "allow_http": "true"}
    storage = storage_for(as_path(uri, store))
    stored = sum(p.stat().st_size for p in off.folder.glob("*.log"))
    for split_bytes in (65536, 1 << 27):
        opts = parse_read_options({**_options(log_dir, off, split_bytes), "remoteTier": uri,
                                   **{f"storage.{k}": v for k, v in store.items()}})
        _first_read()
        storage.requests.reset()
        splits = plan_scan(opts).splits
        planned = storage.requests.reset()
        assert planned.get("bytes.log", 0) == 0, planned  # no .log byte on the driver
        got = _rows(splits, opts)
        fetched = storage.requests.reset()["bytes.log"]
        assert got.equals(before.select(got.column_names))
        # a 64 KiB split of plain chunks overlaps its neighbour by two index entries; zstd + AES
        # splits are at least ten chunks and share one per cut
        assert stored <= fetched <= 1.1 * stored, (split_bytes, fetched, stored)
        print(f"aiven {tier} on S3, {split_bytes}-byte splits: {len(splits)} splits fetched "
              f"{fetched / stored:.3f}x the stored .log; the plan {planned}")
    # an offset range of plain chunks fetches the bytes its index entries narrow it to, not
    # the whole chunks holding them (log.window.read_window: the entry at or below the first
    # offset to the entry after the first one past the last)
    if tier == "plain":
        seg_id, start, _, size = off.segments[1]
        lo = start + 300
        index = read_offset_index(kl_segment_bytes(off, start, "index"), start)
        k = int(np.searchsorted(index.offsets, lo, side="right")) - 1
        window = int(index.positions[k + 2]) - int(index.positions[k])
        _first_read()
        t = kl.read_log(log_dir, topics=[TOPIC], remote_tier=uri, remote_tier_layout="aiven",
                        storage_options=store, start_offset=lo, end_offset=lo + 1)
        assert t.column("offset").to_pylist() == [lo]
        assert storage.requests.reset()["bytes.log"] == window < CHUNK
