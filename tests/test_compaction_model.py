"""Property test: one cleaning round equals a naive model of Kafka's rules (§15.7, §15.8) on
generated logs with repeated keys, tombstones, keyless records, committed and aborted
transactions, several producers and segments; every surviving record keeps its offset."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog_spark import read_log, verify
from kafkalog_spark.codec.records.encode import encode_end_txn_marker
from kafkalog_spark.compaction.compact import compact

from test_compaction import T, build_partition, rec

KEYS = [b"a", b"b", b"c", b"d", None]
op = st.one_of(
    st.tuples(st.just("put"), st.sampled_from(KEYS), st.sampled_from([b"x", b"y", None])),
    st.tuples(st.just("txn"), st.sampled_from([7, 8]), st.sampled_from(KEYS[:4]),
              st.sampled_from([b"t", None])),
    st.tuples(st.just("end"), st.sampled_from([7, 8]), st.booleans()))


def generate(ops) -> tuple[list[bytes], list[tuple[int, bytes | None, bytes | None]]]:
    """Batches, and the model's surviving (offset, key, value) rows."""
    batches, data = [], []  # data: (offset, key, value, producer or None)
    open_txn: dict[int, list[int]] = {}
    aborted: set[int] = set()
    seq = {7: 0, 8: 0}
    off = 0
    for o in ops:
        if o[0] == "put":
            batches.append(rec(off, o[1], o[2]))
            data.append((off, o[1], o[2]))
        elif o[0] == "txn":
            pid = o[1]
            batches.append(rec(off, o[2], o[3], producer_id=pid, producer_epoch=0,
                               base_sequence=seq[pid], is_transactional=True))
            seq[pid] += 1
            open_txn.setdefault(pid, []).append(off)
            data.append((off, o[2], o[3]))
        else:
            pid, commit = o[1], o[2]
            if pid not in open_txn:
                continue
            batches.append(encode_end_txn_marker(offset=off, producer_id=pid, producer_epoch=0,
                                                 coordinator_epoch=0, commit=commit, timestamp=T))
            if not commit:
                aborted.update(open_txn[pid])
            del open_txn[pid]
        off += 1
    for pid, offsets in sorted(open_txn.items()):  # close every transaction (LSO = LEO)
        batches.append(encode_end_txn_marker(offset=off, producer_id=pid, producer_epoch=0,
                                             coordinator_epoch=0, commit=False, timestamp=T))
        aborted.update(offsets)
        off += 1
    live = [d for d in data if d[0] not in aborted and d[1] is not None]
    latest = {}
    for d in live:
        latest[d[1]] = d[0]
    model = [d for d in live if latest[d[1]] == d[0]]
    return batches, model


def cut_segments(batches: list[bytes], cuts: list[int]) -> list[list[bytes]]:
    """``batches`` cut into segments of ``cuts`` batches each (the rest in one more)."""
    segments, i = [], 0
    for c in cuts:
        if i < len(batches):
            segments.append(batches[i:i + c])
            i += c
    if i < len(batches):
        segments.append(batches[i:])
    return segments


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(op, min_size=1, max_size=30), cuts=st.lists(st.integers(1, 6), min_size=1,
                                                                  max_size=8),
       late=st.booleans())
def test_one_round_equals_the_model(ops, cuts, late):
    """``late``: the round runs two days after the records, when every producer has expired
    (producer.id.expiration.ms): their last batches are no longer kept, records are the same."""
    batches, model = generate(ops)
    segments = cut_segments(batches, cuts)
    tmp = Path(tempfile.mkdtemp())
    try:
        log_dir = tmp / "logs"
        build_partition(log_dir, segments + [[]])
        compact(log_dir, now_ms=T + 2 * 86_400_000 if late else T, execute=True, force=True,
                options={"cleanup.policy": "compact", "segment.bytes": 400})
        t = read_log(log_dir, include_control=False)
        got = list(zip(t.column("offset").to_pylist(), t.column("key").to_pylist(),
                       t.column("value").to_pylist()))
        assert got == model
        assert verify(log_dir, deep=True).ok
    finally:
        shutil.rmtree(tmp)
