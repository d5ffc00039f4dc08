"""kafkalog data source, read side, without a Spark session: options, schema, planning,
splits, isolation levels and corruption, through schema()/partitions()/read()."""

from __future__ import annotations

import json

import hashlib
import pickle
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark.sql.datasource import EqualTo, GreaterThanOrEqual, In, LessThan, Not
from pyspark.sql.pandas.types import to_arrow_schema

import kafkalog_spark as kl
from kafkalog_spark.codec.records.encode import encode_end_txn_marker, encode_record_batches
from kafkalog_spark.codec.files.index_rebuild import build_indexes, build_txn_index
from kafkalog_spark.codec.records.scan import scan_entries
from kafkalog_spark.codec.records.schema import HEADERS_TYPE, record_schema
from kafkalog_spark.codec.files.snapshot import ProducerStateTracker
from kafkalog_spark.datasource import KafkaLogDataSource, spark_schema
from kafkalog_spark.datasource.options import parse_read_options
from kafkalog_spark.datasource.plan import offset_for_timestamp, plan_scan
from kafkalog_spark.datasource.reader import bad_ranges
from kafkalog_spark.datasource.splits import KafkaLogSplit
from kafkalog_spark.errors import CorruptRecordError, InvalidOptionError
from kafkalog_spark.log.discovery import discover
from kafkalog_spark.log.transactions import AbortedTxn, aborted_mask, transaction_view

REAL_LOG_DIRS = ["anchor123__kafka/tmp/kafka-logs", "tuyen-nnt__kafka_2.13-3.0.0/data/kafka",
                 "DonaldY__kafka-2.7.1/kafka-logs", "yuanliubei__kafka-source-code/kafka-logs",
                 "ItumelengMogase__Real-Time-Data-Pipeline-for-Patient-Admissions/kafka-data"]
T0 = 1_700_000_000_000


def records(n: int, partitions: int = 2, topic: str = "orders", seed: int = 3) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table({
        "topic": [topic] * n,
        "partition": pa.array([i % partitions for i in range(n)], pa.int32()),
        "key": pa.array([None if i % 7 == 0 else f"k{i}".encode() for i in range(n)], pa.binary()),
        "value": pa.array([bytes(rng.integers(0, 256, 20 + i % 60, dtype=np.uint8))
                           for i in range(n)], pa.binary()),
        # mostly increasing with occasional steps back, like CreateTime from many clients
        "timestamp": pa.array([(T0 + i * 10 - (300 if i % 23 == 0 else 0)) * 1000
                               for i in range(n)], pa.timestamp("us", tz="UTC")),
        "headers": pa.array([[{"key": "h", "value": b"x"}] if i % 3 == 0 else []
                             for i in range(n)], HEADERS_TYPE),
    })


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("ds") / "logs"
    kl.write_log(records(3000), d, codec="none", segment_bytes=32 * 1024, max_batch_records=20,
                 index_interval_bytes=1024)
    kl.write_log(records(500, topic="payments", seed=4), d, codec="zstd", segment_bytes=8 * 1024)
    return d


def read(options: dict, filters=()) -> tuple[pa.Table, list]:
    """The source as Spark drives it: schema(), reader(), pushFilters, partitions(), read()."""
    source = KafkaLogDataSource(options)
    reader = source.reader(source.schema())
    rest = list(reader.pushFilters(list(filters)))  # the base class's: nothing is taken
    parts = reader.partitions()
    parts = [pickle.loads(pickle.dumps(p)) for p in parts]  # what crosses to the workers
    schema = to_arrow_schema(source.schema(), timezone="UTC")
    batches = [b for p in parts for b in reader.read(p)]
    for b in batches:
        assert b.schema.equals(schema)  # Spark's own check on returned batches
    return pa.Table.from_batches(batches, schema=schema), rest


def as_source(t: pa.Table, schema: pa.Schema) -> pa.Table:
    """read_log's rows as the source hands them to Spark (``schema``: every field declared
    nullable): a record without headers has headers null, as Spark's Kafka source gives."""
    if "headers" in t.schema.names:
        i = t.schema.get_field_index("headers")
        t = t.set_column(i, "headers", pa.array([h or None for h in t["headers"].to_pylist()],
                                                t.schema.field(i).type))
    return t.cast(schema)


def sort(t: pa.Table) -> pa.Table:
    return t.sort_by([("topic", "ascending"), ("partition", "ascending"),
                      ("offset", "ascending")])


# --- options ---------------------------------------------------------------------------------


def test_unknown_option_lists_valid_ones(log_dir):
    with pytest.raises(InvalidOptionError, match="valid options: path, paths, subscribe"):
        parse_read_options({"path": str(log_dir), "kafka.bootstrap.servers": "x:9092"})


@pytest.mark.parametrize("name,value,needle", [
    ("kafka.isolation.level", "serializable", "read_uncommitted, read_committed"),
    ("onCorruption", "ignore", "fail, skip"),
    ("includeHeaders", "yes", "true, false"),
    ("maxBytesPerPartition", "10", ">= 4096"),
    ("assign", '{"orders": "0"}', "assign must be JSON"),
    ("startingOffsets", "latest", "cannot be 'latest'"),
    ("endingOffsets", '{"orders": {"0": -2}}', "-2 = earliest only"),
    ("startingOffsets", "{nope", "must be JSON"),
    ("subscribePattern", "(", "not a valid regular expression"),
    ("startingOffsetsByTimestampStrategy", "closest", "error, latest"),
])
def test_bad_values_name_the_choices(log_dir, name, value, needle):
    with pytest.raises(InvalidOptionError, match=needle.replace("(", r"\(")):
        parse_read_options({"path": str(log_dir), name: value})


def test_unknown_option_suggests_the_closest_name(log_dir):
    for typo, meant in (("startingOffset", "startingOffsets"), ("startingoffests", "startingOffsets"),
                        ("includeHeader", "includeHeaders"), ("kafka.isolationlevel",
                                                              "kafka.isolation.level")):
        with pytest.raises(InvalidOptionError) as err:
            parse_read_options({"path": str(log_dir), typo: "x"})
        assert f"{typo!r} (did you mean {meant!r}?)" in str(err.value)
    with pytest.raises(InvalidOptionError) as err:
        parse_read_options({"path": str(log_dir), "kafka.bootstrap.servers": "x"})
    assert "did you mean" not in str(err.value)


@pytest.mark.parametrize("option,value,needle", [
    # orders has partitions 0 and 1, payments 0: a JSON option names every selected partition
    ("startingOffsets", '{"orders": {"0": 5}}', "startingOffsets leaves out orders-1"),
    ("endingOffsets", '{"orders": {"1": 9}}', "endingOffsets leaves out orders-0"),
    ("startingOffsets", '{"orders": {"0": 5, "1": -2, "7": 1}}',
     "names orders-7, which the read does not select"),
    ("startingOffsetsByTimestamp", '{"orders": {"0": 5}}',
     "startingOffsetsByTimestamp leaves out orders-1"),
    ("endingOffsetsByTimestamp", '{"orders": {"0": 5, "1": 5}, "payments": {"0": 1}}',
     "names payments-0, which the read does not select"),
])
def test_per_partition_json_names_every_selected_partition(log_dir, option, value, needle):
    """As Spark's Kafka source asserts for a batch query: never a silent read from the log
    start of a partition the JSON left out."""
    opts = {"path": str(log_dir), "subscribe": "orders", option: value}
    with pytest.raises(InvalidOptionError, match=needle):
        plan_scan(opts)
    # what the error suggests: name the rest with the sentinel, or narrow with assign
    full, _ = read({"path": str(log_dir), "subscribe": "orders",
                    "startingOffsets": '{"orders": {"0": 5, "1": -2}}'})
    assert full.num_rows == kl.read_log(log_dir, topics=["orders"]).num_rows - 5
    one, _ = read({"path": str(log_dir), "assign": '{"orders": [0]}',
                   "startingOffsets": '{"orders": {"0": 5}}'})
    assert one["offset"].to_pylist()[:2] == [5, 6] and set(one["partition"].to_pylist()) == {0}
    # without subscribe the read selects every topic
    with pytest.raises(InvalidOptionError, match="leaves out orders-1, payments-0"):
        plan_scan({"path": str(log_dir), "startingOffsets": '{"orders": {"0": 5}}'})


def test_options_are_case_insensitive_and_strict_about_conflicts(log_dir):
    opts = parse_read_options({"PATH": str(log_dir), "IncludeHeaders": "TRUE",
                               "KAFKA.ISOLATION.LEVEL": "read_committed"})
    assert opts.include_headers and opts.read_committed
    with pytest.raises(InvalidOptionError, match="only one of subscribe"):
        parse_read_options({"path": str(log_dir), "subscribe": "a", "assign": '{"a": [0]}'})
    with pytest.raises(InvalidOptionError, match="no path"):
        parse_read_options({})
    with pytest.raises(InvalidOptionError, match="matches nothing"):
        parse_read_options({"path": str(log_dir / "nothing*")})


def test_paths_comma_separated_and_glob(log_dir):
    parts = sorted(str(p) for p in log_dir.glob("orders-*"))
    opts = parse_read_options({"path": ",".join(parts)})
    assert opts.paths == tuple(parts)
    assert parse_read_options({"path": str(log_dir / "orders-*")}).paths == tuple(parts)


# --- schema ----------------------------------------------------------------------------------


@pytest.mark.parametrize("headers,metadata", [(False, False), (True, False), (True, True)])
def test_schema_is_record_schema(log_dir, headers, metadata):
    """record_schema's names and types, every field (nested ones and elements too) declared
    nullable, as Spark's Kafka source declares its columns."""
    source = KafkaLogDataSource({"path": str(log_dir), "includeHeaders": str(headers),
                                 "includeMetadata": str(metadata)})
    declared = source.schema()
    assert declared.simpleString() == spark_schema(headers, metadata).simpleString()
    assert '"nullable": false' not in json.dumps(declared.jsonValue())
    assert '"containsNull": false' not in json.dumps(declared.jsonValue())
    arrow = record_schema(headers, metadata)
    assert to_arrow_schema(declared, timezone="UTC").names == arrow.names
    assert not all(f.nullable for f in arrow)  # the data's nullability is record_schema's
    assert source.schema().fieldNames()[:7] == ["key", "value", "topic", "partition", "offset",
                                                "timestamp", "timestampType"]


def test_kafka_source_options_are_ignored_with_a_warning(log_dir, caplog):
    """The options of Spark's Kafka source that mean nothing for files are accepted, named
    once in a warning, and change nothing; kafka.isolation.level is honoured; a typo still
    fails; the docs list every ignored name."""
    from kafkalog_spark.datasource import kafka_source

    plain, _ = read({"path": str(log_dir), "includeHeaders": "true"})
    kafka = {"kafka.bootstrap.servers": "broker:9092", "failOnDataLoss": "false",
             "kafka.security.protocol": "SSL", "maxOffsetsPerTrigger": "10"}
    kafka_source._logged.clear()
    with caplog.at_level("WARNING", logger="kafkalog_spark.datasource"):
        got, _ = read({"path": str(log_dir), "includeHeaders": "true", **kafka})
    assert got.equals(plain)
    [warning] = [r.getMessage() for r in caplog.records if "ignores" in r.getMessage()]
    assert all(name in warning for name in kafka)
    with pytest.raises(InvalidOptionError, match="subscrbe"):
        KafkaLogDataSource({"path": str(log_dir), "subscrbe": "orders"}).schema()
    with pytest.raises(InvalidOptionError, match="kafka.isolation.level"):
        KafkaLogDataSource({"path": str(log_dir), "kafka.isolation.level": "nope"}).schema()
    doc = (Path(__file__).resolve().parents[1] / "docs" / "datasource.md").read_text()
    assert all(f"`{name}`" in doc for name in kafka_source.IGNORED)


# --- reading ---------------------------------------------------------------------------------


def test_read_equals_read_log(log_dir):
    got, _ = read({"path": str(log_dir), "includeHeaders": "true", "includeMetadata": "true"})
    assert got.equals(as_source(kl.read_log(log_dir, include_headers=True,
                                            include_metadata=True), got.schema))
    assert got.num_rows == 3500


@pytest.mark.parametrize("name", REAL_LOG_DIRS)
def test_real_fixture_dirs_equal_read_log(shared_fixtures, name):
    path = shared_fixtures / name
    got, _ = read({"path": str(path), "includeHeaders": "true", "includeMetadata": "true",
                   "maxBytesPerPartition": "4096"})
    assert got.equals(as_source(kl.read_log(path, include_headers=True, include_metadata=True),
                                got.schema))


def test_partition_dir_and_single_log_file(log_dir):
    pdir = log_dir / "orders-1"
    got, _ = read({"path": str(pdir)})
    assert got.equals(as_source(kl.read_log(pdir), got.schema))
    seg = sorted(pdir.glob("*.log"))[1]
    got, _ = read({"path": str(seg)})
    assert got.equals(as_source(kl.read_log(seg), got.schema)) and got.num_rows > 0


def test_subscribe_pattern_assign(log_dir):
    assert set(read({"path": str(log_dir), "subscribe": "payments"})[0]
               .column("topic").to_pylist()) == {"payments"}
    t, _ = read({"path": str(log_dir), "subscribePattern": "pay.*"})
    assert set(t.column("topic").to_pylist()) == {"payments"}
    with pytest.raises(InvalidOptionError, match="no topic matches 'pay'"):  # a full match
        read({"path": str(log_dir), "subscribePattern": "pay"})
    t, _ = read({"path": str(log_dir), "assign": '{"orders": [1]}'})
    assert set(zip(t.column("topic").to_pylist(), t.column("partition").to_pylist())) == {
        ("orders", 1)}


def test_split_segments_give_identical_rows(log_dir):
    whole = kl.read_log(log_dir)
    plan_big = plan_scan({"path": str(log_dir)})
    plan_small = plan_scan({"path": str(log_dir), "maxBytesPerPartition": "4096"})
    assert len(plan_small.splits) > 2 * len(plan_big.splits)
    assert plan_small.segments == plan_big.segments
    got, _ = read({"path": str(log_dir), "maxBytesPerPartition": "4096", "maxRowsPerBatch": "7"})
    assert got.equals(as_source(whole, got.schema))
    for s in plan_small.splits:  # every cut is a batch boundary
        if s.start_position:
            assert len(scan_entries(s.segment.log.read_bytes(), start=s.start_position,
                                    max_entries=1)) == 1


def test_bad_index_entry_is_not_a_cut(tmp_path, log_dir):
    pdir = tmp_path / "orders-0"
    pdir.mkdir()
    for f in (log_dir / "orders-0").glob("00000000000000000000.*"):
        (pdir / f.name).write_bytes(f.read_bytes())
    index = bytearray((pdir / "00000000000000000000.index").read_bytes())
    for i in range(0, len(index), 8):  # every position off by 3 bytes
        pos = int.from_bytes(index[i + 4:i + 8], "big") + 3
        index[i + 4:i + 8] = pos.to_bytes(4, "big")
    (pdir / "00000000000000000000.index").write_bytes(bytes(index))
    plan = plan_scan({"path": str(pdir), "maxBytesPerPartition": "4096"})
    assert len(plan.splits) == 1
    got, _ = read({"path": str(pdir), "maxBytesPerPartition": "4096"})
    assert got.equals(as_source(kl.read_log(pdir), got.schema))


def test_reading_never_modifies_input(log_dir):
    def state():
        return {p: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
                for p in sorted(log_dir.rglob("*")) if p.is_file()}
    before = state()
    read({"path": str(log_dir), "maxBytesPerPartition": "4096",
          "kafka.isolation.level": "read_committed", "startingTimestamp": str(T0 + 500)})
    assert state() == before


# --- offsets and timestamps ------------------------------------------------------------------


def test_starting_and_ending_offsets(log_dir):
    got, _ = read({"path": str(log_dir), "subscribe": "orders",
                   "startingOffsets": '{"orders": {"0": 333, "1": -2}}',
                   "endingOffsets": '{"orders": {"0": 1001, "1": -1}}'})
    p0 = got.filter(pc.equal(got["partition"], 0))["offset"].to_pylist()
    p1 = got.filter(pc.equal(got["partition"], 1))["offset"].to_pylist()
    assert p0 == list(range(333, 1001)) and p1 == list(range(1500))


def test_timestamp_bounds_resolve_like_list_offsets(log_dir):
    full = kl.read_log(log_dir / "orders-0")
    ts = np.array(full["timestamp"].cast(pa.int64()).to_pylist()) // 1000
    offs = np.array(full["offset"].to_pylist())
    for target in (T0 - 5, T0 + 4444, T0 + 13_001, T0 + 29_995):
        reach = np.flatnonzero(ts >= target)
        want = int(offs[reach[0]]) if len(reach) else None
        assert offset_for_timestamp(discover(log_dir / "orders-0").partitions[0], target) == want
    got, _ = read({"path": str(log_dir / "orders-0"), "startingTimestamp": str(T0 + 4444),
                   "endingTimestamp": str(T0 + 13_001)})
    first = int(offs[np.flatnonzero(ts >= T0 + 4444)[0]])
    end = int(offs[np.flatnonzero(ts >= T0 + 13_001)[0]])
    assert got["offset"].to_pylist() == list(range(first, end))
    with pytest.raises(InvalidOptionError, match="startingOffsetsByTimestampStrategy"):
        read({"path": str(log_dir / "orders-0"), "startingTimestamp": str(T0 + 10**9)})
    got, _ = read({"path": str(log_dir), "startingOffsetsByTimestamp": '{"orders": {"0": '
                   f'{T0 + 10**9}, "1": {T0}}}}}', "startingOffsetsByTimestampStrategy": "latest",
                   "subscribe": "orders"})
    assert set(got["partition"].to_pylist()) == {1}


# --- filters stay with Spark ------------------------------------------------------------------


def test_reader_takes_no_filters_and_plans_from_options_alone(log_dir):
    """Every filter stays with Spark (see KafkaLogReader): the reader keeps no state a query
    could change, so any later query of the same DataFrame reads what the options define."""
    from pyspark.sql.datasource import DataSourceReader
    from kafkalog_spark.datasource.reader import KafkaLogReader

    assert KafkaLogReader.pushFilters is DataSourceReader.pushFilters
    fs = [EqualTo(("topic",), "orders"), GreaterThanOrEqual(("offset",), 10),
          LessThan(("offset",), 20), In(("offset",), (11, 12)), EqualTo(("key",), b"k"),
          Not(EqualTo(("partition",), 1)), In(("partition",), (0, 1))]
    source = KafkaLogDataSource({"path": str(log_dir)})
    reader = source.reader(source.schema())
    before = pickle.dumps(reader)
    rest = list(reader.pushFilters(fs))
    assert [id(f) for f in rest] == [id(f) for f in fs]
    assert pickle.dumps(reader) == before
    got, _ = read({"path": str(log_dir)}, fs)
    assert sort(got).equals(sort(as_source(kl.read_log(log_dir), got.schema)))


def test_options_prune_partitions_and_segments(log_dir):
    """What pushdown did before: assign and offsets prune partitions and segments."""
    all_segments = plan_scan({"path": str(log_dir)}).segments
    opts = {"path": str(log_dir), "assign": '{"orders": [1]}',
            "startingOffsets": '{"orders": {"1": 700}}', "endingOffsets": '{"orders": {"1": 761}}'}
    got, _ = read(opts)
    assert got["offset"].to_pylist() == list(range(700, 761))
    assert set(got["partition"].to_pylist()) == {1}
    plan = plan_scan(opts)
    assert len(plan.segments) == 1 < len(all_segments)
    assert "orders-1" in plan.segments[0]
    # inside the segment the read starts and stops through the offset index
    small = plan_scan({**opts, "maxBytesPerPartition": "4096"})
    assert len(small.splits) <= 2


# --- transactions ----------------------------------------------------------------------------


def _data(offset: int, n: int, pid: int = -1, txn: bool = False) -> bytes:
    t = pa.table({"key": pa.array([f"k{offset + i}".encode() for i in range(n)]),
                  "value": pa.array([f"v{offset + i}".encode() for i in range(n)]),
                  "timestamp": pa.array([T0 + offset + i for i in range(n)], pa.int64())})
    kw = dict(producer_id=pid, producer_epoch=0, base_sequence=0) if pid >= 0 else {}
    return encode_record_batches(t, base_offset=offset, is_transactional=txn, **kw).tobytes()


def _marker(offset: int, pid: int, commit: bool) -> bytes:
    return encode_end_txn_marker(offset=offset, producer_id=pid, producer_epoch=0,
                                 coordinator_epoch=1, commit=commit, timestamp=T0 + offset)


def write_txn_partition(pdir: Path, with_indexes: bool) -> None:
    """Two segments: A(1) aborts 0-4, B(2) commits 10-14 + 16-18, A commits 20-24, C(3) leaves
    26-28 open; non-transactional 5-9 and 29-31. Optionally with the broker's .index,
    .timeindex, .txnindex and the producer snapshot at the roll (offset 16)."""
    pdir.mkdir(parents=True)
    seg0 = (_data(0, 5, 1, True) + _data(5, 5) + _data(10, 5, 2, True) + _marker(15, 1, False))
    seg1 = (_data(16, 3, 2, True) + _marker(19, 2, True) + _data(20, 5, 1, True)
            + _marker(25, 1, True) + _data(26, 3, 3, True) + _data(29, 3))
    for base, data in ((0, seg0), (16, seg1)):
        (pdir / f"{base:020d}.log").write_bytes(data)
        if with_indexes:
            idx = build_indexes(data, base, index_interval_bytes=100)
            (pdir / f"{base:020d}.index").write_bytes(idx.offset_index.to_bytes())
            (pdir / f"{base:020d}.timeindex").write_bytes(idx.time_index.to_bytes())
    if with_indexes:
        tracker = ProducerStateTracker()
        tracker.apply(seg0)
        (pdir / f"{16:020d}.snapshot").write_bytes(tracker.snapshot().to_bytes())
        (pdir / f"{0:020d}.txnindex").write_bytes(build_txn_index(seg0, 0).to_bytes())


@pytest.mark.parametrize("with_indexes", [False, True])
def test_isolation_levels(tmp_path, with_indexes):
    pdir = tmp_path / "txn-0"
    write_txn_partition(pdir, with_indexes)
    view = transaction_view(discover(pdir).partitions[0])
    assert view.aborted == (AbortedTxn(1, 0, 15),)
    assert view.last_stable_offset == 26
    assert (view.replayed_from, view.txnindex_segments) == ((16, 1) if with_indexes else (0, 0))
    uncommitted, _ = read({"path": str(pdir), "maxBytesPerPartition": "4096"})
    assert uncommitted["offset"].to_pylist() == [*range(15), 16, 17, 18, *range(20, 25),
                                                 *range(26, 32)]
    committed, _ = read({"path": str(pdir), "kafka.isolation.level": "read_committed",
                         "maxBytesPerPartition": "4096"})
    assert committed["offset"].to_pylist() == [*range(5, 15), 16, 17, 18, *range(20, 25)]
    assert committed.schema.names == record_schema().names  # the filter's columns dropped
    with_meta, _ = read({"path": str(pdir), "kafka.isolation.level": "read_committed",
                         "includeMetadata": "true", "startingOffsets": '{"txn": {"0": 12}}'})
    assert with_meta["offset"].to_pylist() == [12, 13, 14, 16, 17, 18, *range(20, 25)]


def test_aborted_mask():
    pid = np.array([1, 1, 2, 1, 1, 2], np.int64)
    off = np.array([0, 4, 5, 6, 12, 13], np.int64)
    txn = np.array([True, True, True, False, True, True])
    aborted = [AbortedTxn(1, 10, 15), AbortedTxn(1, 0, 5), AbortedTxn(2, 0, 5)]
    assert aborted_mask(pid, off, txn, aborted).tolist() == [True, True, False, False, True, False]
    assert not aborted_mask(pid, off, txn, []).any()


# --- corruption ------------------------------------------------------------------------------


def test_on_corruption_fail_and_skip(tmp_path, log_dir):
    pdir = tmp_path / "orders-0"
    pdir.mkdir()
    for f in (log_dir / "orders-0").iterdir():
        (pdir / f.name).write_bytes(f.read_bytes())
    seg = sorted(pdir.glob("*.log"))[1]
    data = bytearray(seg.read_bytes())
    entries = scan_entries(bytes(data))
    bad_pos = int(entries.position[4])
    data[bad_pos + 70] ^= 0xFF
    seg.write_bytes(bytes(data))
    with pytest.raises(CorruptRecordError, match="CRC"):
        read({"path": str(pdir)})
    got, _ = read({"path": str(pdir), "onCorruption": "skip", "maxBytesPerPartition": "4096"})
    lost = set(range(int(entries.offset[4]), int(entries.offset[4] + entries.last_offset_delta[4])
                     + 1))
    want = [o for o in kl.read_log(log_dir / "orders-0")["offset"].to_pylist() if o not in lost]
    assert got["offset"].to_pylist() == want
    report = bad_ranges({"path": str(pdir)})
    assert [(r.file, r.start, r.end, r.base_offset) for r in report] == [
        (str(seg.resolve()), bad_pos, bad_pos + int(entries.entry_size[4]),
         int(entries.offset[4]))]


def test_split_is_picklable_dataclass(log_dir):
    split = plan_scan({"path": str(log_dir)}).splits[0]
    assert isinstance(split, KafkaLogSplit)
    assert pickle.loads(pickle.dumps(split)) == split


def test_docs_option_tables_are_current() -> None:
    from kafkalog_spark.datasource.options import options_doc
    from kafkalog_spark.datasource.write_options import write_options_doc

    doc = (Path(__file__).resolve().parents[1] / "docs" / "datasource.md").read_text()
    assert options_doc() in doc and write_options_doc() in doc
