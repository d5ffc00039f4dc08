"""``kafkalog dump``: what DumpLogSegments prints because it runs on a JVM (issue 30, D1-D7).

The expected values were printed by Java 17 and the jars of Kafka 4.1.2 (Scala 2.13.16's
``mutable.Map``, ``new String(bytes, UTF_8)``, Jackson's ``DoubleNode``), not by the code under
test; ``tests/oracle/test_dump_oracle.py`` checks the same against ``kafka-dump-log`` itself.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from kafkalog_spark.cli import cli
from kafkalog_spark.codec.files.snapshot import ProducerEntry, ProducerSnapshot
from kafkalog_spark.inspect.dump_decoders import java_double, java_string
from kafkalog_spark.inspect.dump_options import DumpReport, ReportMap

PATHS = [f"/data/kafka-logs/orders-{i}/00000000000000000000.log" for i in range(30)]


def _order(report: ReportMap) -> list[int]:
    return [int(f.split("orders-")[1].split("/")[0]) for f, _ in report.items()]


def test_report_files_in_the_order_of_scalas_hash_map() -> None:
    # file i has i % 3 + 1 findings, each a put: the table grows 16 -> 32 -> 64
    report = ReportMap(newest_first=True)
    for i, path in enumerate(PATHS):
        for j in range(i % 3 + 1):
            report.add(path, (j, j + 5))
    assert _order(report) == [5, 29, 17, 16, 18, 4, 8, 19, 7, 6, 23, 11, 24, 12, 10, 22, 25,
                              9, 0, 13, 21, 2, 14, 27, 26, 20, 3, 1, 28, 15]
    assert dict(report.items())[PATHS[2]] == [(2, 7), (1, 6), (0, 5)]  # a List: newest first


def test_an_update_can_grow_the_table() -> None:
    """Scala's put grows the table before it looks for the key: an eleven-file List report
    updated once more has 32 buckets; a buffer report (put with its first finding) keeps 16."""
    listed, buffered = ReportMap(newest_first=True), ReportMap()
    for report in (listed, buffered):
        for path in PATHS[:11]:
            report.add(path, (1, 3))
        report.add(PATHS[0], (4, 9))
    assert _order(listed) == [5, 10, 9, 0, 4, 2, 8, 7, 3, 1, 6]
    assert _order(buffered) == [2, 5, 8, 7, 3, 1, 10, 6, 9, 0, 4]
    assert dict(buffered.items())[PATHS[0]] == [(1, 3), (4, 9)]


def test_report_lines_use_that_order() -> None:
    report = DumpReport()
    for path in PATHS[:3]:
        report.non_consecutive.add(path, (0, 0))
        report.non_consecutive.add(path, (0, 3))
    assert report.text_lines()[:3] == [f"Non-consecutive offsets in {PATHS[2]}",
                                       "  0 is followed by 3", "  0 is followed by 0"]


@pytest.mark.parametrize("raw, java", [
    ("41eda080", "41 fffd"), ("41eda08042", "41 fffd 42"), ("41eda04142", "41 fffd 41 42"),
    ("eda0", "fffd"), ("edbf5a", "fffd 5a"), ("ed9fbf", "d7ff"), ("e0a0", "fffd"),
    ("e08080", "fffd fffd fffd"), ("f09080", "fffd"), ("f0908041", "fffd 41"),
    ("f4908080", "fffd fffd fffd fffd"), ("c0af", "fffd fffd"), ("e282", "fffd"),
])
def test_strings_decode_as_javas_utf8_decoder(raw: str, java: str) -> None:
    text = java_string(bytes.fromhex(raw))
    assert text is not None and " ".join(f"{ord(c):x}" for c in text) == java


@pytest.mark.parametrize("value, java", [
    (0.0, "0.0"), (-0.0, "-0.0"), (1048576.0, "1048576.0"), (10485760.0, "1.048576E7"),
    (0.001, "0.001"), (0.00099, "9.9E-4"), (1e20, "1.0E20"), (-3.25e-5, "-3.25E-5"),
    (123456789.0, "1.23456789E8"), (float("nan"), '"NaN"'), (float("inf"), '"Infinity"'),
])
def test_doubles_print_as_jackson_prints_them(value: float, java: str) -> None:
    assert java_double(value) == java


def test_snapshot_entry_without_batch_metadata_ends_in_a_space(tmp_path: Path) -> None:
    """A producer whose last entry was a transaction marker (no batch metadata)."""
    snap = tmp_path / "00000000000000000010.snapshot"
    snap.write_bytes(ProducerSnapshot((ProducerEntry(7, 1, timestamp=1700000000000,
                                                     coordinator_epoch=3),)).to_bytes())
    out = CliRunner().invoke(cli, ["dump", "--files", str(snap)], catch_exceptions=False)
    assert out.exit_code == 0 and out.stdout.splitlines()[1:] == [
        "producerId: 7 producerEpoch: 1 coordinatorEpoch: 3 currentTxnFirstOffset: "
        "OptionalLong.empty lastTimestamp: 1700000000000 "]


def test_null_key_without_record_metadata(tmp_path: Path) -> None:
    """Only a key takes the ``| `` that starts a line without record metadata."""
    from golden import V2_1
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(bytes.fromhex(V2_1))
    out = CliRunner().invoke(cli, ["dump", "--print-data-log", "--skip-record-metadata",
                                   "--files", str(log)], catch_exceptions=False)
    assert out.stdout.splitlines()[3] == " payload: 123"
