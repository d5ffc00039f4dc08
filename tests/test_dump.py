"""``kafkalog dump``: kafka-dump-log.sh (Kafka 4.x) output, line for line.

Expected lines are written by hand from KAFKA_FORMATS §16 for the golden vectors of §18.3/§18.4
and for real broker segments; they are not produced by the code under test.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from kafkalog_spark.cli import cli
from kafkalog_spark.errors import InvalidOptionError
from kafkalog_spark.inspect import dump_output as dump_module
from kafkalog_spark.inspect.dump import DumpOptions

KRAFT = "ItumelengMogase__Real-Time-Data-Pipeline-for-Patient-Admissions/kafka-data"
TUYEN = "tuyen-nnt__kafka_2.13-3.0.0/data/kafka"

from golden import ABORTED_TXN, V2_1, V2_2, V2_3, V2_4  # noqa: E402
from golden import COMMIT_MARKER as COMMIT  # noqa: E402
from golden import V0_MSGS as V0  # noqa: E402
from golden import V1_MSGS as V1  # noqa: E402

V2_BATCH = ("baseOffset: {b} lastOffset: {l} count: {n} baseSequence: -1 lastSequence: -1 "
            "producerId: -1 producerEpoch: -1 partitionLeaderEpoch: {ple} isTransactional: false "
            "isControl: false deleteHorizonMs: OptionalLong.empty position: {pos} CreateTime: {ts} "
            "size: {size} magic: 2 compresscodec: none crc: {crc} isvalid: {valid}")


def run(*args: str, code: int = 0):
    result = CliRunner().invoke(cli, ["dump", *args], catch_exceptions=False)
    assert result.exit_code == code, (result.stdout, result.stderr)
    return result


def write(tmp_path: Path, name: str, *hexes: str, extra: bytes = b"") -> Path:
    path = tmp_path / name
    path.write_bytes(b"".join(bytes.fromhex(h) for h in hexes) + extra)
    return path


def fixture_copy(shared_fixtures: Path, rel: str, tmp_path: Path) -> Path:
    dst = tmp_path / Path(rel).name
    shutil.copytree(shared_fixtures / rel, dst)
    for p in dst.iterdir():
        p.chmod(0o644)
    return dst


# --- .log: v2, legacy, markers ----------------------------------------------------------------

def test_v2_vectors_shallow_and_deep(tmp_path: Path) -> None:
    log = write(tmp_path, "00000000000000000000.log", V2_1, V2_2, V2_3)
    b1 = V2_BATCH.format(b=0, l=0, n=1, ple=1, pos=0, ts=1503229838908, size=71, crc=51946096,
                         valid="true")
    b2 = V2_BATCH.format(b=1, l=2, n=2, ple=2, pos=71, ts=1503229959700, size=76,
                         crc=3361520931, valid="true")
    b3 = V2_BATCH.format(b=3, l=3, n=1, ple=2, pos=147, ts=1503229962141, size=71,
                         crc=772507063, valid="true")
    shallow = run("--files", str(log))
    assert shallow.stdout.splitlines() == [f"Dumping {log}", "Log starting offset: 0", b1, b2, b3]
    assert shallow.stderr == ""
    deep = run("--deep-iteration", "--print-data-log", "--files", str(log))
    assert deep.stdout.splitlines() == [
        f"Dumping {log}", "Log starting offset: 0", b1,
        "| offset: 0 CreateTime: 1503229838908 keySize: -1 valueSize: 3 sequence: -1 headerKeys: [] payload: 123",
        b2,
        "| offset: 1 CreateTime: 1503229959532 keySize: -1 valueSize: 0 sequence: -1 headerKeys: [] payload: ",
        "| offset: 2 CreateTime: 1503229959700 keySize: -1 valueSize: 0 sequence: -1 headerKeys: [] payload: ",
        b3,
        "| offset: 3 CreateTime: 1503229962141 keySize: -1 valueSize: 3 sequence: -1 headerKeys: [] payload: 123",
    ]
    assert deep.stderr == ""  # offsets 0..3 are consecutive


def test_worked_example_non_consecutive(tmp_path: Path) -> None:
    """§16.3 worked example: batches #1 and #4 both hold offset 0."""
    log = write(tmp_path, "00000000000000000000.log", V2_1, V2_4)
    out = run("--print-data-log", "--files", str(log))
    assert out.stdout.splitlines()[2:] == [
        V2_BATCH.format(b=0, l=0, n=1, ple=1, pos=0, ts=1503229838908, size=71, crc=51946096,
                        valid="true"),
        "| offset: 0 CreateTime: 1503229838908 keySize: -1 valueSize: 3 sequence: -1 headerKeys: [] payload: 123",
        V2_BATCH.format(b=0, l=0, n=1, ple=0, pos=71, ts=1535546684353, size=81, crc=1557720914,
                        valid="true"),
        "| offset: 0 CreateTime: 1535546684353 keySize: -1 valueSize: 3 sequence: -1 headerKeys: [hkey] payload: hdr",
    ]
    assert out.stderr.splitlines() == [f"Non-consecutive offsets in {os.path.abspath(log)}",
                                       "  0 is followed by 0"]


def test_bad_crc_prints_isvalid_false_and_still_the_records(tmp_path: Path) -> None:
    raw = bytearray(bytes.fromhex(V2_1))
    raw[-2] ^= 0x01  # "123" -> "122": content no longer matches the stored CRC-32C
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(bytes(raw))
    out = run("--print-data-log", "--files", str(log)).stdout.splitlines()
    assert out[2].endswith("crc: 51946096 isvalid: false")
    assert out[3].endswith("payload: 122")  # Kafka's iterator does not check the CRC


def test_v1_and_v0_messages(tmp_path: Path) -> None:
    v1 = write(tmp_path, "00000000000000000000.log", *V1)
    out = run("--deep-iteration", "--files", str(v1)).stdout.splitlines()
    assert out[2:] == [
        "offset: 0 position: 0 CreateTime: 1503648000942 size: 37 magic: 1 compresscodec: none crc: 1199974594 isvalid: true",
        "| offset: 0 CreateTime: 1503648000942 keySize: -1 valueSize: 3 isValid: true crc: 1199974594}",
        "offset: 1 position: 37 CreateTime: 1503648001984 size: 34 magic: 1 compresscodec: none crc: 4019767584 isvalid: true",
        "| offset: 1 CreateTime: 1503648001984 keySize: -1 valueSize: 0 isValid: true crc: 4019767584}",
        "offset: 2 position: 71 CreateTime: 1503648002162 size: 34 magic: 1 compresscodec: none crc: 1605368670 isvalid: true",
        "| offset: 2 CreateTime: 1503648002162 keySize: -1 valueSize: 0 isValid: true crc: 1605368670}",
        "offset: 3 position: 105 CreateTime: 1503648004099 size: 37 magic: 1 compresscodec: none crc: 2819774240 isvalid: true",
        "| offset: 3 CreateTime: 1503648004099 keySize: -1 valueSize: 3 isValid: true crc: 2819774240}",
    ]
    v0 = write(tmp_path, "00000000000000000007.log", *V0)
    out = run("--print-data-log", "--files", str(v0)).stdout.splitlines()
    assert out[1:] == [
        "Log starting offset: 7",
        "offset: 0 position: 0 NoTimestampType: -1 size: 29 magic: 0 compresscodec: none crc: 4272954815 isvalid: true",
        "| offset: 0 NoTimestampType: -1 keySize: -1 valueSize: 3 isValid: true crc: 4272954815} payload: 123",
        "offset: 1 position: 29 NoTimestampType: -1 size: 26 magic: 0 compresscodec: none crc: 2035763424 isvalid: true",
        "| offset: 1 NoTimestampType: -1 keySize: -1 valueSize: 0 isValid: true crc: 2035763424} payload: ",
    ]


def test_commit_marker(tmp_path: Path) -> None:
    log = write(tmp_path, "00000000000000000100.log", COMMIT)
    batch = ("baseOffset: 100 lastOffset: 100 count: 1 baseSequence: -1 lastSequence: -1 "
             "producerId: 1000 producerEpoch: 2 partitionLeaderEpoch: 5 isTransactional: true "
             "isControl: true deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: "
             "1700000000000 size: 78 magic: 2 compresscodec: none crc: 2157742276 isvalid: true")
    out = run("--print-data-log", "--files", str(log))
    assert out.stdout.splitlines()[1:] == [
        "Log starting offset: 100", batch,
        "| offset: 100 CreateTime: 1700000000000 keySize: 4 valueSize: 6 sequence: -1 "
        "headerKeys: [] endTxnMarker: COMMIT coordinatorEpoch: 7"]  # no key/payload for control
    assert out.stderr == ""  # a file's first record is paired with none, whatever its offset
    skipped = run("--print-data-log", "--skip-record-metadata", "--files", str(log))
    assert skipped.stdout.splitlines()[2:] == [batch, ""]


def test_key_and_skip_record_metadata_prefix(tmp_path: Path) -> None:
    """§18.4 data batch: key "k1"/value "v1", then key "k2" with a null value and a header."""
    data = ("00000000000000000000004900000000024109046f0000000000010000018bcfe568000000018bcfe568"
            "05ffffffffffffffffffffffffffff0000000214000000046b310476310018000a02046b3201020268"
            "0278")
    log = write(tmp_path, "00000000000000000000.log", data)
    out = run("--print-data-log", "--files", str(log)).stdout.splitlines()
    assert out[3] == ("| offset: 0 CreateTime: 1700000000000 keySize: 2 valueSize: 2 sequence: -1 "
                      "headerKeys: [] key: k1 payload: v1")
    assert out[4] == ("| offset: 1 CreateTime: 1700000000005 keySize: 2 valueSize: -1 sequence: -1 "
                      "headerKeys: [h] key: k2")
    out = run("--print-data-log", "--skip-record-metadata", "--files", str(log)).stdout.splitlines()
    assert out[3:] == ["| key: k1 payload: v1", "| key: k2"]


def test_trailing_bytes_max_bytes_and_corrupt_size(tmp_path: Path) -> None:
    log = write(tmp_path, "00000000000000000000.log", V2_1, V2_2, extra=b"\x00" * 13)
    assert run("--files", str(log)).stdout.splitlines()[-1] == \
        "Found 13 invalid bytes at the end of 00000000000000000000.log"
    limited = run("--max-bytes", "100", "--files", str(log)).stdout.splitlines()
    assert len(limited) == 3 and limited[2].startswith("baseOffset: 0 ")  # no warning with --max-bytes
    bad = write(tmp_path, "00000000000000000001.log", V2_1, extra=b"\x00" * 30)
    out = run("--files", str(bad), code=2)
    assert len(out.stdout.splitlines()) == 3  # batch printed, nothing after the bad entry
    assert "Found record size 0 smaller than minimum record overhead (14)" in out.stderr
    assert "byte position 71" in out.stderr


def test_chunked_decoding_matches_one_chunk(tmp_path: Path, monkeypatch) -> None:
    log = write(tmp_path, "00000000000000000000.log", V2_1, V2_2, V2_3, V2_4, COMMIT)
    whole = run("--print-data-log", "--files", str(log))
    monkeypatch.setattr(dump_module, "SCAN_CHUNK_ENTRIES", 2)
    chunked = run("--print-data-log", "--files", str(log))
    assert chunked.stdout == whole.stdout and chunked.stderr == whole.stderr
    assert len(whole.stdout.splitlines()) == 2 + 5 + 6


def test_legacy_gzip_wrapper_inner_crcs(shared_fixtures: Path, tmp_path: Path) -> None:
    src = shared_fixtures / "kafka-rust__kafka-rust/derived_message_sets"
    log = tmp_path / "00000000000000000000.log"
    shutil.copyfile(src / "fetch1.mytopic.1p.gzip.kafka.0821.my-topic-0.log", log)
    out = run("--deep-iteration", "--files", str(log)).stdout.splitlines()
    assert out[2].startswith("offset: 41 position: 0 NoTimestampType: -1 ")
    assert " magic: 0 compresscodec: gzip " in out[2] and out[2].endswith("isvalid: true")
    records = out[3:]
    assert len(records) == 42
    assert [int(r.split()[2]) for r in records] == list(range(42))
    assert all(" isValid: true crc: " in r for r in records)


# --- indexes, snapshots ----------------------------------------------------------------------

def test_real_segment_index_timeindex_snapshot(shared_fixtures: Path) -> None:
    d = shared_fixtures / KRAFT / "_confluent-ksql-default__command_topic-0"
    files = [d / "00000000000000000000.index", d / "00000000000000000000.timeindex",
             d / "00000000000000000002.snapshot"]
    out = run("--files", ",".join(map(str, files)))
    assert out.stdout.splitlines() == [
        f"Dumping {files[0]}", "offset: 1 position: 7525",
        f"Dumping {files[1]}", "timestamp: 1728561475581 offset: 1",
        f"Dumping {files[2]}",
        "producerId: 0 producerEpoch: 0 coordinatorEpoch: 0 currentTxnFirstOffset: "
        "OptionalLong.empty lastTimestamp: 1728561475581 firstSequence: 0 lastSequence: 0 "
        "lastOffset: 0 offsetDelta: 0 timestamp: 1728561475581"]
    assert out.stderr == ""


def test_real_offsets_segment_indexes_agree(shared_fixtures: Path) -> None:
    d = shared_fixtures / KRAFT / "__consumer_offsets-29"
    out = run("--files", f"{d}/00000000000000000000.index,{d}/00000000000000000000.timeindex")
    lines = out.stdout.splitlines()
    assert lines[1:3] == ["offset: 12 position: 4395", "offset: 26 position: 8556"]
    assert lines[4:] == ["timestamp: 1728577666889 offset: 12", "timestamp: 1728581914245 offset: 26",
                         "timestamp: 1728588424551 offset: 38", "timestamp: 1728596416491 offset: 44"]
    assert out.stderr == ""
    verify = run("--verify-index-only", "--files", f"{d}/00000000000000000000.index")
    assert verify.stdout.splitlines() == [f"Dumping {d}/00000000000000000000.index"]
    assert verify.stderr == ""


def test_damaged_indexes_reported(shared_fixtures: Path, tmp_path: Path) -> None:
    # two copies: the time index dump looks positions up in the (here undamaged) offset index
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    index = fixture_copy(shared_fixtures, f"{KRAFT}/__consumer_offsets-29",
                         tmp_path / "a") / "00000000000000000000.index"
    # entry 0 -> position of the batch at offset 13; entry 1 -> past the end of the log
    index.write_bytes(bytes.fromhex("0000000c0000119c" "0000001a000f4240"))
    tindex = fixture_copy(shared_fixtures, f"{KRAFT}/__consumer_offsets-29",
                          tmp_path / "b") / "00000000000000000000.timeindex"
    raw = bytearray(tindex.read_bytes())
    raw[0:8] = (1728577666000).to_bytes(8, "big")  # wrong timestamp for offset 12
    raw[44:48] = (45).to_bytes(4, "big")  # offset 45 is beyond the log
    tindex.write_bytes(bytes(raw))
    out = run("--verify-index-only", "--files", f"{index},{tindex}")
    assert out.stdout.splitlines() == [f"Dumping {index}", f"Dumping {tindex}"]
    assert out.stderr.splitlines() == [
        f"Mismatches in :{os.path.abspath(index)}",
        "  Index offset: 26, log offset: -1",
        "  Index offset: 12, log offset: 13",
        f"Found timestamp mismatch in :{os.path.abspath(tindex)}",
        "  Index timestamp: 1728577666000, log timestamp: 1728577666889",
        "The following indexed offsets are not found in the log.",
        "Indexed offset: 45, found log offset: -1",
    ]


def test_index_sanity_check(shared_fixtures: Path, tmp_path: Path) -> None:
    d = fixture_copy(shared_fixtures, f"{KRAFT}/__consumer_offsets-29", tmp_path)
    index, tindex = d / "00000000000000000000.index", d / "00000000000000000000.timeindex"
    out = run("--index-sanity-check", "--files", f"{index},{tindex}")
    assert out.stdout.splitlines() == [f"Dumping {index}", f"{index} passed sanity check.",
                                       f"Dumping {tindex}", f"{tindex} passed sanity check."]
    index.write_bytes(index.read_bytes() + bytes.fromhex("ffffffff00000000"))  # offset below base
    tindex.write_bytes(tindex.read_bytes() + bytes(12))  # zero tail: last timestamp < first
    bad = run("--index-sanity-check", "--files", f"{index},{tindex}", code=2)
    assert "passed sanity check" not in bad.stdout
    errors = bad.stderr.splitlines()
    assert len(errors) == 2
    assert str(index) in errors[0] and "below the base offset" in errors[0]
    assert str(tindex) in errors[1] and "last timestamp 0 is less than the first" in errors[1]


def test_empty_index_txnindex_and_unknown(tmp_path: Path) -> None:
    write(tmp_path, "00000000000000000000.log", V2_1)
    empty = write(tmp_path, "00000000000000000000.index")
    txn = write(tmp_path, "00000000000000000000.txnindex", ABORTED_TXN, ABORTED_TXN)
    other = write(tmp_path, "leader-epoch-checkpoint", "30")
    out = run("--files", f"{empty},{txn},{other}")
    line = "version: 0 producerId: 1000 firstOffset: 50 lastOffset: 120 lastStableOffset: 121"
    assert out.stdout.splitlines() == [f"Dumping {empty}", f"{empty} is empty.",
                                       f"Dumping {txn}", line, line, f"Dumping {other}"]
    assert out.stderr == f"Ignoring unknown file {other}\n"


def test_snapshot_vectors(tmp_path: Path) -> None:
    snap = write(tmp_path, "00000000000000000151.snapshot",
                 "00015389a1130000000100000000000003e80002000000090000000000000096000000040000018b"
                 "cfe5687b00000007ffffffffffffffff")
    out = run("--files", str(snap))
    assert out.stdout.splitlines()[1:] == [
        "producerId: 1000 producerEpoch: 2 coordinatorEpoch: 7 currentTxnFirstOffset: "
        "OptionalLong.empty lastTimestamp: 1700000000123 firstSequence: 5 lastSequence: 9 "
        "lastOffset: 150 offsetDelta: 4 timestamp: 1700000000123"]
    broken = write(tmp_path, "00000000000000000152.snapshot", "000148674bc800000000")
    out = run("--files", str(broken))  # CorruptSnapshotException: message only, exit 0
    assert out.stdout.splitlines() == [f"Dumping {broken}"]
    assert "checksum mismatch" in out.stderr


# --- decoders ----------------------------------------------------------------------------------

def test_offsets_decoder_real_consumer_offsets(shared_fixtures: Path) -> None:
    log = shared_fixtures / TUYEN / "__consumer_offsets-13" / "00000000000000000000.log"
    out = run("--offsets-decoder", "--files", str(log))
    lines = out.stdout.splitlines()
    records = [line for line in lines if line.startswith("| ")]
    assert len(records) == 3093
    assert lines[-1] == (
        "| offset: 3092 CreateTime: 1638888583010 keySize: 16 valueSize: 32 sequence: -1 "
        'headerKeys: [] key: {"type":"2","data":{"group":"my-first-app"}} payload: '
        '{"version":"3","data":{"protocolType":"consumer","generation":23,"protocol":null,'
        '"leader":null,"currentStateTimestamp":1638888583009,"members":[]}}')
    assert records[-2] == (
        "| offset: 3091 CreateTime: 1638808783001 keySize: 34 valueSize: 24 sequence: 0 "
        'headerKeys: [] key: {"type":"1","data":{"group":"my-first-app","topic":"my-sec-topic",'
        '"partition":0}} payload: {"version":"3","data":{"offset":0,"leaderEpoch":-1,'
        '"metadata":"","commitTimestamp":1638808783001}}')
    assert out.stderr == ""


def test_transaction_log_and_cluster_metadata_decoders(shared_fixtures: Path) -> None:
    log = shared_fixtures / KRAFT / "__transaction_state-44" / "00000000000000000000.log"
    first = run("--transaction-log-decoder", "--files", str(log)).stdout.splitlines()[3]
    assert first.endswith(
        'key: {"type":"0","data":{"transactionalId":"default_"}} payload: {"version":"0","data":'
        '{"producerId":0,"producerEpoch":0,"transactionTimeoutMs":60000,"transactionStatus":0,'
        '"transactionPartitions":null,"transactionLastUpdateTimestampMs":1728561474712,'
        '"transactionStartTimestampMs":-1}}')
    ckpt = shared_fixtures / KRAFT / "__cluster_metadata-0" / "00000000000000007364-0000000001.checkpoint"
    lines = run("--cluster-metadata-decoder", "--files", str(ckpt)).stdout.splitlines()
    assert lines[1] == "Snapshot end offset: 7364, epoch: 1"
    assert lines[3].endswith('headerKeys: [] SnapshotHeader {"version":0,"lastContainedLogTimestamp":1728565330138}')
    assert lines[5].endswith('payload: {"type":"FEATURE_LEVEL_RECORD","version":0,"data":'
                             '{"name":"metadata.version","featureLevel":19}}')
    assert any('"type":"TOPIC_RECORD"' in line for line in lines)
    bootstrap = shared_fixtures / KRAFT / "bootstrap.checkpoint"
    assert run("--files", str(bootstrap)).stdout.splitlines()[1] == "KRaft bootstrap snapshot"


# --- jsonl, read-only, options ---------------------------------------------------------------

def test_jsonl_is_parseable_with_stable_keys(shared_fixtures: Path, tmp_path: Path) -> None:
    log = write(tmp_path, "00000000000000000000.log", V2_1, V2_4, COMMIT, *V1)
    write(tmp_path, "00000000000000000000.txnindex", ABORTED_TXN)
    d = shared_fixtures / KRAFT / "_confluent-ksql-default__command_topic-0"
    out = run("--format", "jsonl", "--print-data-log", "--files",
              f"{log},{tmp_path}/00000000000000000000.txnindex,{d}/00000000000000000000.index,"
              f"{d}/00000000000000000000.timeindex,{d}/00000000000000000002.snapshot")
    objects = [json.loads(line) for line in out.stdout.splitlines()]
    assert out.stderr == ""
    by_type: dict[str, list[dict]] = {}
    for obj in objects:
        by_type.setdefault(obj["type"], []).append(obj)
    for kind, keys in dump_module.JSONL_KEYS.items():
        required = {k for k in keys if not k.endswith("?")}
        for obj in by_type[kind]:
            assert required <= set(obj) <= required | {k[:-1] for k in keys if k.endswith("?")}
    assert len(by_type["batch"]) == 7 and len(by_type["record"]) == 7
    rec = by_type["record"][1]
    assert rec["header_keys"] == ["hkey"] and rec["value"] == "hdr" and rec["key"] is None
    assert by_type["record"][2]["control"]["type"] == "COMMIT"
    assert by_type["record"][3]["crc"] == 1199974594 and by_type["record"][3]["is_valid"] is True
    assert {o["type"] for o in objects} >= {"non_consecutive_offsets", "aborted_txn",
                                            "offset_index_entry", "time_index_entry",
                                            "producer_state"}


def test_read_only(shared_fixtures: Path, tmp_path: Path) -> None:
    d = fixture_copy(shared_fixtures, f"{KRAFT}/__consumer_offsets-29", tmp_path)

    def state() -> dict[str, tuple[str, int]]:
        return {p.name: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
                for p in d.iterdir()}

    before = state()
    files = ",".join(str(d / n) for n in ("00000000000000000000.log", "00000000000000000000.index",
                                           "00000000000000000000.timeindex"))
    run("--offsets-decoder", "--files", files)
    run("--verify-index-only", "--index-sanity-check", "--format", "jsonl", "--files", files)
    assert state() == before


def test_options_are_checked() -> None:
    with pytest.raises(InvalidOptionError, match="decoder must be one of"):
        DumpOptions(decoder="avro")
    with pytest.raises(InvalidOptionError, match="format must be one of"):
        DumpOptions(format="xml")
    assert DumpOptions(decoder="offsets").deep and DumpOptions(print_data_log=True).deep
    result = CliRunner().invoke(cli, ["dump", "--value-decoder-class", "com.Foo", "x.log"])
    assert isinstance(result.exception, InvalidOptionError)
    assert run(code=2).exit_code == 2  # no files: usage error


def test_undecodable_records_reported_and_dump_goes_on(tmp_path: Path) -> None:
    raw = bytearray(bytes.fromhex(V2_1))
    raw[57:61] = (2).to_bytes(4, "big")  # recordsCount 2, but one record follows
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(bytes(raw) + bytes.fromhex(V2_3))
    out = run("--deep-iteration", "--files", str(log), code=2)
    lines = out.stdout.splitlines()
    assert lines[2].startswith("baseOffset: 0 lastOffset: 0 count: 2 ")
    assert lines[3].startswith("baseOffset: 3 lastOffset: 3 count: 1 ")
    assert lines[4] == ("| offset: 3 CreateTime: 1503229962141 keySize: -1 valueSize: 3 "
                        "sequence: -1 headerKeys: []")
    assert "premature EOF" in out.stderr and "byte position 0" in out.stderr
