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
offsets, are dumped from copies named as segments. Small cases follow, one per rule found
(issue 30, D1-D7), among them the file order of the end-of-run report over 31 segments and every
KRaft metadata record type and version, written by Kafka's own classes.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
import zipfile
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

# (flag set, kind of file, stream) -> why ours differs: a known difference, a strict xfail
# described in docs/kafka-oracle.md (D1-D7 were fixed; none is open)
XFAIL: dict[tuple[str, str, str], str] = {}


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


def test_payload_with_a_surrogate_encoding(kafka_jars, kafka_broker, tmp_path):
    """D3: Java's UTF-8 decoder makes one U+FFFD of ``ED A0..BF`` and its continuation byte."""
    log = _one_record_log(tmp_path, b"k\xed\xbfZ", b"A\xed\xa0\x80B\xed\xa0")
    _same(kafka_jars, kafka_broker, [log], ["--print-data-log"])


def test_null_key_without_record_metadata(kafka_jars, kafka_broker, tmp_path):
    """D5: without metadata and key, the line starts `` payload:``."""
    log = _one_record_log(tmp_path, None, b"value")
    _same(kafka_jars, kafka_broker, [log], ["--print-data-log", "--skip-record-metadata"])


def test_legacy_records(kafka_jars, kafka_broker, dump_files):
    """D4: a v0/v1 record's line ends ``crc: <n>}``."""
    logs = [f for f in dump_files if "message-sets" in f and "kafka-rust" in f][:2]
    assert logs
    _same(kafka_jars, kafka_broker, logs, ["--deep-iteration"])


def test_non_consecutive_offsets_of_many_files(kafka_jars, kafka_broker, tmp_path):
    """D2: 30 segments, 20 of them with three out-of-order pairs (offsets 0 0 3 0), the others
    consecutive; Kafka lists a file's pairs last first, the files in its hash map's order (the
    map grows from 16 buckets to 64 on the way). Their first records are never paired, even at
    offset 100."""
    from golden import COMMIT_MARKER, V2_1, V2_2, V2_3, V2_4
    files = []
    for i in range(30):
        log = tmp_path / f"topic-{i}" / f"{0:020d}.log"
        log.parent.mkdir()
        batches = (V2_1, V2_4, V2_3, V2_1) if i % 3 else (V2_1, V2_2, V2_3)
        log.write_bytes(bytes.fromhex("".join(batches)))
        files.append(str(log))
    marker_only = tmp_path / "txn-0" / f"{100:020d}.log"
    marker_only.parent.mkdir()
    marker_only.write_bytes(bytes.fromhex(COMMIT_MARKER))
    files.append(str(marker_only))
    _same(kafka_jars, kafka_broker, files, ["--deep-iteration"])
    assert our_dump(files, ["--deep-iteration"]).stderr.count("Non-consecutive offsets in") == 20


# --- every KRaft metadata record type, written by Kafka's classes ------------------------------

def _versions(spec: str | None) -> range:
    """A schema's ``"0+"``, ``"1-2"``, ``"0"`` (or none) as a range of versions."""
    if spec is None or spec == "none":
        return range(0)
    if spec.endswith("+"):
        return range(int(spec[:-1]), 1 << 15)
    low, _, high = spec.partition("-")
    return range(int(low), int(high or low) + 1)


def _json_value(field: dict, version: int, structs: dict, full: bool):
    """A value for ``field`` at ``version``: ``full`` sets every value (non-ASCII strings,
    unsigned ints above 2^15, a double Java prints as ``1.048576E7``, two-element arrays);
    otherwise nullable ones are null, arrays empty and the rest zero."""
    kind, name = field["type"], field["name"]
    if version in _versions(field.get("nullableVersions")) and not full:
        return None
    if kind.startswith("[]"):
        inner = {**field, "type": kind[2:], "nullableVersions": None}
        return [_json_value(inner, version, structs, full) for _ in range(2 if full else 0)]
    if kind in structs or "fields" in field:
        return _json_struct(field.get("fields") or structs[kind], version, structs, full)
    digest = hashlib.sha256(name.encode()).digest()
    samples = {"int8": 7, "int16": 300, "uint16": 65000, "int32": 100_000, "int64": 1 << 40,
               "bool": True, "float64": 10485760.0, "string": f"{name}-é✓",
               "bytes": base64.b64encode(b"\x00\xff" + digest[:4]).decode(),
               "uuid": base64.urlsafe_b64encode(digest[:16]).decode().rstrip("=")}
    if full or kind in ("uuid", "string", "bytes"):
        return samples[kind] if full or kind == "uuid" else ""
    return 0.5 if kind == "float64" else False if kind == "bool" else 0


def _json_struct(fields: list, version: int, structs: dict, full: bool) -> dict:
    """The fields of ``version`` (tagged ones only when ``full``: else left at their default)."""
    return {f["name"][0].lower() + f["name"][1:]: _json_value(f, version, structs, full)
            for f in fields if version in _versions(f["versions"])
            and (full or "tag" not in f)}


def _metadata_record_lines(kafka_jars: Path) -> tuple[list[str], set[str]]:
    """``apiKey<TAB>version<TAB>json`` for every record type and version of the metadata
    schemas in Kafka's ``kafka-metadata`` jar, twice (full and empty), and the types' names."""
    lines, names = [], set()
    jar = next(kafka_jars.glob("kafka-metadata-*.jar"))
    with zipfile.ZipFile(jar) as z:
        for entry in sorted(n for n in z.namelist() if n.startswith("common/metadata/")
                            and n.endswith(".json")):
            text = "\n".join(line for line in z.read(entry).decode().splitlines()
                             if not line.strip().startswith("//"))
            schema = json.loads(text)
            names.add(schema["name"])
            structs = {s["name"]: s["fields"] for s in schema.get("commonStructs", ())}
            for version in _versions(schema["validVersions"]):
                for full in (True, False):
                    record = _json_struct(schema["fields"], version, structs, full)
                    lines.append(f"{schema['apiKey']}\t{version}\t{json.dumps(record)}")
    return lines, names


def test_every_metadata_record_type(kafka_jars, kafka_broker, tmp_path):
    """D7: every record type and version of Kafka 4.1's KRaft metadata schemas, written by its
    own classes (``java/MetadataRecordsLog.java``) from values for every field, is decoded by
    ``--cluster-metadata-decoder`` as Kafka decodes it."""
    lines, names = _metadata_record_lines(kafka_jars)
    source = Path(__file__).resolve().parent / "java" / "MetadataRecordsLog.java"
    build = tmp_path / "classes"
    done = subprocess.run(["javac", "-nowarn", "-cp", f"{kafka_jars}/*", "-d", str(build),
                           str(source)], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    log = tmp_path / "__cluster_metadata-0" / f"{0:020d}.log"
    log.parent.mkdir()
    done = subprocess.run(["java", "-Xmx256m", "-cp", f"{build}:{kafka_jars}/*",
                           "MetadataRecordsLog", str(log)], input="\n".join(lines) + "\n",
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0 and done.stdout.strip() == str(len(lines)), done.stderr[-3000:]
    _same(kafka_jars, kafka_broker, [str(log)], ["--cluster-metadata-decoder"])
    ours = our_dump([str(log)], ["--cluster-metadata-decoder"]).stdout
    assert '"raw"' not in ours and "Error at" not in ours
    printed = {json.loads(line.split(" payload: ", 1)[1])["type"]
               for line in ours.splitlines() if " payload: " in line}
    assert len(printed) == len(names) >= 26


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
