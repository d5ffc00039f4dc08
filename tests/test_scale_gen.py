"""Smoke test of the big log dir generator (benchmarks/gen_big.py) at a small size: its output
passes verify (deep), holds every codec and the legacy formats, and is a function of the seed."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import kafkalog_spark as kl
from kafkalog_spark.codec.records.scan import scan_entries
from kafkalog_spark.log.discovery import discover

REPO = Path(__file__).resolve().parents[1]


def _gen_big():
    spec = importlib.util.spec_from_file_location("gen_big", REPO / "benchmarks" / "gen_big.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_big"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


gen_big = _gen_big()
SMALL = dict(partitions=24, segments=3, topics=4, segment_kib=8, log_dirs=2, legacy_share=0.5,
             switch_share=0.5)


def _digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def generated(tmp_path_factory, shared_fixtures):
    root = tmp_path_factory.mktemp("big") / "a"
    return gen_big.generate(root, seed=11, fixtures=shared_fixtures, **SMALL)


def test_output_passes_deep_verify(generated) -> None:
    report = kl.verify(generated.log_dirs, deep=True)
    assert report.ok, [p for p in report.problems][:5]
    assert not report.problems
    assert report.partitions == generated.partitions == SMALL["partitions"]
    assert report.segments == generated.segments
    assert report.bytes == generated.bytes
    assert report.records == generated.records


def test_mixed_codecs_and_formats_present(generated) -> None:
    found = discover(generated.log_dirs)
    magics: set[int] = set()
    codecs: set[int] = set()
    per_partition_codecs = []
    for part in found.all_partition_dirs():
        seen = set()
        for seg in part.segments:
            table = scan_entries(np.fromfile(seg.log, np.uint8))
            magics.update(int(m) for m in np.unique(table.magic))
            seen.update(int(c) for c in np.unique(table.codec))
        codecs |= seen
        per_partition_codecs.append(len(seen))
    assert magics == {0, 1, 2}
    assert codecs == {0, 1, 2, 3, 4}  # none, gzip, snappy, lz4, zstd
    assert max(per_partition_codecs) >= 2  # a partition switched codec
    assert generated.legacy and generated.switched
    assert len(found.log_dirs) == 2
    assert sum(len(d.partitions) for d in found.log_dirs) == SMALL["partitions"]
    configs = json.loads(Path(generated.config_file).read_text())
    assert set(configs) == set(generated.compacted_topics) and configs


def test_deterministic_by_seed(generated, tmp_path, shared_fixtures) -> None:
    again = gen_big.generate(tmp_path / "b", seed=11, fixtures=shared_fixtures, **SMALL)
    other = gen_big.generate(tmp_path / "c", seed=12, fixtures=shared_fixtures, **SMALL)
    first = _digest(Path(generated.root))
    assert _digest(Path(again.root)) == first
    assert _digest(Path(other.root)) != first


def test_segment_counts_and_offsets_follow_each_other(generated) -> None:
    for part in discover(generated.log_dirs).all_partition_dirs():
        bases = [s.base_offset for s in part.segments]
        assert bases == sorted(set(bases)) and bases[0] == 0
        assert SMALL["segments"] // 2 <= len(bases) <= SMALL["segments"] * 3 // 2 + 1


def test_refuses_a_non_empty_root(tmp_path, shared_fixtures) -> None:
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "file").write_text("keep")
    with pytest.raises(FileExistsError):
        gen_big.generate(tmp_path / "x", partitions=1, fixtures=shared_fixtures)
    assert (tmp_path / "x" / "file").read_text() == "keep"


def test_without_fixtures_no_legacy(tmp_path) -> None:
    g = gen_big.generate(tmp_path / "n", partitions=4, segments=2, segment_kib=8, fixtures=None)
    assert not g.legacy and g.notes
    assert kl.verify(g.log_dirs).ok


# --- packing many small segments into few Spark tasks (datasource.reader.pack_splits) --------


def test_pack_splits_keeps_every_split_once_in_order(generated) -> None:
    from kafkalog_spark.datasource.plan import pack_splits, plan_scan
    from kafkalog_spark.datasource.splits import split_bytes

    splits = plan_scan({"path": ",".join(generated.log_dirs)}).splits
    assert len(splits) == generated.segments
    tasks = pack_splits(splits, 1 << 20, min_tasks=4, open_cost=1024)
    assert 4 <= len(tasks) < len(splits)
    assert [s for t in tasks for s in t.splits] == list(splits)
    for t in tasks:
        assert len(t.splits) == 1 or sum(split_bytes(s) + 1024 for s in t.splits) <= 1 << 20
    # a budget below one split: one task per split; few splits: one task each
    assert [t.splits for t in pack_splits(splits, 100, min_tasks=4)] == [(s,) for s in splits]
    assert len(pack_splits(splits[:3], 1 << 30, min_tasks=4)) == 3


@pytest.mark.parametrize("slots", [3, 4, 7, 128])
def test_packed_tasks_fill_the_slots_in_even_waves(generated, slots) -> None:
    """As many tasks as slots (or a multiple, when ``max_bytes`` needs more), of about equal
    weight: no short last wave of one or two tasks (the 4 GiB bench log's 4,146 segments made
    130 tasks for 128 slots)."""
    from dataclasses import replace

    from kafkalog_spark.datasource.plan import pack_splits, plan_scan
    from kafkalog_spark.datasource.splits import split_bytes

    one = plan_scan({"path": ",".join(generated.log_dirs)}).splits[0]
    sizes = np.random.default_rng(slots).integers(1_000, 20_000, size=40 * slots)
    ends = np.cumsum(sizes)
    splits = [replace(one, start_position=int(e - n), end_position=int(e))
              for n, e in zip(sizes, ends)]
    weights = [split_bytes(s) + 1024 for s in splits]
    total, heaviest = sum(weights), max(weights)
    for waves in (1, 2, 3):
        max_bytes = total // (waves * slots) + heaviest  # room for waves * slots runs, not fewer
        if waves > 1:
            max_bytes = min(max_bytes, total // ((waves - 1) * slots) - 1)
        tasks = pack_splits(splits, max_bytes, min_tasks=slots, open_cost=1024)
        assert [s for t in tasks for s in t.splits] == splits
        assert len(tasks) == waves * slots, (waves, len(tasks))
        mean = total / len(tasks)
        for t in tasks:
            assert abs(sum(split_bytes(s) + 1024 for s in t.splits) - mean) <= heaviest


def test_packed_tasks_read_what_read_log_reads(generated) -> None:
    from kafkalog_spark.datasource.options import parse_read_options
    from kafkalog_spark.datasource.plan import pack_splits, plan_scan
    from kafkalog_spark.datasource.reader import KafkaLogReader

    opts = parse_read_options({"path": ",".join(generated.log_dirs)})
    reader = KafkaLogReader(opts)
    tasks = pack_splits(plan_scan(opts).splits, 1 << 20, min_tasks=4)
    got = pa.Table.from_batches([b for t in tasks for b in reader.read(t)])
    expected = kl.read_log(generated.log_dirs)
    key = [("topic", "ascending"), ("partition", "ascending"), ("offset", "ascending")]
    assert got.num_rows == expected.num_rows == generated.records
    assert got.sort_by(key).equals(expected.sort_by(key))


def test_min_partitions_option_sets_the_fewest_tasks(generated) -> None:
    from kafkalog_spark.datasource.options import parse_read_options
    from kafkalog_spark.datasource.reader import KafkaLogReader
    from kafkalog_spark.errors import InvalidOptionError

    path = ",".join(generated.log_dirs)
    default = KafkaLogReader(parse_read_options({"path": path})).partitions()
    two = KafkaLogReader(parse_read_options({"path": path, "minPartitions": "2"})).partitions()
    assert len(default) >= 16 > len(two) >= 2
    assert [s for t in two for s in t.splits] == [s for t in default for s in t.splits]
    with pytest.raises(InvalidOptionError, match="minPartitions must be an integer >= 1"):
        parse_read_options({"path": path, "minPartitions": "0"})


def _first_entry_codec(seg) -> int | None:
    table = scan_entries(np.fromfile(seg.log, np.uint8), max_entries=1)
    return int(table.codec[0]) if len(table) else None


def test_first_codec_reads_every_format_from_the_header(generated, tmp_path) -> None:
    """v0 and v1 wrappers and v2 batches of every codec: the codec the header's first bytes
    give is the one a walk of the segment finds for its first entry; a header cut short, an
    unknown magic or a vanished file: none (a weight's input, not a read's check)."""
    from kafkalog_spark.log.segment_info import first_codec

    segments = [s for p in discover(generated.log_dirs).all_partition_dirs() for s in p.segments]
    assert {first_codec(s) for s in segments} == {0, 1, 2, 3, 4}
    assert [first_codec(s) for s in segments] == [_first_entry_codec(s) for s in segments]
    v2 = next(s for s in segments if _first_entry_codec(s) == 4 and s.log_size > 100)
    folder = tmp_path / "t-0"
    folder.mkdir()
    head = v2.log.read_bytes()[:23]
    for offset, content in ((0, head[:22]), (1, head[:16] + b"\x07" + head[17:]), (2, head)):
        (folder / f"{offset:020d}.log").write_bytes(content)
    cut, unknown, whole = discover([str(folder)]).all_partition_dirs()[0].segments
    assert (first_codec(cut), first_codec(unknown), first_codec(whole)) == (None, None, 4)
    whole.log.unlink()
    assert first_codec(whole) is None


def test_segment_codecs_find_each_change_from_few_reads(tmp_path, monkeypatch) -> None:
    """A partition written gzip, then lz4, then gzip again (A, B, A: its ends agree), then
    zstd — 40-odd segments: each segment's codec, from the headers of a few segments; one
    codec throughout: one read a sampled run's end; an empty segment: none."""
    from kafkalog_spark.log import segment_info

    noise = np.random.default_rng(5).integers(0, 256, size=(3000, 40), dtype=np.uint8)
    table = pa.table({"value": [row.tobytes() for row in noise]})
    out = tmp_path / "d"
    for codec, n in (("gzip", 600), ("lz4", 800), ("gzip", 600), ("zstd", 1000)):
        kl.write_log(table.slice(0, n), out, topic="t", partition=0, codec=codec,
                     segment_bytes=1200, max_batch_records=40)
    segments = discover([str(out)]).all_partition_dirs()[0].segments
    truth = [_first_entry_codec(s) for s in segments]
    changes = sum(a != b for a, b in zip(truth, truth[1:]))
    assert len(segments) >= 40 and changes == 3
    reads = []
    counted = segment_info.first_codec
    monkeypatch.setattr(segment_info, "first_codec", lambda s: reads.append(s) or counted(s))
    runs = segment_info.SAMPLED_RUNS
    assert segment_info.segment_codecs(segments) == truth
    halvings = int(np.ceil(np.log2(len(segments) / runs + 1)))
    assert len(reads) <= runs + 1 + 2 * changes * halvings < len(segments)
    for one_codec in (segments[:truth.index(3)], segments[:3]):
        reads.clear()
        assert segment_info.segment_codecs(one_codec) == [1] * len(one_codec)
        assert len(reads) == min(runs + 1, len(one_codec))
    empty = tmp_path / "d" / "t-0" / f"{5000:020d}.log"
    empty.touch()
    last = discover([str(out)]).all_partition_dirs()[0].segments[-1]
    assert last.log == empty and segment_info.segment_codecs([last]) == [None]
    assert segment_info.segment_codecs([]) == []


def _scan_tasks(log_dirs: list[str], n: int):
    from kafkalog_spark.datasource.options import parse_read_options
    from kafkalog_spark.datasource.plan import SCAN_CODEC_COST
    from kafkalog_spark.datasource.reader import KafkaLogReader

    opts = parse_read_options({"path": ",".join(log_dirs), "minPartitions": str(n)})
    return [t.splits for t in KafkaLogReader(opts).partitions()], SCAN_CODEC_COST


def _migrate_tasks(log_dirs: list[str], n: int):
    from kafkalog_spark.delta.options import parse_migrate_options
    from kafkalog_spark.delta.plan import plan_table, source_partitions
    from kafkalog_spark.delta.spark_job import LOG_CODEC_COST, TableWrite, plan_tasks

    opts = parse_migrate_options({})
    tables, listing = source_partitions(log_dirs, opts)
    writes = []
    for name, parts in sorted(tables.items()):
        plan = plan_table(Path("/nonexistent") / name, parts, opts, {})
        writes.append(TableWrite(str(plan.path), "", plan.schema, plan.read_options(opts)))
    return [[s for _, s in t.items] for t in plan_tasks(writes, n, listing)], LOG_CODEC_COST


@pytest.mark.parametrize("planner", [_scan_tasks, _migrate_tasks], ids=["scan", "migrate"])
def test_tasks_weigh_each_segment_by_its_codec(generated, planner) -> None:
    """The data source's tasks (and migrate's) hold equal work, not equal bytes: a byte of a
    gzip segment weighs what the planner's table says (per segment: legacy segments and codec
    switches inside a partition included), so a task of gzip segments holds fewer bytes."""
    from kafkalog_spark.codec.layout import CODEC_NAMES
    from kafkalog_spark.datasource.plan import OPEN_COST_BYTES, pack_splits
    from kafkalog_spark.datasource.splits import split_bytes

    tasks, table = planner(generated.log_dirs, 8)
    splits = [s for t in tasks for s in t]
    cost = [table[CODEC_NAMES[_first_entry_codec(s.segment)]] for s in splits]
    assert [list(t.splits) for t in pack_splits(splits, 1 << 40, min_tasks=8, cost=cost)] \
        == [list(t) for t in tasks]  # packed by every segment's own codec
    work = dict(zip(map(id, splits), ((split_bytes(s) + OPEN_COST_BYTES) * c
                                      for s, c in zip(splits, cost))))
    weights = [sum(work[id(s)] for s in t) for t in tasks]
    heaviest = max(work.values())
    assert len(tasks) == 8
    assert max(weights) - min(weights) <= 2 * heaviest
    by_bytes = [sum(split_bytes(s) + OPEN_COST_BYTES for s in t) for t in tasks]
    assert max(by_bytes) - min(by_bytes) > 2 * heaviest / max(table.values())


def test_codec_weights_read_no_header_of_a_segment_elsewhere(generated, monkeypatch) -> None:
    """A remote tier's segments (and an object store's) are not read to weigh them: their
    partition's codec from ``known`` (migrate's, from the log ends it reads) or none; the local
    segments beside them still weigh by their own codecs."""
    from dataclasses import replace

    from kafkalog_spark.codec.layout import CODEC_NAMES
    from kafkalog_spark.datasource.plan import SCAN_CODEC_COST, codec_weights, plan_scan
    from kafkalog_spark.log import segment_info

    splits = plan_scan({"path": ",".join(generated.log_dirs)}).splits
    truth = [SCAN_CODEC_COST[CODEC_NAMES[_first_entry_codec(s.segment)]] for s in splits]
    assert codec_weights(splits, SCAN_CODEC_COST) == truth
    first_dir = splits[0].segment.dir
    tiered = {s.segment.log: replace(s.segment, remote_id="r") for s in splits
              if s.segment.dir != first_dir}
    moved = [replace(s, segment=tiered.get(s.segment.log, s.segment)) for s in splits]
    read = []
    counted = segment_info.first_codec
    monkeypatch.setattr(segment_info, "first_codec", lambda s: read.append(s) or counted(s))
    known = {str(s.segment.dir): 1 for s in moved[-1:]}  # the last partition's: gzip
    got = codec_weights(moved, SCAN_CODEC_COST, known)
    assert {seg.dir for seg in read} == {first_dir}
    local = [s.segment.dir == first_dir for s in moved]
    last = [s.segment.dir == moved[-1].segment.dir for s in moved]
    assert got == [t if here else SCAN_CODEC_COST["gzip"] if end else 1.0
                   for t, here, end in zip(truth, local, last)]
