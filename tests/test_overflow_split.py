"""Offset-overflow split (issue 19, part 2): a legacy segment whose offsets run past its base
offset + ``Integer.MAX_VALUE`` is split as Kafka's ``LocalLog.splitOverflowedSegment`` splits it —
new segments at the base offset of their first entry, each filled while ``lastOffset - base``
fits an int32, nothing cut — for v2 batches and v0/v1 messages (compressed wrappers included);
the split dir reads back with every record, verifies clean, kafka-python reads each new segment,
a dry run changes no byte, and a run killed at any step is finished by the next."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from kafka.record.memory_records import MemoryRecords

import kafkalog_spark as kl
from kafkalog_spark.codec import layout as L
from kafkalog_spark.codec.records.encode import BatchSpec, encode_batch
from kafkalog_spark.recovery.quarantine import read_manifests
from kafkalog_spark.recovery.recover import recover
from kafkalog_spark.report import render_recovery

from faults import run_forked
from test_decode import _kp_legacy

MAX = L.INT32_MAX
# entry base offsets: 0 and 10^9 fit base 0; 2^31+100 does not, so it starts the second segment,
# which 3*10^9 fits; 5*10^9 starts the third
BASES = [0, 10**9, 2**31 + 100, 3 * 10**9, 5 * 10**9]
EXPECTED_SEGMENTS = [0, 2**31 + 100, 5 * 10**9]
PER = 5  # records per entry


def _records(base: int) -> list[tuple[bytes, bytes]]:
    return [(b"k%d" % (base + i), b"value-%d" % (base + i)) for i in range(PER)]


def _v2_entry(base: int, codec: int) -> bytes:
    recs = _records(base)
    return encode_batch([k for k, _ in recs], [v for _, v in recs],
                        np.arange(PER, dtype=np.int64) + 1_700_000_000_000,
                        spec=BatchSpec(base_offset=base, codec=codec, partition_leader_epoch=3))


def _legacy_entries(base: int, magic: int, codec: int) -> bytes:
    """A compressed wrapper of PER messages carrying its last offset (as a broker writes it),
    or PER plain messages."""
    recs = _records(base)
    if codec:
        entry = bytearray(_kp_legacy(recs, magic, codec, base_offset=base))
        entry[0:8] = (base + PER - 1).to_bytes(8, "big")
        return bytes(entry)
    return b"".join(_kp_legacy([r], magic, 0, base_offset=base + i) for i, r in enumerate(recs))


def overflowed_log(root: Path, fmt: str, codec: int, tail: bytes = b"") -> Path:
    make = (lambda b: _v2_entry(b, codec)) if fmt == "v2" else \
        (lambda b: _legacy_entries(b, int(fmt[1]), codec))
    part = root / "logs" / "t-0"
    part.mkdir(parents=True)
    (part / "00000000000000000000.log").write_bytes(b"".join(make(b) for b in BASES) + tail)
    (root / "logs" / "meta.properties").write_text("version=0\nbroker.id=0\n")
    return root / "logs"


def expected_offsets() -> list[int]:
    return [b + i for b in BASES for i in range(PER)]


def segment_files(logs: Path) -> list[Path]:
    return sorted((logs / "t-0").glob("*.log"))


def kafka_python_offsets(logs: Path) -> list[int]:
    out = []
    for seg in segment_files(logs):
        records = MemoryRecords(seg.read_bytes())
        while (batch := records.next_batch()) is not None:
            out.extend(r.offset for r in batch)
    return out


FORMATS = [("v2", 0), ("v2", 3), ("v2", 1), ("v0", 0), ("v0", 1), ("v1", 0), ("v1", 1), ("v1", 2)]


@pytest.mark.parametrize(("fmt", "codec"), FORMATS)
def test_an_overflowed_segment_is_split_as_kafka_splits_it(tmp_path, fmt, codec):
    logs = overflowed_log(tmp_path, fmt, codec)
    original = (logs / "t-0" / "00000000000000000000.log").read_bytes()
    assert not kl.verify(logs).ok  # the segment cannot be indexed as it is

    report = recover([logs], execute_plan=True)
    text = render_recovery(report)
    assert "split " in text and report.partitions[0].cut is None, text
    assert [int(p.stem) for p in segment_files(logs)] == EXPECTED_SEGMENTS
    # nothing cut: the new segments are the old one's bytes, in order
    assert b"".join(p.read_bytes() for p in segment_files(logs)) == original
    assert report.partitions[0].log_end == BASES[-1] + PER
    table = kl.read_log(logs)
    assert table["offset"].to_pylist() == expected_offsets()
    assert table["key"].to_pylist() == [b"k%d" % o for o in expected_offsets()]
    assert kafka_python_offsets(logs) == expected_offsets()
    assert kl.verify(logs).ok
    for p in segment_files(logs):  # indexes rebuilt for each new segment
        assert p.with_suffix(".index").exists() and p.with_suffix(".timeindex").exists()
    # the old segment went to the quarantine whole
    moved = [e for m in read_manifests(Path(f"{logs}.kafkalog-quarantine")) for e in m["entries"]
             if Path(e["file"]).name.startswith("00000000000000000000.log")]
    assert moved and "offset overflow split" in moved[0]["reason"]
    assert not recover([logs]).changed  # a second run plans nothing


def test_dry_run_plans_the_split_and_changes_nothing(tmp_path):
    logs = overflowed_log(tmp_path, "v1", 0)
    before = {p: p.read_bytes() for p in logs.rglob("*") if p.is_file()}
    report = recover([logs])
    d = report.to_dict()["partitions"][0]
    split = [a for a in d["actions"] if a["action"] == "split-segment"]
    assert len(split) == 1 and "2147483748" in split[0]["reason"] and "5000000000" in split[0]["reason"]
    assert d["cut"] is None and d["log_end_offset"] == BASES[-1] + PER
    assert {p: p.read_bytes() for p in logs.rglob("*") if p.is_file()} == before


def test_an_invalid_tail_after_the_split_is_cut_into_the_quarantine(tmp_path):
    logs = overflowed_log(tmp_path, "v2", 0, tail=b"\x07" * 300)
    report = recover([logs], execute_plan=True)
    assert [int(p.stem) for p in segment_files(logs)] == EXPECTED_SEGMENTS
    assert report.partitions[0].log_end == BASES[-1] + PER
    assert kl.read_log(logs)["offset"].to_pylist() == expected_offsets()
    assert kl.verify(logs).ok


def test_split_then_salvage(tmp_path):
    """Damage after the overflow: the split keeps the valid prefix as Kafka does (the damaged
    rest stays, untouched, in the last new segment), then salvage keeps what checks out after
    the damage. Offsets are not checksummed, so salvage keeps only entries inside their
    segment's int32 range: the entry at 5*10^9 after the damage goes to the quarantine as
    damage too (reported with its reason). A dry run plans the split and what follows it: the
    execute run's actions, every one."""
    logs = overflowed_log(tmp_path, "v2", 0)
    seg = logs / "t-0" / "00000000000000000000.log"
    data = bytearray(seg.read_bytes())
    at = sum(len(_v2_entry(b, 0)) for b in BASES[:3])
    data[at + 40] ^= 0x10  # a bit flip inside the entry at 3*10^9
    seg.write_bytes(bytes(data))
    dry = recover([logs], salvage=True)
    report = recover([logs], execute_plan=True, salvage=True)
    assert [a.to_dict() for a in dry.actions] == [a.to_dict() for a in report.actions]
    assert dry.partitions[0].damage == report.partitions[0].damage
    damage = report.partitions[0].damage
    assert [d["reason"] for d in damage] == ["checksum mismatch"], render_recovery(report)
    assert damage[0]["last_offset_before"] == 2**31 + 100 + PER - 1
    assert damage[0]["first_offset_after"] is None  # nothing in range follows
    assert [int(p.stem) for p in segment_files(logs)] == EXPECTED_SEGMENTS[:2]
    assert kl.read_log(logs)["offset"].to_pylist() == expected_offsets()[:3 * PER]
    assert kl.verify(logs).ok


def _split(step, logs: str) -> None:
    recover([logs], execute_plan=True, step=step)


def test_a_run_killed_at_any_step_is_finished_by_the_next(tmp_path):
    """SIGKILL (a forked child) before each durable step of the split, then a second run."""
    probe = run_forked(_split, logs=str(overflowed_log(tmp_path / "probe", "v1", 1)))
    assert probe.finished and len(probe.steps) > 8, probe  # pieces, renames, quarantine moves
    for k in range(1, len(probe.steps) + 1):
        logs = overflowed_log(tmp_path / str(k), "v1", 1)
        out = run_forked(_split, kill_at=k, logs=str(logs))
        assert out.killed, (k, out)
        recover([logs], execute_plan=True)
        assert kl.read_log(logs)["offset"].to_pylist() == expected_offsets(), (k, out.steps[-1])
        assert [int(p.stem) for p in segment_files(logs)] == EXPECTED_SEGMENTS, (k, out.steps[-1])
        assert kl.verify(logs).ok, (k, out.steps[-1])
