"""Regression tests for what the fuzzer (tests/fuzz) found: each input once made a parser, verify
or recover fail with something other than a result or a typed ``KafkaLogError``."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

import kafkalog_spark as kl
from kafkalog_spark.log.verify import verify


def small_log_dir(root: Path) -> Path:
    """One partition ``fz-0`` with several batches and a non-empty ``.index``."""
    values = [b"v%03d" % i * 20 for i in range(200)]
    kl.write_log(pa.table({"value": values}), root, topic="fz", max_batch_records=10,
                 index_interval_bytes=512)
    return root / "fz-0"


def test_verify_index_entries_over_an_empty_log(tmp_path: Path) -> None:
    # fuzz seed 2 case 8979: the .log cut to nothing while its .index kept entries made
    # check_offset_index index an empty entry table (IndexError instead of a problem)
    part = small_log_dir(tmp_path / "logs")
    (log,) = part.glob("*.log")
    assert (part / log.name.replace(".log", ".index")).stat().st_size > 0
    log.write_bytes(b"")
    report = verify(tmp_path / "logs", deep=True)
    assert not report.ok
    assert any(p.check == "index" and "not the start of an entry" in p.message
               for p in report.errors()), report.errors()
