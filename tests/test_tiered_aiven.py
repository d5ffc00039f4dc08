"""Tiered storage, Aiven's layout (issue 32, item 3): remote segments read through their chunk
index (only the chunks a read needs), zstd chunks decompressed, AES-GCM chunks decrypted with
the data key unwrapped by the RSA private key, indexes cut from ``.indexes``. The objects are
written to the spec by ``tests/aiven_fixtures.py`` (Aiven's plugin is not on Maven Central
here), checked against the test vector of Aiven's own tests."""

from __future__ import annotations

import base64
import json
import shutil

import pyarrow as pa
import pytest
import zstandard
from aiven_fixtures import VECTOR, aiven_offload, encode_sizes, rsa_key

import kafkalog_spark as kl
from kafkalog_spark.errors import CompressionError, CorruptIndexError, Location, RemoteTierError
from kafkalog_spark.tiered import aiven_storage
from kafkalog_spark.tiered.aiven_manifest import ChunkIndex, transformed_chunk_sizes


TOPIC = "events"


def test_transformed_chunks_test_vector():
    text, sizes = VECTOR
    assert transformed_chunk_sizes(text, Location()) == sizes
    # our fixtures' writer encodes the same bytes
    ours = zstandard.ZstdDecompressor().decompress(base64.b64decode(encode_sizes(sizes)))
    theirs = zstandard.ZstdDecompressor().decompress(base64.b64decode(text))
    assert ours == theirs
    for values in ([], [7], [300, 5, 70000, 9], [1 << 20, 1 << 20, 12]):
        assert transformed_chunk_sizes(encode_sizes(values), Location()) == values
    with pytest.raises(CorruptIndexError, match="transformedChunks does not decode"):
        transformed_chunk_sizes("AAAA", Location())


def test_chunk_index_ranges():
    index = ChunkIndex(100, 250, (110, 110, 60))
    assert index.chunks(0, 250) == [(0, 100, 0, 110), (100, 200, 110, 220), (200, 250, 220, 280)]
    assert index.chunks(150, 151) == [(100, 200, 110, 220)]
    assert index.chunks(199, 201) == [(100, 200, 110, 220), (200, 250, 220, 280)]
    assert index.chunks(250, 300) == [] and index.object_size == 280


def _log(tmp_path, n=600, segment_bytes=8 << 10):
    """A one-partition log of ``n`` keyed records in 20-record batches, and its rows."""
    log_dir = tmp_path / "logs"
    rows = [{"key": f"k{i % 7}".encode(), "value": (b"v%05d" % i) * 20} for i in range(n)]
    kl.write_log(pa.Table.from_pylist(rows), log_dir, topic=TOPIC, segment_bytes=segment_bytes,
                 max_batch_records=20, index_interval_bytes=1024)
    return log_dir, kl.read_log(log_dir)


@pytest.mark.parametrize("compression", [False, True], ids=["plain", "zstd"])
@pytest.mark.parametrize("encrypted", [False, True], ids=["clear", "aes-gcm"])
@pytest.mark.parametrize("metadata", [True, False], ids=["metadata", "listing"])
def test_history_through_an_aiven_tier(tmp_path, compression, encrypted, metadata):
    log_dir, before = _log(tmp_path)
    off = aiven_offload(log_dir, TOPIC, 0, tmp_path / "bucket", 3, compression=compression,
                        key=rsa_key() if encrypted else None, metadata=metadata)
    whole = kl.read_log(log_dir, topics=[TOPIC], remote_tier=off.tier, remote_tier_layout="aiven",
                        remote_tier_private_key=off.key_file and str(off.key_file))
    assert whole.equals(before.select(whole.column_names))


def test_an_offset_range_fetches_only_its_chunks(tmp_path):
    log_dir, before = _log(tmp_path)
    off = aiven_offload(log_dir, TOPIC, 0, tmp_path / "bucket", 2, compression=True,
                        chunk_size=1000)
    seg_id, start, end, size = off.segments[1]
    aiven_storage._CACHE.clear()
    aiven_storage.STATS.update(object_bytes=0, chunks=0)
    t = kl.read_log(log_dir, topics=[TOPIC], remote_tier=off.tier, remote_tier_layout="aiven",
                    start_offset=start + 20, end_offset=start + 25)
    assert t.column("offset").to_pylist() == list(range(start + 20, start + 25))
    whole_chunks = -(-size // 1000)
    assert 1 <= aiven_storage.STATS["chunks"] < whole_chunks  # not the whole segment


def test_object_key_from_the_custom_metadata(tmp_path):
    log_dir, before = _log(tmp_path)
    off = aiven_offload(log_dir, TOPIC, 0, tmp_path / "bucket", 2, custom_key=True)
    whole = kl.read_log(log_dir, topics=[TOPIC], remote_tier=off.tier, remote_tier_layout="aiven")
    assert whole.column("offset").to_pylist() == list(range(before.num_rows))


def test_encrypted_segments_need_their_key(tmp_path):
    log_dir, _ = _log(tmp_path)
    off = aiven_offload(log_dir, TOPIC, 0, tmp_path / "bucket", 2, key=rsa_key())
    aiven_storage._CACHE.clear()
    with pytest.raises(CompressionError, match="key pair 'key1': no private key given"):
        kl.read_log(log_dir, topics=[TOPIC], remote_tier=off.tier, remote_tier_layout="aiven")
    other = tmp_path / "other.pem"
    from aiven_fixtures import pem

    other.write_bytes(pem(rsa_key()))
    with pytest.raises(CompressionError, match="none of the private keys given unwraps it") as e:
        kl.read_log(log_dir, topics=[TOPIC], remote_tier=off.tier, remote_tier_layout="aiven",
                    remote_tier_private_key=str(other))
    assert "PRIVATE KEY" not in str(e.value)


def test_a_damaged_encrypted_chunk_is_an_error_naming_the_object(tmp_path):
    log_dir, _ = _log(tmp_path)
    off = aiven_offload(log_dir, TOPIC, 0, tmp_path / "bucket", 2, key=rsa_key())
    seg_id, start = off.segments[0][:2]
    obj = off.folder / f"{start:020d}-{seg_id}.log"
    raw = bytearray(obj.read_bytes())
    raw[40] ^= 1
    obj.write_bytes(bytes(raw))
    aiven_storage._CACHE.clear()
    with pytest.raises(CompressionError, match="does not decrypt") as e:
        kl.read_log(log_dir, topics=[TOPIC], remote_tier=off.tier, remote_tier_layout="aiven",
                    remote_tier_private_key=str(off.key_file))
    assert str(obj) in str(e.value)


def test_a_missing_manifest_and_a_wrong_size(tmp_path):
    log_dir, _ = _log(tmp_path)
    off = aiven_offload(log_dir, TOPIC, 0, tmp_path / "bucket", 2)
    seg_id, start = off.segments[1][:2]
    (off.folder / f"{start:020d}-{seg_id}.rsm-manifest").unlink()
    aiven_storage._CACHE.clear()
    with pytest.raises(RemoteTierError, match="rsm-manifest is missing"):
        kl.read_log(log_dir, topics=[TOPIC], remote_tier=off.tier, remote_tier_layout="aiven")


def test_info_verify_and_the_data_source_over_an_aiven_tier(tmp_path, capsys):
    import json

    from kafkalog_spark.cli import main
    from kafkalog_spark.datasource.options import parse_read_options
    from kafkalog_spark.datasource.plan import plan_scan
    from kafkalog_spark.datasource.reader import read_split

    log_dir, before = _log(tmp_path)
    off = aiven_offload(log_dir, TOPIC, 0, tmp_path / "bucket", 3, compression=True,
                        key=rsa_key())
    key = str(off.key_file)
    assert main(["info", "--json", str(log_dir), "--remote-tier", str(off.tier),
                 "--remote-tier-layout", "aiven", "--remote-tier-private-key", key]) == 0
    info = json.loads(capsys.readouterr().out)
    [part] = [p for p in info["log_dirs"][0]["partitions"] if p["topic"] == TOPIC]
    assert part["remote"]["remote_segments"] == 3 and part["records"] == before.num_rows
    try:
        code = main(["verify", "--local", str(log_dir), "--remote-tier", str(off.tier),
                     "--remote-tier-layout", "aiven", "--remote-tier-private-key", key])
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr().out
    assert code == 0, out
    assert key not in out  # the key file is never printed... and its contents neither
    opts = parse_read_options({"path": str(log_dir), "subscribe": TOPIC, "remoteTier": str(off.tier),
                               "remoteTierLayout": "aiven", "remoteTierPrivateKey": key,
                               "maxBytesPerPartition": "4096"})
    rows = [o for s in plan_scan(opts).splits for b in read_split(s, opts)
            for o in b.column("offset").to_pylist()]
    assert rows == list(range(before.num_rows))


def test_dump_a_partition_with_an_aiven_tier(tmp_path, capsys):
    from kafkalog_spark.cli import main

    log_dir, _ = _log(tmp_path)
    off = aiven_offload(log_dir, TOPIC, 0, tmp_path / "bucket", 2, compression=True)
    assert main(["dump", "--remote-tier", str(off.tier), "--remote-tier-layout", "aiven",
                 str(log_dir / f"{TOPIC}-0")]) == 0
    out = capsys.readouterr().out
    seg_id, start = off.segments[1][:2]
    assert f"Dumping {off.folder / f'{start:020d}-{seg_id}.log'}" in out
    assert f"Log starting offset: {start}" in out and f"baseOffset: {start} " in out
    assert f"Dumping {off.folder / f'{start:020d}-{seg_id}.index'}" in out


# --- on an object store: ranged GETs of the chunks a read needs ---------------------------------

@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    from s3 import SeaweedS3

    server = SeaweedS3(tmp_path_factory.mktemp("seaweed"))
    try:
        server.start()
        server.make_bucket("tier")
        yield server
    finally:
        server.stop()


@pytest.mark.slow
def test_an_aiven_tier_on_s3_is_read_by_ranged_gets_of_the_needed_chunks(tmp_path, s3):
    from s3 import ACCESS_KEY, SECRET_KEY
    from test_object_storage_read import upload

    import numpy as np

    from kafkalog_spark.codec.files.index import read_offset_index
    from kafkalog_spark.storage import as_path, storage_for

    log_dir, before = _log(tmp_path, n=2000, segment_bytes=96 << 10)
    off = aiven_offload(log_dir, TOPIC, 0, tmp_path / "bucket", 2, compression=True,
                        key=rsa_key(), chunk_size=1000)
    uri = upload(s3, off.tier, "tier/prefix")
    opts = {"endpoint": s3.endpoint, "access_key_id": ACCESS_KEY,
            "secret_access_key": SECRET_KEY, "allow_http": "true"}
    whole = kl.read_log(log_dir, topics=[TOPIC], remote_tier=uri, remote_tier_layout="aiven",
                        remote_tier_private_key=str(off.key_file), storage_options=opts)
    assert whole.column("offset").to_pylist() == list(range(before.num_rows))
    # an offset range inside the second remote segment
    seg_id, start, end, size = off.segments[1]
    lo, hi = start + 300, start + 305
    aiven_storage._CACHE.clear()
    storage = storage_for(as_path(uri, opts))
    storage.requests.reset()
    got = kl.read_log(log_dir, topics=[TOPIC], remote_tier=uri, remote_tier_layout="aiven",
                      remote_tier_private_key=str(off.key_file), storage_options=opts,
                      start_offset=lo, end_offset=hi)
    counts = storage.requests.reset()
    assert got.column("offset").to_pylist() == list(range(lo, hi))
    manifest = json.loads((off.folder / f"{start:020d}-{seg_id}.rsm-manifest").read_bytes())
    sizes = transformed_chunk_sizes(manifest["chunkIndex"]["transformedChunks"], Location())
    # the bytes an index-narrowed read of [lo, hi) walks (log.window.read_window): from the
    # offset index entry at or below lo to the entry after the first one past hi - 1
    index = read_offset_index(kl_segment_bytes(off, start, "index"), start)
    k_lo = int(np.searchsorted(index.offsets, lo, side="right")) - 1
    k_hi = int(np.searchsorted(index.offsets, hi - 1, side="right")) - 1
    first = int(index.positions[k_lo]) if k_lo >= 0 else 0
    last = int(index.positions[k_hi + 2]) if k_hi + 2 < len(index.positions) else size
    chunks = range(first // 1000, (last - 1) // 1000 + 1)
    needed = sum(sizes[i] for i in chunks)
    # whole chunks of that window, nothing more: stored bytes fetched = stored bytes needed
    assert counts["bytes.log"] == needed, (counts, needed, list(chunks))
    assert counts["bytes.log"] < sum(sizes) / 10  # far from the whole object
    print(f"aiven on S3, offsets [{lo}, {hi}): .log GETs {counts['bytes.log']} B for a "
          f"{last - first} B window ({needed / (last - first):.2f}x: whole zstd chunks); "
          f"requests {counts}")


def kl_segment_bytes(off, start: int, kind: str = "log") -> bytes:
    """A file of the remote segment starting at ``start``, restored from its objects."""
    from kafkalog_spark.tiered.aiven_storage import AivenPath, AivenSegment, AivenStorage

    seg_id = next(s[0] for s in off.segments if s[1] == start)
    seg = AivenSegment(off.folder / f"{start:020d}-{seg_id}",
                       (str(off.key_file),) if off.key_file else ())
    return AivenStorage(seg).read_bytes(AivenPath(seg, f"{start:020d}-{seg_id}.{kind}"))


# --- the layout from before 2023-10: one object per index -------------------------------------

def _objects(off) -> dict[str, set[str]]:
    """Per segment (``<offset>-<id>``) the suffixes of its objects in the partition folder."""
    out: dict[str, set[str]] = {}
    for p in off.folder.iterdir():
        stem, _, suffix = p.name.partition(".")
        out.setdefault(stem, set()).add(suffix)
    return out


@pytest.mark.parametrize("compression", [False, True], ids=["plain", "zstd"])
@pytest.mark.parametrize("encrypted", [False, True], ids=["clear", "aes-gcm"])
@pytest.mark.parametrize("metadata", [True, False], ids=["metadata", "listing"])
def test_history_through_a_pre_2023_aiven_tier(tmp_path, compression, encrypted, metadata):
    log_dir, before = _log(tmp_path)
    originals = {p.name: p.read_bytes() for p in (log_dir / f"{TOPIC}-0").iterdir()}
    off = aiven_offload(log_dir, TOPIC, 0, tmp_path / "bucket", 3, compression=compression,
                        key=rsa_key() if encrypted else None, metadata=metadata, legacy=True,
                        key_id=None)  # encrypted: a manifest from before key pair ids too
    assert {frozenset(k) for k in _objects(off).values()} == {frozenset((
        "log", "rsm-manifest", "index", "timeindex", "snapshot", "leader-epoch-checkpoint"))}
    seg_id, start = off.segments[1][:2]
    manifest = json.loads((off.folder / f"{start:020d}-{seg_id}.rsm-manifest").read_bytes())
    assert "segmentIndexes" not in manifest
    assert ":" not in manifest.get("encryption", {}).get("dataKey", "")
    keys = off.key_file and str(off.key_file)
    aiven_storage._CACHE.clear()
    whole = kl.read_log(log_dir, topics=[TOPIC], remote_tier=off.tier, remote_tier_layout="aiven",
                        remote_tier_private_key=keys)
    assert whole.equals(before.select(whole.column_names))
    # each index object restores the broker's file byte for byte ...
    for kind in ("index", "timeindex"):
        assert kl_segment_bytes(off, start, kind) == originals[f"{start:020d}.{kind}"]
    # ... and an offset range is found through it: a few chunks of the segment, not all
    aiven_storage.STATS.update(object_bytes=0, chunks=0)
    t = kl.read_log(log_dir, topics=[TOPIC], remote_tier=off.tier, remote_tier_layout="aiven",
                    remote_tier_private_key=keys, start_offset=start + 20, end_offset=start + 25)
    assert t.column("offset").to_pylist() == list(range(start + 20, start + 25))
    # (listed: planning also reads the last remote segment from its last index entry on)
    chunks = [-(-s[3] // 1000) for s in off.segments]
    assert 1 <= aiven_storage.STATS["chunks"] < (chunks[1] if metadata else sum(chunks) / 2)


def test_info_verify_and_dump_over_a_pre_2023_tier(tmp_path, capsys):
    from kafkalog_spark.cli import main

    log_dir, before = _log(tmp_path)
    off = aiven_offload(log_dir, TOPIC, 0, tmp_path / "bucket", 3, compression=True,
                        key=rsa_key(), legacy=True)
    tier = ["--remote-tier", str(off.tier), "--remote-tier-layout", "aiven",
            "--remote-tier-private-key", str(off.key_file)]
    for _ in range(2):
        assert main(["info", "--json", str(log_dir), *tier]) == 0
        info = json.loads(capsys.readouterr().out)
        [part] = [p for p in info["log_dirs"][0]["partitions"] if p["topic"] == TOPIC]
        assert part["remote"]["remote_segments"] == 3 and part["records"] == before.num_rows
        assert part["remote"]["not_read"] == []
        try:
            code = main(["verify", "--local", str(log_dir), *tier])
        except SystemExit as exc:
            code = exc.code
        out = capsys.readouterr().out
        assert code == 0, out
    assert main(["dump", *tier, str(log_dir / f"{TOPIC}-0")]) == 0
    out = capsys.readouterr().out
    seg_id, start = off.segments[2][:2]
    assert f"Dumping {off.folder / f'{start:020d}-{seg_id}.timeindex'}" in out


def test_a_tier_written_before_and_after_the_2023_layout_change(tmp_path):
    from tiered_fixtures import set_log_start

    log_dir, before = _log(tmp_path)
    old = aiven_offload(log_dir, TOPIC, 0, tmp_path / "bucket", 2, compression=True,
                        legacy=True)
    new = aiven_offload(log_dir, TOPIC, 0, tmp_path / "bucket", 2, compression=True)
    set_log_start(log_dir, TOPIC, 0, 0)  # the history starts at 0, in the older objects
    kinds = _objects(new)
    assert sum("indexes" in k for k in kinds.values()) == 2
    assert sum("leader-epoch-checkpoint" in k for k in kinds.values()) == 2
    for metadata_log in (True, False):
        logs = log_dir
        if not metadata_log:  # the tier listed: both layouts recognised
            logs = tmp_path / "listed"
            shutil.copytree(log_dir, logs,
                            ignore=shutil.ignore_patterns("__remote_log_metadata-0"))
        whole = kl.read_log(logs, topics=[TOPIC], remote_tier=old.tier,
                            remote_tier_layout="aiven")
        assert whole.equals(before.select(whole.column_names))


def test_a_pre_2023_segment_missing_an_index_object(tmp_path, capsys):
    from kafkalog_spark.cli import main

    log_dir, _ = _log(tmp_path)
    listed = tmp_path / "listed"
    off = aiven_offload(log_dir, TOPIC, 0, tmp_path / "bucket", 3, legacy=True, metadata=False)
    shutil.copytree(log_dir, listed)
    seg_id, start = off.segments[1][:2]
    (off.folder / f"{start:020d}-{seg_id}.timeindex").unlink()
    assert main(["info", "--json", str(listed), "--remote-tier", str(off.tier),
                 "--remote-tier-layout", "aiven"]) == 0
    [part] = [p for p in json.loads(capsys.readouterr().out)["log_dirs"][0]["partitions"]
              if p["topic"] == TOPIC]
    assert part["remote"]["not_read"] == [f"{start:020d}-{seg_id}: no .timeindex "
                                          "(incomplete copy)"]
    with pytest.raises(RemoteTierError, match=f"offsets {start}..{off.segments[1][2]} are in "
                                              "no segment"):
        kl.read_log(listed, topics=[TOPIC], remote_tier=off.tier, remote_tier_layout="aiven")
