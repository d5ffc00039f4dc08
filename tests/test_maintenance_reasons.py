"""Compaction and retention explain themselves: every partition they leave alone is reported
with its reason (text and JSON), and ``--high-watermark log-end`` lets an offline user treat
the log end as the high watermark of a copied log dir (Kafka's rule stands without it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from kafkalog_spark.cli import cli
from kafkalog_spark.codec.files import checkpoints as C
from kafkalog_spark.compaction.compact import compact
from kafkalog_spark.errors import InvalidOptionError
from kafkalog_spark.codec.files import naming as N
from kafkalog_spark.storage.atomic import read_checkpoint_file, write_checkpoint_file
from kafkalog_spark.retention.retain import retain
from test_compaction import T, build_partition, rec

COMPACT = {"cleanup.policy": "compact"}


def _segments(n: int, per: int = 3) -> list[list[bytes]]:
    """``n`` segments of ``per`` records each, keys repeating (the last is the active one)."""
    return [[rec(s * per + i, b"k%d" % (i % 2), b"v") for i in range(per)] for s in range(n)]


def _drop_hw(log_dir: Path) -> None:
    """A copied log dir whose replication-offset-checkpoint lost every entry."""
    write_checkpoint_file(log_dir / N.REPLICATION_OFFSET_CHECKPOINT,
                          C.format_offset_checkpoint({}))


def _skipped(result) -> dict[str, str]:
    return {s["partition"]: s["reason"] for s in result.to_dict()["skipped"]}


def test_every_skipped_partition_has_its_reason(tmp_path):
    logs = tmp_path / "logs"
    build_partition(logs, _segments(1), topic="active")  # the active segment only
    build_partition(logs, _segments(3), topic="ratio")
    build_partition(logs, _segments(3), topic="nohw")
    offsets = read_checkpoint_file(logs / N.REPLICATION_OFFSET_CHECKPOINT,
                                   C.parse_offset_checkpoint)
    del offsets[("nohw", 0)]
    write_checkpoint_file(logs / N.REPLICATION_OFFSET_CHECKPOINT,
                          C.format_offset_checkpoint(offsets))
    result = compact(logs, options={**COMPACT, "min.cleanable.dirty.ratio": "1"}, now_ms=T)
    reasons = _skipped(result)
    assert set(reasons) == {"active-0", "ratio-0", "nohw-0"} and not result.plans
    assert "only the active segment" in reasons["active-0"]
    assert "dirty ratio" in reasons["ratio-0"] and "min.cleanable.dirty.ratio 1.0" in \
        reasons["ratio-0"]
    assert "no high watermark known" in reasons["nohw-0"]
    assert "--high-watermark log-end" in reasons["nohw-0"]


def test_cleaned_partition_and_open_transaction_reasons(tmp_path):
    logs = tmp_path / "logs"
    build_partition(logs, _segments(3), topic="t")
    compact(logs, options=COMPACT, now_ms=T, execute=True, force=True)
    again = _skipped(compact(logs, options=COMPACT, now_ms=T, force=True))
    assert "nothing dirty below the active segment" in again["t-0"]

    txn = tmp_path / "txn"
    spec = dict(producer_id=7, producer_epoch=0, is_transactional=True)
    build_partition(txn, [[rec(0, b"a", b"1", **spec)], [rec(1, b"a", b"2", **spec)],
                          [rec(2, b"b", b"3")]], topic="t")
    reasons = _skipped(compact(txn, options=COMPACT, now_ms=T, force=True))
    assert "open transaction" in reasons["t-0"] and "last stable offset at 0" in reasons["t-0"]


def test_high_watermark_log_end_makes_a_copied_dir_cleanable(tmp_path):
    logs = tmp_path / "logs"
    build_partition(logs, _segments(3), topic="t")
    _drop_hw(logs)
    assert not compact(logs, options=COMPACT, now_ms=T, force=True).plans  # Kafka's rule
    result = compact(logs, options=COMPACT, now_ms=T, force=True, high_watermark="log-end")
    assert [p.state.topic for p in result.plans] == ["t"] and not result.skipped
    with pytest.raises(InvalidOptionError, match="checkpoint, log-end"):
        compact(logs, options=COMPACT, now_ms=T, high_watermark="end")


def test_retention_says_why_nothing_is_deleted_and_honours_log_end(tmp_path):
    logs = tmp_path / "logs"
    build_partition(logs, _segments(1), topic="active")
    build_partition(logs, [[]], topic="empty")
    build_partition(logs, _segments(3), topic="young")
    build_partition(logs, _segments(3), topic="copied")
    offsets = read_checkpoint_file(logs / N.REPLICATION_OFFSET_CHECKPOINT,
                                   C.parse_offset_checkpoint)
    del offsets[("copied", 0)]
    write_checkpoint_file(logs / N.REPLICATION_OFFSET_CHECKPOINT,
                          C.format_offset_checkpoint(offsets))
    opts = {"retention.ms": "3600000"}
    notes = {f"{p.topic}-{p.partition}": " ".join(p.notes)
             for p in retain(logs, options=opts, now_ms=T).plans}
    assert "not older than retention.ms 3600000" in notes["active-0"]
    assert "only an empty active segment" in notes["empty-0"]
    assert "not older than retention.ms 3600000" in notes["young-0"]
    assert "--high-watermark log-end" in notes["copied-0"]
    later = T + 10 * 3600_000
    kafka_rule = {p.topic: len(p.deletions) for p in retain(logs, options=opts, now_ms=later).plans}
    log_end = {p.topic: len(p.deletions) for p in
               retain(logs, options=opts, now_ms=later, high_watermark="log-end").plans}
    # every segment expired, the active one too: all go (Kafka rolls an empty one first)
    assert kafka_rule["copied"] == 0 and log_end["copied"] == 3 and kafka_rule["young"] == 3
    assert kafka_rule["active"] == 1 and kafka_rule["empty"] == 0


def test_cli_reports_reasons_in_text_and_json(tmp_path):
    logs = tmp_path / "logs"
    build_partition(logs, _segments(3), topic="t")
    _drop_hw(logs)
    base = ["compact", str(logs), "--now", str(T), "--config", "cleanup.policy=compact", "--force"]
    text = CliRunner().invoke(cli, base)
    assert text.exit_code == 0, text.output
    assert "t-0: skipped: no high watermark known" in text.output
    as_json = CliRunner().invoke(cli, base + ["--json"])
    assert json.loads(as_json.output)["skipped"][0]["reason"].startswith("no high watermark")
    dry = CliRunner().invoke(cli, base + ["--high-watermark", "log-end"])
    assert dry.exit_code == 1 and "t-0: would clean" in dry.output
    retained = CliRunner().invoke(cli, ["retain", str(logs), "--now", str(T + 10 * 3600_000),
                                        "--config", "retention.ms=3600000",
                                        "--high-watermark", "log-end"])
    assert retained.exit_code == 1 and "would delete segment 0" in retained.output
