"""``recover --salvage`` (issue 19, part 1): after damage, every valid entry is kept — the
salvaged log equals the original minus exactly the damaged entries, for v2 batches of every
codec and v0/v1 messages, under bit flips, a zeroed page, a torn write at a 4 KiB boundary, a
false length and garbage spliced between entries; ``verify`` is clean, kafka-python reads every
segment, a second run plans nothing, and the search for the next entry stays linear."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from kafka.record.memory_records import MemoryRecords

import kafkalog_spark as kl
from kafkalog_spark.codec.records.resync import next_entry
from kafkalog_spark.codec.records.scan import scan_entries
from kafkalog_spark.recovery.recover import recover
from kafkalog_spark.report import render_recovery

from faults import run_forked
from test_decode import _kp_legacy
from test_recover import crashed
from test_verify import REAL_LOG_DIRS

N = 1500


def v2_log(root: Path, codec: str) -> Path:
    table = pa.table({"key": [b"k%d" % (i % 50) for i in range(N)],
                      "value": [b"value-%d-" % i * (1 + i % 4) for i in range(N)]})
    kl.write_log(table, root / "logs", topic="t", codec=codec, max_batch_records=25,
                 segment_bytes=24 << 10)
    return root / "logs"


def legacy_log(root: Path, magic: int, codec: int) -> Path:
    """A partition of v0/v1 entries (kafka-python's builder), 25 records per wrapper when
    compressed, one message per entry when not, in one segment. A wrapper carries its last
    offset, as a broker writes it (a producer's builder leaves 0 there)."""
    data, offset = bytearray(), 0
    per = 25 if codec else 1
    while offset < 600:
        recs = [(b"k%d" % (offset + i), b"value-%d" % (offset + i)) for i in range(per)]
        entry = bytearray(_kp_legacy(recs, magic, codec, base_offset=offset))
        entry[0:8] = (offset + per - 1).to_bytes(8, "big")
        data += entry
        offset += per
    part = root / "logs" / "t-0"
    part.mkdir(parents=True)
    (part / "00000000000000000000.log").write_bytes(bytes(data))
    (root / "logs" / "meta.properties").write_text("version=0\nbroker.id=0\n")
    return root / "logs"


def segments(logs: Path) -> list[Path]:
    return sorted((logs / "t-0").glob("*.log"))


def entry_offsets(data: bytes) -> list[list[int]]:
    """The record offsets of each entry of ``data`` (kafka-python's reader)."""
    out, records = [], MemoryRecords(data)
    while (batch := records.next_batch()) is not None:
        out.append([r.offset for r in batch])
    return out


def damage(kind: str, data: bytearray, rng: np.random.Generator) -> tuple[bytearray, set[int]]:
    """Damage one entry in the middle of ``data`` (or splice garbage next to it); the entry
    indexes that are lost."""
    table = scan_entries(np.frombuffer(bytes(data), np.uint8))
    k = len(table) // 2
    start, size = int(table.position[k]), int(table.entry_size[k])
    if kind == "bit-flip":
        data[start + size // 2] ^= 1 << int(rng.integers(0, 8))
        return data, {k}
    if kind == "false-length":
        data[start + 8:start + 12] = int(size * 3).to_bytes(4, "big")
        return data, {k}
    if kind == "splice":
        junk = bytes(rng.integers(0, 256, 997, dtype=np.uint8))
        return data[:start] + bytearray(junk) + data[start:], set()
    if kind == "zero-page":  # a 4 KiB page inside entry k, zeroed
        page = (start // 4096 + 1) * 4096
        data[page:page + 4096] = bytes(4096)
    elif kind == "torn-write":  # entry k written up to a 4 KiB boundary, stale bytes after it
        page = (start // 4096 + 1) * 4096
        data[page:page + 3000] = bytes(rng.integers(0, 256, 3000, dtype=np.uint8))
    else:
        raise ValueError(kind)
    lost = {i for i in range(len(table))
            if int(table.position[i]) < page + (4096 if kind == "zero-page" else 3000)
            and int(table.position[i] + table.entry_size[i]) > page}
    return data, lost


KINDS = ["bit-flip", "zero-page", "torn-write", "false-length", "splice"]
FORMATS = [("v2", c) for c in ("none", "gzip", "snappy", "lz4", "zstd")] + \
    [("v0", 0), ("v0", 1), ("v1", 0), ("v1", 1), ("v1", 2)]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("fmt", "codec"), FORMATS)
def test_salvage_keeps_everything_but_the_damaged_entries(tmp_path, fmt, codec, kind):
    logs = (v2_log(tmp_path, codec) if fmt == "v2"
            else legacy_log(tmp_path, int(fmt[1]), codec))
    segs = segments(logs)
    victim = segs[len(segs) // 2]
    original = {s.name: entry_offsets(s.read_bytes()) for s in segs}
    data, lost = damage(kind, bytearray(victim.read_bytes()), np.random.default_rng(7))
    victim.write_bytes(bytes(data))
    expected = [o for s in segs for i, entry in enumerate(original[s.name])
                if not (s == victim and i in lost) for o in entry]

    crashed(logs)  # nothing flushed: a broker's load checks every segment
    default = recover([logs])  # Kafka's rule cuts here; the report says what salvage keeps
    cut = [p for p in default.partitions if p.cut]
    if kind != "splice" or fmt == "v2":
        assert cut and cut[0].salvage_would_keep["damaged_ranges"] >= 1
    report = recover([logs], salvage=True, execute_plan=True)
    assert any(p.damage for p in report.partitions), render_recovery(report)

    got = kl.read_log(logs)["offset"].to_pylist()
    assert got == expected
    assert kl.verify(logs).ok
    kept = [o for s in segments(logs) for e in entry_offsets(s.read_bytes()) for o in e]
    assert kept == expected  # kafka-python reads the salvaged segments
    assert not recover([logs], salvage=True).changed  # nothing left to do
    gap = report.partitions[0].damage[0]
    assert gap["last_offset_before"] is None or gap["last_offset_before"] < (
        gap["first_offset_after"] if gap["first_offset_after"] is not None else 1 << 62)


def test_dry_run_changes_nothing_and_plans_the_rewrite(tmp_path):
    logs = v2_log(tmp_path, "lz4")
    victim = segments(logs)[1]
    data, _ = damage("bit-flip", bytearray(victim.read_bytes()), np.random.default_rng(1))
    victim.write_bytes(bytes(data))
    before = {p: p.read_bytes() for p in logs.rglob("*") if p.is_file()}
    report = recover([logs], salvage=True)
    text = render_recovery(report)
    assert "salvage " in text and "damaged bytes" in text and "offset gap after" in text
    # the plan reports (and caps the checkpoints to) the log end the salvage leaves
    assert report.partitions[0].log_end == N and report.partitions[0].first_base == 0
    assert {p: p.read_bytes() for p in logs.rglob("*") if p.is_file()} == before


def _salvage(step, logs: str) -> None:
    recover([logs], salvage=True, execute_plan=True, step=step)


@pytest.mark.slow  # a fork per step: the JIT pass runs it
def test_a_run_killed_at_any_step_is_finished_by_the_next(tmp_path):
    """SIGKILL (a forked child) before each durable step of a salvage, then a second run."""
    def build(root: Path) -> tuple[Path, list[int]]:
        logs = v2_log(root, "none")
        segs = segments(logs)
        victim = segs[1]
        original = {s.name: entry_offsets(s.read_bytes()) for s in segs}
        data, lost = damage("bit-flip", bytearray(victim.read_bytes()), np.random.default_rng(3))
        victim.write_bytes(bytes(data))
        return logs, [o for s in segs for i, e in enumerate(original[s.name])
                      if not (s == victim and i in lost) for o in e]

    logs, _ = build(tmp_path / "probe")
    probe = run_forked(_salvage, logs=str(logs))
    assert probe.finished and len(probe.steps) > 5, probe
    for k in range(1, len(probe.steps) + 1):
        logs, expected = build(tmp_path / str(k))
        out = run_forked(_salvage, kill_at=k, logs=str(logs))
        assert out.killed, (k, out)
        recover([logs], salvage=True, execute_plan=True)
        assert kl.read_log(logs)["offset"].to_pylist() == expected, (k, out.steps[-1])
        assert kl.verify(logs).ok, (k, out.steps[-1])


def test_the_search_is_linear_in_the_bytes_scanned():
    """Checksums are computed only where a header parses: over random bytes, constant bytes and
    repeating patterns the bytes checksummed stay a small multiple of the bytes scanned."""
    rng = np.random.default_rng(11)
    size = 256 << 10  # a search quadratic in anything would show here many times over
    inputs = [rng.integers(0, 256, 2 * size, dtype=np.uint8)]
    inputs += [np.full(size, c, np.uint8) for c in (0, 1, 2, 0x7F, 0xFF)]
    inputs += [np.tile(rng.integers(0, 256, p, dtype=np.uint8), size // p)
               for p in (3, 17, 61, 1000)]
    for buf in inputs:
        work: dict[str, int] = {}
        assert next_entry(buf, 0, work=work) is None
        assert work.get("checksummed", 0) <= 2 * len(buf), work


@pytest.mark.parametrize("name", REAL_LOG_DIRS)
def test_salvage_on_real_brokers_log_dirs(shared_fixtures, tmp_path, name):
    """Each real broker's log dir, one checksum-breaking bit flipped in an entry of its longest
    segment with a valid entry after it: salvage drops exactly that entry's records and keeps
    every other."""
    logs = tmp_path / "logs"
    shutil.copytree(shared_fixtures / name, logs, ignore=shutil.ignore_patterns(".lock"))
    clean = kl.verify(logs).ok
    segs = [p for p in logs.glob("*-*/*.log") if not p.parent.name.startswith("__cluster_metadata")]
    victim = max(segs, key=lambda p: len(scan_entries(np.frombuffer(p.read_bytes(), np.uint8))))
    data = bytearray(victim.read_bytes())
    t = scan_entries(np.frombuffer(bytes(data), np.uint8))
    assert len(t) >= 2, victim
    k = len(t) // 2 if len(t) >= 3 else 0  # an entry with a valid one after it
    lo = int(t.last_offset[k - 1]) if k else int(victim.stem) - 1
    lost = (lo, int(t.last_offset[k]))  # offsets in (lo, hi]
    before = kl.read_log(victim.parent)["offset"].to_pylist()
    data[int(t.position[k]) + int(t.entry_size[k]) - 3] ^= 0x20  # in the payload: CRC fails
    victim.write_bytes(bytes(data))

    report = recover([logs], salvage=True, execute_plan=True)
    assert any(p.damage for p in report.partitions), render_recovery(report)
    after = kl.read_log(victim.parent)["offset"].to_pylist()
    assert after == [o for o in before if not lost[0] < o <= lost[1]]
    assert len(after) < len(before)
    assert kl.verify(logs).ok or not clean


def test_salvage_repairs_damage_below_the_recovery_point(tmp_path):
    """A clean log dir (write_log: the recovery point at the log end) with a flipped bit in a
    middle segment: the broker's load would not look there, so recover leaves it and says so;
    --salvage, asked for, drops the damaged batch wherever it lies and keeps the rest."""
    logs = v2_log(tmp_path, "none")
    victim = segments(logs)[1]
    before = kl.read_log(logs)["offset"].to_pylist()
    data, lost = damage("bit-flip", bytearray(victim.read_bytes()), np.random.default_rng(3))
    victim.write_bytes(bytes(data))
    plain = recover([logs], execute_plan=True)
    assert plain.partitions[0].cut is None and victim.read_bytes() == bytes(data)
    assert any(line.startswith(f"{victim.name}: ") and "--salvage" in line
               for line in plain.partitions[0].left)
    assert not kl.verify(logs).ok
    salvaged = recover([logs], salvage=True, execute_plan=True)
    assert salvaged.partitions[0].damage and kl.verify(logs, deep=True).ok
    got = kl.read_log(logs)["offset"].to_pylist()
    assert set(got) < set(before) and got == sorted(got) and got[-1] == before[-1]
    assert not recover([logs]).changed and not recover([logs], salvage=True).changed
