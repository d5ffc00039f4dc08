"""Kafka itself as the oracle, part 6 (issue 30): ``kafkalog dump`` prints what Kafka's own
``kafka-dump-log`` (``kafka.tools.DumpLogSegments`` from the broker's jars) prints, with the same
flags, over every file of the broker-written log dir of ``scenario.py`` (data, indexes, time and
transaction indexes, producer snapshots, ``__consumer_offsets``, ``__transaction_state``, the
KRaft ``__cluster_metadata`` log and ``bootstrap.checkpoint``, ``.deleted`` leftovers) and of the
real fixtures (``../shared/fixtures/real``: Kafka 1.0 to 3.7 log dirs, KRaft snapshots, v0/v1
message sets, files that are not Kafka's).

Each flag set runs once over its files (one JVM, one ``kafkalog`` process); the outputs are cut
per file and compared per kind of file and stream, so that each difference is one failing test
(a known one is a strict xfail naming it; docs/kafka-oracle.md says where and how to fix it).

Files DumpLogSegments throws on (it stops there, printing a stack trace) are left out of the
runs and checked on their own: the v0/v1 message sets of the fixtures, whose names are not
offsets, are dumped from copies named as segments.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest

import kafkalog_spark as kl

from .dumps import (Compared, compare_over, crashed, kafka_dump, kafka_throws_on, our_dump,
                    stdout_sections)

pytestmark = [pytest.mark.broker, pytest.mark.slow]

KINDS = {"log": (".log",), "index": (".index",), "timeindex": (".timeindex",),
         "txnindex": (".txnindex",), "snapshot": (".snapshot",), "checkpoint": (".checkpoint",)}

# flag set -> (flags, kinds of file it is run over)
FLAG_SETS = {
    "plain": ([], None),
    "deep-iteration": (["--deep-iteration"], ("log", "checkpoint")),
    "print-data-log": (["--print-data-log"], ("log", "checkpoint")),
    "skip-record-metadata": (["--print-data-log", "--skip-record-metadata"], ("log", "checkpoint")),
    "verify-index-only": (["--verify-index-only"], ("index", "timeindex")),
    "index-sanity-check": (["--index-sanity-check"], ("index", "timeindex")),
}
# decoder -> (flag, the internal topic's partition dirs it is for)
DECODERS = {
    "offsets-decoder": ("--offsets-decoder", "__consumer_offsets-"),
    "transaction-log-decoder": ("--transaction-log-decoder", "__transaction_state-"),
    "cluster-metadata-decoder": ("--cluster-metadata-decoder", "__cluster_metadata-"),
}

NON_CONSECUTIVE = (
    "deep iteration's 'Non-consecutive offsets in <file>' findings (stderr): Kafka pairs each "
    "record with the previous one *in the file* (its lastOffset starts unset, so a segment's "
    "first record is never reported; ours reports '-1 is followed by <first offset>'), lists a "
    "file's pairs last first (it prepends to a Scala List) and the files in its mutable.HashMap's "
    "order; ours lists pairs in offset order and files in dump order "
    "(kafkalog_spark/log/dump.py: DumpReport.text_lines and the log dumper)")
UTF8 = ("--print-data-log on bytes that are not UTF-8: Java's String(bytes, UTF_8) turns ED A0..BF "
        "(a UTF-16 surrogate's encoding) with its continuation byte into ONE U+FFFD, Python's "
        "errors='replace' into one per byte (kafkalog_spark/log/dump_decoders.py: parse)")
NULL_KEY_SKIP = ("--print-data-log --skip-record-metadata on a record without a key: Kafka "
                 "prints ' payload: v' (the '| ' prefix is used only by the key, payload always "
                 "starts with ' payload:'); ours prints '| payload: v'")
SNAPSHOT_SPACE = ("producer snapshot entry without batch metadata (a producer whose last entry "
                  "is a transaction marker): Kafka prints 'lastTimestamp: <t> ' with a trailing "
                  "space (print(...) then println()); ours strips it "
                  "(kafkalog_spark/log/dump_indexes.py: the snapshot dumper)")
CONSUMER_PROTOCOL_VERSION = (
    "--offsets-decoder: a consumer group's member subscription and assignment: Kafka replaces "
    "the bytes by ConsumerProtocolSubscription/AssignmentJsonConverter.write(data, version), "
    "which has no 'version' field; ours adds \"version\":N")
METADATA_RECORDS = (
    "--cluster-metadata-decoder: record types without a schema in kafkalog_spark/codec/"
    "kraft_records.py (BeginTransactionRecord 23, EndTransactionRecord 24, ZkMigrationStateRecord "
    "21 - named ZkMigrationRecord there - and others) print \"data\":null,\"raw\":... where Kafka "
    "prints the decoded record")
LEGACY_BRACE = ("deep iteration over v0/v1 message sets: Kafka prints each legacy record's "
                "line ending 'isValid: <b> crc: <n>}' (a stray '}' in DumpLogSegments.dumpLog's "
                "s\" isValid: ${r.isValid} crc: ${r.checksum}}\"); ours ends it at the crc")

XFAIL = {
    ("deep-iteration", "log", "stdout"): LEGACY_BRACE,
    ("deep-iteration", "log", "stderr"): NON_CONSECUTIVE,
    ("print-data-log", "log", "stderr"): NON_CONSECUTIVE,
    ("skip-record-metadata", "log", "stderr"): NON_CONSECUTIVE,
    ("offsets-decoder", "log", "stderr"): NON_CONSECUTIVE,
    ("print-data-log", "log", "stdout"): UTF8 + "; and " + LEGACY_BRACE,
    ("skip-record-metadata", "log", "stdout"): UTF8 + "; and " + NULL_KEY_SKIP,
    ("skip-record-metadata", "checkpoint", "stdout"): NULL_KEY_SKIP,
    ("plain", "snapshot", "stdout"): SNAPSHOT_SPACE,
    ("offsets-decoder", "log", "stdout"): CONSUMER_PROTOCOL_VERSION,
    ("cluster-metadata-decoder", "log", "stdout"): METADATA_RECORDS,
    ("cluster-metadata-decoder", "checkpoint", "stdout"): METADATA_RECORDS,
}


def _kind(name: str) -> str:
    for kind, suffixes in KINDS.items():
        if name.endswith(suffixes):
            return kind
    return "other"


@pytest.fixture(scope="module")
def dump_files(oracle_run, shared_fixtures, tmp_path_factory) -> list[str]:
    """Every file of the scenario's log dir and of the fixtures that DumpLogSegments does not
    throw on, and copies of the fixtures' v0/v1 message sets named as segments."""
    sets = tmp_path_factory.mktemp("message-sets")
    out = []
    for root in (oracle_run.log_dir, shared_fixtures):
        for path in sorted(p for p in Path(root).rglob("*") if p.is_file()):
            if kafka_throws_on(path) is None:
                out.append(str(path))
            elif path.parent.name == "derived_message_sets" and path.suffix == ".log":
                copy = sets / f"{path.parent.parent.name}-{path.stem}-0" / f"{0:020d}.log"
                copy.parent.mkdir(parents=True)
                shutil.copyfile(path, copy)
                out.append(str(copy))
    return out


@pytest.fixture(scope="module")
def runs(kafka_jars, kafka_broker, dump_files):
    """``name -> Compared``: both tools over the files of each flag set, run on first use."""
    done: dict[str, Compared] = {}

    def get(name: str) -> Compared:
        if name not in done:
            if name in FLAG_SETS:
                flags, kinds = FLAG_SETS[name]
                files = [f for f in dump_files if kinds is None or _kind(f) in kinds]
            else:
                flag, topic = DECODERS[name]
                flags = [flag]
                files = [f for f in dump_files if f"/{topic}" in f and _kind(f) == "log"
                         or (name == "cluster-metadata-decoder" and _kind(f) == "checkpoint")]
            assert files, name
            done[name] = compare_over(kafka_jars, kafka_broker.tools_log4j(), files, flags)
        return done[name]

    return get


def _cases():
    out = []
    for name, (_, kinds) in FLAG_SETS.items():
        for kind in kinds or (*KINDS, "other"):
            for stream in ("stdout", "stderr"):
                out.append((name, kind, stream))
    for name in DECODERS:
        kinds = ("log", "checkpoint") if name == "cluster-metadata-decoder" else ("log",)
        out += [(name, kind, stream) for kind in kinds for stream in ("stdout", "stderr")]
    return [pytest.param(*c, id="-".join(c),
                         marks=[pytest.mark.xfail(strict=True, reason=XFAIL[c])] if c in XFAIL
                         else []) for c in out]


@pytest.mark.parametrize("name, kind, stream", _cases())
def test_dump_prints_what_kafka_dump_log_prints(runs, name, kind, stream):
    found = [d for d in runs(name).differences(keep=lambda f: _kind(f) == kind)
             if d.startswith(stream)]
    assert found == [], "\n".join(found[:12])


def test_every_kind_of_file_was_compared(runs, dump_files):
    """The comparisons above are not vacuous: each kind of file was dumped by Kafka, the
    internal topics' decoders had records to decode, and the fixtures' message sets (v0/v1)
    were among the logs."""
    dumped = {f: lines for _, k, _ in runs("plain").runs
              for f, lines in stdout_sections(k.stdout).items()}
    assert {_kind(f) for f in dumped} >= {*KINDS, "other"}
    for name in DECODERS:
        text = "".join(k.stdout for _, k, _ in runs(name).runs)
        assert " payload: {" in text, name
    legacy = "\n".join(line for f, lines in dumped.items() if "message-sets" in f
                       for line in lines)
    assert "magic: 0" in legacy and "magic: 1" in legacy


# --- small cases, one difference each -------------------------------------------------------

def _one_record_log(tmp_path: Path, key: bytes | None, value: bytes) -> str:
    table = pa.table({"key": pa.array([key], pa.binary()), "value": pa.array([value], pa.binary())})
    kl.write_log(table, tmp_path, topic="t", partition=0)
    return str(tmp_path / "t-0" / f"{0:020d}.log")


def _same(kafka_jars, kafka_broker, files, flags):
    kafka = kafka_dump(kafka_jars, kafka_broker.tools_log4j(), files, flags)
    ours = our_dump(files, flags)
    assert (ours.stdout, ours.stderr, ours.returncode) == \
        (kafka.stdout, kafka.stderr, kafka.returncode)


@pytest.mark.xfail(strict=True, reason=UTF8)
def test_payload_with_a_surrogate_encoding(kafka_jars, kafka_broker, tmp_path):
    log = _one_record_log(tmp_path, b"k\xed\xbfZ", b"A\xed\xa0\x80B\xed\xa0")
    _same(kafka_jars, kafka_broker, [log], ["--print-data-log"])


@pytest.mark.xfail(strict=True, reason=NULL_KEY_SKIP)
def test_null_key_without_record_metadata(kafka_jars, kafka_broker, tmp_path):
    log = _one_record_log(tmp_path, None, b"value")
    _same(kafka_jars, kafka_broker, [log], ["--print-data-log", "--skip-record-metadata"])


@pytest.mark.xfail(strict=True, reason=LEGACY_BRACE)
def test_legacy_records(kafka_jars, kafka_broker, dump_files):
    logs = [f for f in dump_files if "message-sets" in f and "kafka-rust" in f][:2]
    assert logs
    _same(kafka_jars, kafka_broker, logs, ["--deep-iteration"])


def test_files_kafka_throws_on(kafka_jars, kafka_broker, shared_fixtures, oracle_run):
    """Where DumpLogSegments throws (a stack trace, exit 1, no later file dumped) we print the
    same ``Dumping`` line and then one line: an error naming the file (exit 2) for a segment
    whose name is not an offset and for an index without its log; for a file without a '.'
    in its name the ``Ignoring unknown file`` line Kafka prints for other unknown files (exit
    0). docs/kafka-oracle.md lists these as differences we keep."""
    cases = {
        "not an offset": next((shared_fixtures / "kafka-rust__kafka-rust" /
                               "derived_message_sets").glob("*.log")),
        "no log": next(p for p in shared_fixtures.rglob("*.index")
                       if kafka_throws_on(p) and "missing" in kafka_throws_on(p)),
        "no dot": oracle_run.log_dir / "java-txn-0" / "leader-epoch-checkpoint",
    }
    for why, path in cases.items():
        kafka = kafka_dump(kafka_jars, kafka_broker.tools_log4j(), [str(path)], [])
        ours = our_dump([str(path)], [])
        assert crashed(kafka) and kafka.returncode == 1, why
        assert ours.stdout == kafka.stdout == f"Dumping {path}\n", why
        if why == "no dot":
            assert (ours.returncode, ours.stderr) == (0, f"Ignoring unknown file {path}\n")
        else:
            lines = ours.stderr.splitlines()
            assert ours.returncode == 2 and len(lines) == 1 and str(path) in lines[0], why
