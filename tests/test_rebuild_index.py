"""rebuild-index: on copies of real broker dirs the rebuilt .index/.timeindex are byte-identical
to the broker's trimmed files; consistent indexes are kept; dry run changes nothing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from kafkalog_spark.cli import cli
from kafkalog_spark.codec.files.index import read_txn_index
from kafkalog_spark.inspect.verify import verify
from kafkalog_spark.recovery.rebuild import rebuild_indexes

from test_index import EXACT, RESTARTED, marker, txn_batch

pytestmark = pytest.mark.fixtures


def copy_partition(shared: Path, stem: str, tmp_path: Path) -> Path:
    src = (shared / stem).parent
    dst = tmp_path / "logs" / src.name
    shutil.copytree(src, dst)
    return dst / Path(stem).name


@pytest.mark.parametrize("stem", EXACT)
@pytest.mark.parametrize("damage", ["deleted", "zero-tail", "garbage"])
def test_command_rebuilds_broker_bytes(shared_fixtures: Path, tmp_path: Path, stem: str,
                                       damage: str) -> None:
    seg = copy_partition(shared_fixtures, stem, tmp_path)
    index, timeindex = seg.with_suffix(".index"), seg.with_suffix(".timeindex")
    originals = {index: index.read_bytes(), timeindex: timeindex.read_bytes()}
    for p, good in originals.items():
        if damage == "deleted":
            p.unlink()
        elif damage == "zero-tail":
            p.write_bytes(good + bytes(12 * 100))
        else:
            p.write_bytes(bytes(reversed(good)) + b"\x01" * 24)
    state = {p: p.read_bytes() if p.exists() else None for p in originals}
    runner = CliRunner()
    dry = runner.invoke(cli, ["rebuild-index", str(seg.parent)])
    assert dry.exit_code == 1 and "--execute" in dry.output
    assert {p: p.read_bytes() if p.exists() else None for p in originals} == state
    done = runner.invoke(cli, ["rebuild-index", "--execute", str(seg.parent)])
    assert done.exit_code == 0, done.output
    for p, good in originals.items():
        assert p.read_bytes() == good, p
    assert not [x for x in verify(seg.parent).problems if x.check in ("index", "timeindex")]
    assert runner.invoke(cli, ["rebuild-index", str(seg.parent)]).exit_code == 0


@pytest.mark.parametrize("stem", RESTARTED)
def test_consistent_broker_index_is_kept_unless_forced(shared_fixtures: Path, tmp_path: Path,
                                                       stem: str) -> None:
    seg = copy_partition(shared_fixtures, stem, tmp_path)
    timeindex = seg.with_suffix(".timeindex")
    good = timeindex.read_bytes()
    assert not [a for a in rebuild_indexes(seg.parent).actions if a.path == str(timeindex)]
    forced = rebuild_indexes(seg.parent, force=True, execute_plan=True)
    assert [a for a in forced.actions if a.path == str(timeindex)]
    assert timeindex.read_bytes() != good
    q = Path(forced.quarantine)
    assert any(p.read_bytes() == good for p in q.rglob("*.replaced-*"))


def test_txn_index_from_markers(tmp_path: Path) -> None:
    pdir = tmp_path / "logs" / "txn-0"
    pdir.mkdir(parents=True)
    log = (txn_batch(0, 7, 0, 3) + txn_batch(3, 8, 0, 2) + marker(5, 7, 0, 0, 4)
           + marker(6, 8, 0, 1, 4))
    (pdir / "00000000000000000000.log").write_bytes(log)
    result = CliRunner().invoke(cli, ["rebuild-index", "--kind", "txnindex", "--execute", "--json",
                                      str(pdir)])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert [a["path"].endswith(".txnindex") for a in doc["actions"]] == [True]
    txn = read_txn_index((pdir / "00000000000000000000.txnindex").read_bytes(), 0)
    assert txn.last_stable_offset.tolist() == [3] and txn.first_offset.tolist() == [0]
    assert not (pdir / "00000000000000000000.index").exists()  # only the kind asked for


def test_invalid_tail_is_noted_not_cut(tmp_path: Path, shared_fixtures: Path) -> None:
    seg = copy_partition(shared_fixtures, EXACT[0], tmp_path).with_suffix(".log")
    data = seg.read_bytes()
    seg.write_bytes(data + b"\x05garbage")
    report = rebuild_indexes(seg.parent, execute_plan=True)
    assert any("kafkalog recover" in n for n in report.notes)
    assert seg.read_bytes() == data + b"\x05garbage"
