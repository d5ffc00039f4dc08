"""Smoke test of the big log dir generator (benchmarks/gen_big.py) at a small size: its output
passes verify (deep), holds every codec and the legacy formats, and is a function of the seed."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

import kafkalog_spark as kl
from kafkalog_spark.codec.scan import scan_entries
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
