"""The bounded key map (compaction/key_map.py) and what it promises: a round cut where the map
fills (Kafka's ``buildOffsetMap`` end offset), several passes giving the one-pass result, and
key digests giving the exact-key result — on generated topics, transactions, the property
model's logs and the real compacted fixtures."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog_spark import verify
from kafkalog_spark.codec.files import checkpoints as C
from kafkalog_spark.codec.records.digest import key_digests
from kafkalog_spark.codec.records.encode import BatchSpec, encode_batch
from kafkalog_spark.compaction.compact import compact, plan_log_dir
from kafkalog_spark.compaction.key_map import ENTRY_BYTES, LOAD_FACTOR, KeyMap
from kafkalog_spark.compaction.rewrite import map_keys
from kafkalog_spark.errors import InvalidOptionError
from kafkalog_spark.codec.files import naming as N
from kafkalog_spark.storage.atomic import read_checkpoint_file
from kafkalog_spark.log.discovery import discover

import pyarrow as pa
from test_compaction import REAL, T, _find, build_partition, rec, rows, txn_log
from test_compaction_model import cut_segments, generate, op

OPTS = {"cleanup.policy": "compact", "segment.bytes": 700}


def digests(*keys: bytes):
    return key_digests(pa.array(list(keys), pa.binary()))


def memory_for(keys: int) -> int:
    """A map budget that holds exactly ``keys`` keys."""
    slots = int(keys / LOAD_FACTOR) + 1
    while int(slots * LOAD_FACTOR) < keys:
        slots += 1
    while int(slots * LOAD_FACTOR) > keys:
        slots -= 1
    return slots * ENTRY_BYTES


def test_key_map_puts_gets_and_stops_when_full() -> None:
    m = KeyMap(1 << 10)  # 42 slots, 37 keys
    assert m.limit == int((1024 // 24) * 0.9) == 37
    keys = [b"k%d" % i for i in range(40)]
    hi, lo = digests(*keys)
    assert m.put(hi[:10], lo[:10], np.arange(10)) == 10
    assert m.put(hi[:3], lo[:3], np.array([20, 21, 22])) == 3  # existing keys: newer offsets
    got = m.get(hi, lo)
    assert got[:3].tolist() == [20, 21, 22] and got[3:10].tolist() == list(range(3, 10))
    assert (got[10:] == -1).all()
    assert m.put(hi[10:], lo[10:], np.arange(100, 130)) == 27  # 37 keys: full
    assert m.full and m.size == 37
    # full: even a key already in the map stops the pass (Kafka checks the size first)
    assert m.put(hi[:1], lo[:1], np.array([500])) == 0
    assert m.get(hi[:1], lo[:1]).tolist() == [20]
    with pytest.raises(ValueError, match="at least"):
        KeyMap(47)
    assert KeyMap(48).limit == 1


def test_small_maps_are_small() -> None:
    assert KeyMap(128 << 20, most_keys=1000).nbytes < 40_000
    assert KeyMap(1 << 20).nbytes <= 1 << 20


def partition_log(n: int = 60, keys: int = 12) -> list[list[bytes]]:
    """Six segments of keyed records (tombstones among them), then the active segment."""
    batches = [rec(i, b"k%d" % (i * 7 % keys), None if i % 13 == 5 else b"v%d" % i)
               for i in range(n)]
    return [batches[j:j + 10] for j in range(0, n, 10)] + [[]]


def end_of_map(log_dir: Path, keys: int) -> int:
    (plan,) = plan_log_dir(discover(log_dir).log_dirs[0], now_ms=T, options=OPTS,
                           config_file=None, topics=None, force=True, skipped=[])
    return map_keys(plan.groups, KeyMap(memory_for(keys)))


def test_the_round_ends_where_the_map_filled(tmp_path) -> None:
    """``endOffset = latestOffset + 1``: the last record put, or the last batch read whole, or
    the offset before the next segment after a segment read whole (KAFKA_FORMATS §15.4)."""
    log_dir = tmp_path / "logs"
    build_partition(log_dir, partition_log(keys=12))
    assert end_of_map(log_dir, 13) == 60  # every key fits: firstUncleanable
    # a map full with the 12 keys: the next record (offset 12, a known key) still stops it
    assert end_of_map(log_dir, 12) == 12
    # keys k0..k11 appear at offsets 0..11 (i*7 % 12 runs over all of them): the 5th key
    # is refused at offset 4, so the round ends after offset 3
    assert end_of_map(log_dir, 4) == 4
    assert end_of_map(log_dir, 11) == 11
    # several records per batch: a key refused inside a batch ends the round after the last
    # record put there
    log2 = tmp_path / "multi"
    seg = [encode_batch([b"a", b"b", b"c"], [b"1", b"2", b"3"], [T] * 3,
                        spec=BatchSpec(base_offset=0)),
           encode_batch([b"a", b"d", b"e"], [b"4", b"5", b"6"], [T] * 3,
                        spec=BatchSpec(base_offset=3))]
    build_partition(log2, [seg, []])
    assert end_of_map(log2, 4) == 5  # a (3) updated, d (4) the 4th key, e refused
    assert end_of_map(log2, 2) == 2  # c refused at 2 -> after b (1)
    assert end_of_map(log2, 3) == 3  # full with a, b, c: a (3) refused -> after batch 0


def one_and_several_passes(tmp_path: Path, segments: list[list[bytes]], keys: int, **kw):
    """Compact copies of one log in one pass and with a map of ``keys`` keys; returns both log
    dirs and the several-pass run's result."""
    one, many = tmp_path / "one", tmp_path / "many"
    build_partition(one, segments)
    shutil.copytree(one, many)
    opts = {**OPTS, **kw.pop("options", {})}
    compact(one, now_ms=T, execute=True, force=True, options=opts, **kw)
    result = compact(many, now_ms=T, execute=True, force=True, options=opts,
                     dedupe_buffer_bytes=memory_for(keys), **kw)
    return one, many, result


def same_log(a: Path, b: Path) -> None:
    """Same records and the same batches, byte for byte, over the whole partition."""
    assert rows(a) == rows(b)
    for pdir in sorted(p for p in a.iterdir() if p.is_dir()):
        data_a = b"".join(f.read_bytes() for f in sorted(pdir.glob("*.log")))
        data_b = b"".join(f.read_bytes() for f in sorted((b / pdir.name).glob("*.log")))
        assert data_a == data_b, pdir.name


def test_several_passes_give_the_one_pass_result(tmp_path) -> None:
    one, many, result = one_and_several_passes(tmp_path, partition_log(keys=12), keys=4)
    assert result.metrics["passes"] > 2 and result.metrics["partitions_cleaned"] == 1
    ends = [p.end_offset for p in result.plans]
    assert ends == sorted(ends) and ends[-1] == 60
    same_log(one, many)
    assert verify(many, deep=True).ok
    ckpt = read_checkpoint_file(many / N.CLEANER_OFFSET_CHECKPOINT, C.parse_offset_checkpoint)
    assert ckpt[("t", 0)] == 60


def test_several_passes_with_transactions(tmp_path) -> None:
    one, many, result = one_and_several_passes(tmp_path, txn_log(), keys=1,
                                               options={"segment.bytes": 300})
    assert result.metrics["passes"] > 1
    same_log(one, many)
    assert verify(many, deep=True).ok


def test_a_pass_stopped_by_a_crash_goes_on_from_its_checkpoint(tmp_path) -> None:
    """Each pass is a round of its own: a run that stops after the first pass leaves a
    cleaned prefix and a checkpoint; the next run finishes the job."""
    from test_compaction import Crash

    one, many = tmp_path / "one", tmp_path / "many"
    build_partition(one, partition_log(keys=12))
    shutil.copytree(one, many)
    compact(one, now_ms=T, execute=True, force=True, options=OPTS)
    swaps = []

    def step(label: str) -> None:
        if label.startswith("write " + N.CLEANER_OFFSET_CHECKPOINT):
            swaps.append(label)
        elif swaps:
            raise Crash(label)

    with pytest.raises(Crash):
        compact(many, now_ms=T, execute=True, force=True, options=OPTS,
                dedupe_buffer_bytes=memory_for(4), step=step)
    ckpt = read_checkpoint_file(many / N.CLEANER_OFFSET_CHECKPOINT, C.parse_offset_checkpoint)
    assert 0 < ckpt[("t", 0)] < 60
    compact(many, now_ms=T, execute=True, force=True, options=OPTS,
            dedupe_buffer_bytes=memory_for(4))
    same_log(one, many)


def test_dedupe_buffer_must_hold_a_few_keys(tmp_path) -> None:
    log_dir = tmp_path / "logs"
    build_partition(log_dir, partition_log())
    with pytest.raises(InvalidOptionError, match="dedupe buffer"):
        compact(log_dir, now_ms=T, execute=True, options=OPTS, dedupe_buffer_bytes=10)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(op, min_size=1, max_size=30), cuts=st.lists(st.integers(1, 6), min_size=1,
                                                                  max_size=8),
       keys=st.integers(1, 4))
def test_model_logs_several_passes_and_exact_keys(ops, cuts, keys):
    """The property model's logs (keys, tombstones, keyless records, transactions): a map of
    1-4 keys and exact keys both give the default run's bytes."""
    import tempfile

    batches, _ = generate(ops)
    segments = cut_segments(batches, cuts)
    tmp = Path(tempfile.mkdtemp())
    try:
        opts = {"segment.bytes": 400}
        one, many, _ = one_and_several_passes(tmp, segments + [[]], keys=keys, options=opts)
        same_log(one, many)
        exact = tmp / "exact"
        build_partition(exact, segments + [[]])
        compact(exact, now_ms=T, execute=True, force=True, options={**OPTS, **opts},
                exact_keys=True)
        same_log(one, exact)
    finally:
        shutil.rmtree(tmp)


@pytest.mark.fixtures
@pytest.mark.parametrize("repo,name", REAL)
def test_real_fixtures_digests_exact_keys_and_passes(shared_fixtures, tmp_path, repo, name):
    """Real brokers' compacted topics: digests, exact keys and a small map agree byte for
    byte."""
    from test_compaction import prepare_real

    src = _find(shared_fixtures, repo, name)
    runs = {}
    for label, kw in (("digest", {}), ("exact", {"exact_keys": True}),
                      ("passes", {"dedupe_buffer_bytes": memory_for(3)})):
        log_dir = tmp_path / label
        prepare_real(src, log_dir, name)
        runs[label] = compact(log_dir, now_ms=T, execute=True, force=True,
                              options={"cleanup.policy": "compact"}, **kw)
        assert verify(log_dir, deep=True).ok
    same_log(tmp_path / "digest", tmp_path / "exact")
    same_log(tmp_path / "digest", tmp_path / "passes")
    assert runs["passes"].metrics["passes"] >= runs["digest"].metrics["passes"]


def test_segments_are_read_in_windows(tmp_path, monkeypatch) -> None:
    """The key pass and the rewrite decode a segment a window of batches at a time (memory
    does not grow with segment size): windows of a few batches give the same bytes."""
    import kafkalog_spark.compaction.rewrite as R

    one, many, _ = one_and_several_passes(tmp_path, partition_log(), keys=4)
    monkeypatch.setattr(R, "WINDOW_BYTES", 150)  # one to three batches per window
    small = tmp_path / "small"
    build_partition(small, partition_log())
    compact(small, now_ms=T, execute=True, force=True, options=OPTS,
            dedupe_buffer_bytes=memory_for(4))
    same_log(one, small)
    same_log(many, small)
