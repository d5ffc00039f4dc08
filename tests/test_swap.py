"""swap: replaceSegments' crash protocol and LogLoader passes 1-3 — a crash at every step of a
replacement is rolled back or completed, never half-applied."""

from __future__ import annotations

from pathlib import Path

import pytest

import kafkalog_spark as kl
from kafkalog_spark.errors import InvalidOptionError
from kafkalog_spark.codec.files import naming as N
from kafkalog_spark.log.swap import (DISPOSE, RENAME, NewSegment, complete_interrupted_swaps,
                                     plan_swap_recovery, replace_segments, view_after)
from kafkalog_spark.inspect.verify import verify

from test_read_write import records


class Crash(BaseException):
    pass


@pytest.fixture()
def pdir(tmp_path: Path) -> Path:
    kl.write_log(records(600), tmp_path / "logs", codec="none", segment_bytes=16 * 1024,
                 max_batch_records=30)
    return tmp_path / "logs" / "orders-0"


def logs(pdir: Path) -> list[Path]:
    return sorted(pdir.glob("*.log"))


def live_files(pdir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(pdir.iterdir()) if p.is_file()}


def merge_plan(pdir: Path) -> tuple[list[NewSegment], list[int]]:
    segs = logs(pdir)
    merged = segs[1].read_bytes() + segs[2].read_bytes()
    return [NewSegment(int(segs[1].name[:20]), merged)], [int(segs[1].name[:20]), int(segs[2].name[:20])]


def test_replace_segments_merges(pdir: Path) -> None:
    before = kl.read_log(pdir.parent).to_pylist()
    new, old = merge_plan(pdir)
    replace_segments(pdir, new, old)
    assert len(logs(pdir)) == 3 and logs(pdir)[1].read_bytes() == bytes(new[0].log)
    assert not [p for p in pdir.iterdir() if N.is_transient(p.name)]
    report = verify(pdir.parent)
    assert report.ok and not report.problems
    assert kl.read_log(pdir.parent).to_pylist() == before


def test_a_replacement_fsyncs_the_folder_per_step_not_per_file(pdir: Path, monkeypatch) -> None:
    """Replacing many segments costs a fixed number of folder fsyncs (one per step of the
    protocol), not one per replaced file: compacting a 4 GB log replaced 12,000 files and
    spent 10 s in per-file fsyncs. A quarantine (``dispose``) keeps its own per-file moves."""
    from kafkalog_spark.storage.local import LocalStorage

    segs = logs(pdir)
    assert len(segs) >= 4
    merged = b"".join(p.read_bytes() for p in segs[:-1])
    olds = [int(p.name[:20]) for p in segs[:-1]]
    calls = []
    real = LocalStorage.fsync_dir
    monkeypatch.setattr(LocalStorage, "fsync_dir",
                        lambda self, path: (calls.append(path), real(self, path)))
    before = kl.read_log(pdir.parent).to_pylist()
    replace_segments(pdir, [NewSegment(olds[0], merged)], olds)
    assert 3 * len(olds) > 6 and len(calls) == 6, calls  # steps 1-6, each once
    assert not [p for p in pdir.iterdir() if N.is_transient(p.name)]
    assert kl.read_log(pdir.parent).to_pylist() == before


def test_crash_at_every_step_is_rolled_back_or_completed(pdir: Path, tmp_path: Path) -> None:
    import shutil

    before = kl.read_log(pdir.parent).to_pylist()
    old_state = live_files(pdir)
    labels: list[str] = []
    probe = tmp_path / "probe" / "orders-0"
    shutil.copytree(pdir, probe)
    new, old = merge_plan(probe)
    replace_segments(probe, new, old, step=labels.append)
    new_state = live_files(probe)
    swapped_at = max(i for i, label in enumerate(labels) if ".cleaned ->" in label)
    for k, label in enumerate(labels):
        work = tmp_path / f"k{k}" / "orders-0"
        shutil.copytree(pdir, work)
        new, old = merge_plan(work)

        def step(lbl: str, k=k) -> None:
            if lbl == labels[k]:
                raise Crash

        with pytest.raises(Crash):
            replace_segments(work, new, old, step=step)
        complete_interrupted_swaps(work)
        state = live_files(work)
        # every .cleaned renamed to .swap: the swap is completed; before that: rolled back
        assert state == (new_state if k > swapped_at else old_state), label
        assert kl.read_log(work.parent).to_pylist() == before
        assert not plan_swap_recovery(work)


def test_passes_follow_kafka(tmp_path: Path) -> None:
    pdir = tmp_path / "t-0"
    pdir.mkdir()
    for name in ["00000000000000000000.log", "00000000000000000000.index",
                 "00000000000000000005.log.deleted", "00000000000000000007.snapshot.deleted",
                 "00000000000000000010-0000000001.checkpoint.deleted",
                 "00000000000000000020.log.cleaned", "00000000000000000020.log.swap",
                 "00000000000000000030.log.swap", "00000000000000000009.index.swap"]:
        (pdir / name).write_bytes(b"")
    actions = plan_swap_recovery(pdir)
    disposed = {a.path.name for a in actions if a.kind == DISPOSE}
    assert disposed == {"00000000000000000005.log.deleted", "00000000000000000007.snapshot.deleted",
                        "00000000000000000020.log.cleaned", "00000000000000000020.log.swap",
                        "00000000000000000030.log.swap"}
    renamed = [(a.path.name, a.target.name) for a in actions if a.kind == RENAME]
    assert renamed == [("00000000000000000009.index.swap", "00000000000000000009.index")]
    view = view_after(pdir, actions)
    assert "00000000000000000009.index" in view and "00000000000000000010-0000000001.checkpoint.deleted" in view
    complete_interrupted_swaps(pdir)
    assert set(view) == {p.name for p in pdir.iterdir()}


def test_pass_two_removes_the_replaced_range(pdir: Path) -> None:
    segs = logs(pdir)
    # a completed step 2 of a merge of segments 1 and 2: old files still live
    merged = segs[1].read_bytes() + segs[2].read_bytes()
    swap = segs[1].with_name(segs[1].name + ".swap")
    swap.write_bytes(merged)
    actions = plan_swap_recovery(pdir)
    gone = {a.path.name for a in actions if a.kind == DISPOSE}
    assert segs[2].name in gone and segs[1].name in gone and segs[0].name not in gone
    assert segs[3].name not in gone
    complete_interrupted_swaps(pdir)
    assert segs[1].read_bytes() == merged and not segs[2].exists()


def test_replace_segments_refuses_bad_plans(pdir: Path) -> None:
    segs = logs(pdir)
    with pytest.raises(InvalidOptionError):
        replace_segments(pdir, [NewSegment(int(segs[1].name[:20]), segs[1].read_bytes())],
                         [int(segs[3].name[:20])])
    with pytest.raises(InvalidOptionError):
        replace_segments(pdir, [], [0])
