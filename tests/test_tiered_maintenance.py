"""Maintenance commands on a tiered topic's local log (issue 32, items 1 and 6): ``retain``,
``compact`` and ``erase`` refuse a partition that tiered storage holds partly in a remote tier —
its topic's ``remote.storage.enable`` is true (metadata log, config file, ``--config``), its
checkpointed log start lies below its local log, or ``__remote_log_metadata`` lists remote
segments of it — plan and run alike, with and without ``--remote-tier``, in one line (exit 2),
changing no byte; ``recover`` repairs the local log as the broker's loader does with remote
storage on, keeping the log start offset and the remote offsets' leader epochs. Every command
runs twice, as operators run them."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pyarrow as pa
import pytest
from test_reconcile import _job
from test_recover import crashed
from tiered_fixtures import offload, uvarint

import kafkalog_spark as kl
from kafkalog_spark.codec.files import checkpoints as C
from kafkalog_spark.compaction.compact import compact
from kafkalog_spark.compaction.erase import erase
from kafkalog_spark.errors import InvalidOptionError, TieredPartitionError
from kafkalog_spark.log.discovery import discover
from kafkalog_spark.log.tiered_topics import tiered_partitions
from kafkalog_spark.recovery.recover import recover
from kafkalog_spark.report import run_job
from kafkalog_spark.retention.retain import plan_retention, retain

TIERED, PLAIN = "events", "plain"
EPOCHS = "0\n1\n0 0\n"  # leader epoch 0 from offset 0, as the broker checkpoints it


def _logs(tmp_path: Path, *, keep_local: int = 0) -> tuple[Path, object]:
    """A log dir with ``events`` (3 segments offloaded to a LocalTieredStorage tier, recorded in
    ``__remote_log_metadata``, log start 0 checkpointed) and ``plain`` (no tiered storage)."""
    log_dir = tmp_path / "logs"
    rows = [{"key": f"k{i % 7}".encode(), "value": (b"v%05d" % i) * 20} for i in range(600)]
    for topic in (TIERED, PLAIN):
        kl.write_log(pa.Table.from_pylist(rows), log_dir, topic=topic, segment_bytes=8 << 10,
                     max_batch_records=20, index_interval_bytes=1024)
        (log_dir / f"{topic}-0" / "leader-epoch-checkpoint").write_text(EPOCHS)
    off = offload(log_dir, TIERED, 0, tmp_path / "tier", 3, keep_local=keep_local)
    return log_dir, off


def _topic_config(log_dir: Path, topic: str, name: str, value: str) -> None:
    """A KRaft ConfigRecord (api key 4, v0: resource type 2 = TOPIC) in ``__cluster_metadata``,
    as ``kafka-configs --alter`` leaves it."""
    def string(s: str) -> bytes:
        return uvarint(len(s.encode()) + 1) + s.encode()

    value_bytes = (uvarint(1) + uvarint(4) + uvarint(0) + bytes([2]) + string(topic)
                   + string(name) + string(value) + b"\x00")
    kl.write_log(pa.table({"key": pa.array([None], pa.binary()),
                           "value": pa.array([value_bytes], pa.binary())}),
                 log_dir, topic="__cluster_metadata", partition=0)


def _tree(log_dir: Path) -> dict[str, str]:
    return {str(p.relative_to(log_dir)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(log_dir.rglob("*")) if p.is_file() and p.name != ".lock"}


def _run(capsys, *args) -> tuple[int, str, str]:
    from kafkalog_spark.cli import main

    try:
        code = main([str(a) for a in args])
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def _refused(code: int, err: str, command: str) -> None:
    assert code == 2, err
    assert err.count("\n") == 1, err  # one line, no traceback
    assert f"{command} refuses tiered storage's partition(s) {TIERED}-0" in err, err


# --- which partitions are tiered ---------------------------------------------------------------

def test_which_partitions_are_tiered_and_why(tmp_path):
    log_dir, off = _logs(tmp_path)

    def tiered(**kw) -> dict[str, str]:
        found = discover(log_dir)
        parts = [p for d in found.log_dirs for p in d.partitions]
        return {t.name: "; ".join(t.reasons) for t in tiered_partitions(found, parts, **kw)}

    got = tiered()
    assert set(got) == {f"{TIERED}-0"}
    assert "checkpointed log start offset 0 lies below its first local segment" in got["events-0"]
    assert "__remote_log_metadata lists 3 remote segment(s) of it (offsets 0..179)" in \
        got["events-0"]
    # a topic whose config turns tiered storage on, nothing offloaded yet: from the metadata log
    _topic_config(log_dir, PLAIN, "remote.storage.enable", "true")
    assert tiered()["plain-0"] == "remote.storage.enable=true (from the metadata log)"
    # --config is the strongest source: it can say the broker runs with it off ...
    assert set(tiered(options={"remote.storage.enable": "false"})) == {"events-0"}
    # ... but not hide the remote history itself
    cfg = tmp_path / "topics.json"
    cfg.write_text(json.dumps({PLAIN: {"remote.storage.enable": "TRUE"}}))
    assert tiered(options={"remote.storage.enable": "false"}, config_file=cfg) == \
        {"events-0": got["events-0"]}
    assert tiered(config_file=cfg)["plain-0"] == "remote.storage.enable=true (from the file)"
    with pytest.raises(InvalidOptionError, match="remote.storage.enable='yes'"):
        tiered(options={"remote.storage.enable": "yes"})


def test_a_damaged_remote_log_metadata_refuses_rather_than_guesses(tmp_path, capsys):
    log_dir, _ = _logs(tmp_path)
    seg = log_dir / "__remote_log_metadata-0" / f"{0:020d}.log"
    raw = bytearray(seg.read_bytes())
    raw[-3] ^= 0xFF  # a value byte of the last record: its CRC no longer matches
    seg.write_bytes(bytes(raw))
    before = _tree(log_dir)
    code, _, err = _run(capsys, "retain", log_dir, "--topic", PLAIN)
    assert code == 2 and err.count("\n") == 1
    assert "cannot tell which partitions are tiered" in err and "__remote_log_metadata" in err
    assert _tree(log_dir) == before


# --- retain ------------------------------------------------------------------------------------

@pytest.mark.parametrize("execute", [False, True], ids=["plan", "execute"])
def test_retain_refuses_a_tiered_topic_twice(tmp_path, capsys, execute):
    log_dir, _ = _logs(tmp_path)
    before = _tree(log_dir)
    args = ["retain", log_dir, "--config", "retention.ms=0", "--high-watermark", "log-end",
            *(["--execute"] if execute else [])]
    for _ in range(2):
        code, out, err = _run(capsys, *args)
        _refused(code, err, "retain")
        assert "local.retention" in err and "leave these topics out (--topic)" in err
        assert _tree(log_dir) == before
    # naming the tier does not help: the broker owns it
    code, _, err = _run(capsys, *args, "--remote-tier", tmp_path / "tier")
    assert code == 2 and "retain does not change a remote tier: the broker owns it" in err
    # the other topics are retained as asked, the tiered one untouched
    code, out, err = _run(capsys, *args, "--topic", PLAIN, "--json")
    assert code == (0 if execute else 1), err
    assert json.loads(out)["metrics"]["segments_deleted"] > 0
    after = _tree(log_dir)
    assert {k: v for k, v in after.items() if k.startswith(f"{TIERED}-0/")} == \
        {k: v for k, v in before.items() if k.startswith(f"{TIERED}-0/")}


def test_retain_library_and_job_refuse_too(tmp_path, capsys):
    log_dir, _ = _logs(tmp_path)
    before = _tree(log_dir)
    for call in (lambda: plan_retention(log_dir, options={"retention.ms": 0}),
                 lambda: retain(log_dir, options={"retention.ms": 0}),
                 lambda: retain(log_dir, execute=True, options={"retention.ms": 0},
                                high_watermark="log-end", topics=[TIERED])):
        with pytest.raises(TieredPartitionError, match="retain refuses tiered storage") as e:
            call()
        assert e.value.file == str(log_dir / f"{TIERED}-0")
    job = _job("retain")
    for _ in range(2):
        assert run_job(lambda: job.main([str(log_dir), "--execute", "--config",
                                         "retention.ms=0"])) == 2
        _refused(2, capsys.readouterr().err, "retain")
    assert _tree(log_dir) == before


def test_retain_refuses_a_topic_tiered_by_its_config_alone(tmp_path, capsys):
    log_dir, _ = _logs(tmp_path)
    _topic_config(log_dir, PLAIN, "remote.storage.enable", "true")
    before = _tree(log_dir)
    for _ in range(2):
        code, _, err = _run(capsys, "retain", log_dir, "--topic", PLAIN, "--execute",
                            "--config", "retention.bytes=1", "--high-watermark", "log-end")
        assert code == 2 and err.count("\n") == 1
        assert "retain refuses tiered storage's partition(s) plain-0 (plain-0: " \
               "remote.storage.enable=true (from the metadata log))" in err
    assert _tree(log_dir) == before


# --- compact -----------------------------------------------------------------------------------

def test_compact_refuses_a_tiered_partition_it_would_clean_twice(tmp_path, capsys):
    log_dir, _ = _logs(tmp_path)
    both = tmp_path / "compacted.json"
    both.write_text(json.dumps({t: {"cleanup.policy": "compact"} for t in (TIERED, PLAIN)}))
    before = _tree(log_dir)
    for extra in ([], ["--execute"], ["--execute", "--engine", "spark"], ["--execute"]):
        code, _, err = _run(capsys, "compact", log_dir, "--config-file", both, "--force",
                            "--high-watermark", "log-end", *extra)
        _refused(code, err, "compact")
        assert "Kafka does not compact tiered topics" in err
        assert _tree(log_dir) == before
    # a tiered topic compact would not clean (cleanup.policy=delete) does not stop the others
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({PLAIN: {"cleanup.policy": "compact"}}))
    for _ in range(2):
        code, out, err = _run(capsys, "compact", log_dir, "--config-file", plain, "--force",
                              "--high-watermark", "log-end", "--execute", "--json")
        assert code == 0, err
    assert {k: v for k, v in _tree(log_dir).items() if k.startswith(f"{TIERED}-0/")} == \
        {k: v for k, v in before.items() if k.startswith(f"{TIERED}-0/")}
    # ... unless it is named: compacting it was asked for
    code, _, err = _run(capsys, "compact", log_dir, "--topic", TIERED, "--force")
    _refused(code, err, "compact")
    code, _, err = _run(capsys, "compact", log_dir, "--remote-tier", tmp_path / "tier")
    assert code == 2 and "compact does not change a remote tier" in err


def test_compact_library_refuses_with_either_engine(tmp_path):
    log_dir, _ = _logs(tmp_path)
    before = _tree(log_dir)
    options = {"cleanup.policy": "compact"}
    for engine in ("local", "spark", "local"):
        with pytest.raises(TieredPartitionError, match="compact refuses tiered storage"):
            compact(log_dir, execute=True, engine=engine, options=options, force=True,
                    high_watermark="log-end")
    assert _tree(log_dir) == before


# --- erase -------------------------------------------------------------------------------------

def test_erase_refuses_a_tiered_topic_twice(tmp_path, capsys):
    log_dir, _ = _logs(tmp_path)
    before = _tree(log_dir)
    for extra in ([], ["--check"], ["--execute"], ["--execute"]):
        code, _, err = _run(capsys, "erase", log_dir, "--topic", TIERED, "--where", "true",
                            *extra)
        _refused(code, err, "erase")
        assert "erase cannot reach a remote tier" in err and "kafka-delete-records" in err
        assert _tree(log_dir) == before
    code, _, err = _run(capsys, "erase", log_dir, "--topic", TIERED, "--where", "true",
                        "--remote-tier", tmp_path / "tier")
    assert code == 2 and "erase does not change a remote tier" in err
    # another topic of the same log dir is erased as asked
    code, out, err = _run(capsys, "erase", log_dir, "--topic", PLAIN, "--where",
                          "key = X'6b30'", "--execute", "--json")
    assert code == 0 and json.loads(out)["records_removed"] == 86, err
    with pytest.raises(TieredPartitionError, match="erase refuses tiered storage"):
        erase(log_dir, TIERED, [b"k0"], execute_plan=True)


@pytest.mark.spark
def test_the_spark_jobs_refuse_before_a_task_runs(spark, tmp_path, capsys):
    log_dir, _ = _logs(tmp_path)
    before = _tree(log_dir)
    compact_job, erase_job = _job("compact"), _job("erase")
    for _ in range(2):
        assert run_job(lambda: compact_job.main(
            [str(log_dir), "--execute", "--force", "--config", "cleanup.policy=compact"])) == 2
        _refused(2, capsys.readouterr().err, "compact")
        assert run_job(lambda: erase_job.main(
            [str(log_dir), "--topic", TIERED, "--where", "true", "--execute"])) == 2
        _refused(2, capsys.readouterr().err, "erase")
    with pytest.raises(TieredPartitionError):
        erase(log_dir, TIERED, where="true", execute_plan=True, spark=spark)
    assert _tree(log_dir) == before


# --- recover -----------------------------------------------------------------------------------

def test_recover_of_a_clean_tiered_log_changes_nothing_twice(tmp_path, capsys):
    """Once the files a broker's load adds are there (the log was written without a
    clean-shutdown marker: the load recovers each active segment, rebuilding its index at the
    topic's index.interval.bytes, Kafka's 4096 here, and takes producer snapshots at the last
    two segment bases), recover changes nothing, run after run."""
    log_dir, _ = _logs(tmp_path)
    first = recover(log_dir, execute_plan=True)
    assert sorted({(Path(a.path).parent.name, Path(a.path).suffix) for a in first.actions}) == [
        (f"{t}-0", s) for t in sorted((TIERED, PLAIN)) for s in (".index", ".snapshot")]
    before = _tree(log_dir)
    for extra in ([], ["--execute"], ["--execute"]):
        code, out, err = _run(capsys, "recover", log_dir, "--json", *extra)
        assert code == 0, err
        report = json.loads(out)
        assert not report["changed"]  # the epoch of offsets 0..179 (remote) is kept
        assert any(n.startswith("events-0: its checkpointed log start offset 0") and
                   "only its local log is recovered" in n for n in report["notes"])
        assert not any(n.startswith("plain-0") for n in report["notes"])
        assert _tree(log_dir) == before
    code, _, err = _run(capsys, "recover", log_dir, "--remote-tier", tmp_path / "tier")
    assert code == 2 and "recover does not change a remote tier" in err


def test_recover_cuts_a_torn_tiered_log_keeping_its_remote_history(tmp_path, capsys):
    log_dir, off = _logs(tmp_path, keep_local=1)  # the last copied segment still held locally
    pdir = log_dir / f"{TIERED}-0"
    held_seg, held_start, held_end, _ = off.segments[-1]
    held = pdir / f"{held_start:020d}.log"
    raw = bytearray(held.read_bytes())
    raw[len(raw) // 2] ^= 0xFF  # damage inside the held copy: the cut falls below the tier's end
    held.write_bytes(bytes(raw))
    crashed(log_dir)  # nothing flushed: a broker's load checks every local segment
    for _ in range(2):
        report = recover(log_dir, execute_plan=True)
        (outcome,) = [p for p in report.partitions if p.name == f"{TIERED}-0"]
        note = next(n for n in report.notes if n.startswith(f"{TIERED}-0"))
        assert held_start < outcome.log_end <= held_end
        assert f"the remote tier holds offsets up to {held_end}, at or beyond the recovered " \
               f"log end {outcome.log_end}" in note
    assert (pdir / "leader-epoch-checkpoint").read_text() == EPOCHS  # not cut at the local log
    starts = C.parse_offset_checkpoint((log_dir / "log-start-offset-checkpoint").read_text())
    assert starts[(TIERED, 0)] == 0  # the history's start, below the local log, kept
    whole = kl.read_log(log_dir, topics=[TIERED], remote_tier=off.tier, end_offset=held_start)
    assert whole.column("offset").to_pylist() == list(range(held_start))
