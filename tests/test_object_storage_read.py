"""Kafka log dirs read in place from object storage (issue 16), end to end on a real S3 server
(SeaweedFS, tests/s3.py): ``read_log``, ``discover``/``verify``, the CLI and the Spark data
source on ``s3://`` URIs give exactly what they give on the same files on a local disk; offset
windows fetch only the byte range the offset index narrows them to; in-place maintenance is
refused; store failures are one-line errors naming the URI, never a secret, never a hang.

One server and one bucket for the module (SeaweedFS gives every bucket its own volumes, and a
small disk has few to give); every test uploads what it needs under its own prefix.
"""

from __future__ import annotations

import json
import os
import pickle
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pytest
from pyarrow.fs import FileSelector

import kafkalog_spark as kl
from kafkalog_spark.codec.records.decode import DecodeOptions
from kafkalog_spark.codec.records.scan import scan_entries
from kafkalog_spark.datasource import KafkaLogDataSource
from kafkalog_spark.datasource.plan import plan_scan
from kafkalog_spark.errors import KafkaLogError, LogDirError, RemoteStorageError
from kafkalog_spark.log.discovery import discover
from kafkalog_spark.storage.paths import ObjectPath
from kafkalog_spark.log.reader import LogReadResult, plan_read
from kafkalog_spark.storage import as_path, storage_for
from kafkalog_spark.inspect.verify import verify

from s3 import ACCESS_KEY, SECRET_KEY, SeaweedS3
from test_read_write import records
from test_verify import REAL_LOG_DIRS

# slow: object-store plumbing, run once (not again in the plain-Python pass, which re-runs the
# kernels these tests reach through other tests)
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
KAFKALOG = [sys.executable, "-m", "kafkalog_spark.cli"]
BUCKET = "kafka-logs"
SORT = [("topic", "ascending"), ("partition", "ascending"), ("offset", "ascending")]


# --- the server and uploads ------------------------------------------------------------------


@pytest.fixture(scope="module")
def s3(tmp_path_factory) -> Iterator[SeaweedS3]:
    """One SeaweedFS for the module (a start that lost a port race is retried), stopped by its
    pid at the end; the teardown checks that pid is gone."""
    failures = []
    for _ in range(3):
        server = SeaweedS3(tmp_path_factory.mktemp("seaweed"))
        try:
            server.start()
        except RuntimeError as exc:  # e.g. a gRPC twin port taken between pick and bind
            server.stop()
            failures.append(str(exc)[-500:])
            continue
        pid = server.proc.pid
        try:
            server.make_bucket(BUCKET)
            yield server
        finally:
            server.stop()
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)
        return
    pytest.fail("SeaweedFS did not start:\n" + "\n".join(failures))


def store_options(s3: SeaweedS3, **override: str) -> dict[str, str]:
    """The CLI's/``read_log``'s storage options for the test server (short alias names)."""
    return {"endpoint": s3.endpoint, "access_key_id": ACCESS_KEY,
            "secret_access_key": SECRET_KEY, "allow_http": "true", **override}


@pytest.fixture(scope="module")
def opts(s3) -> dict[str, str]:
    return store_options(s3)


def upload(s3: SeaweedS3, src: Path, dest: str) -> str:
    """Put every file below ``src`` under ``dest`` (``bucket/prefix``); the ``s3://`` URI."""
    fs = s3.filesystem()
    files = [p for p in sorted(src.rglob("*")) if p.is_file()]

    def put(p: Path) -> None:
        for attempt in range(3):  # SeaweedFS may refuse a write while it grows its volumes
            try:
                with fs.open_output_stream(f"{dest}/{p.relative_to(src).as_posix()}") as f:
                    f.write(p.read_bytes())
                return
            except OSError:
                if attempt == 2:
                    raise
                time.sleep(1)

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(put, files))
    return f"s3://{dest}"


@pytest.fixture(scope="module")
def real_uri(s3, shared_fixtures) -> Callable[[str], str]:
    """``real_uri(name)``: the real fixture log dir ``name`` uploaded (once, read-only) under
    its own prefix."""
    done: dict[str, str] = {}

    def get(name: str) -> str:
        if name not in done:
            done[name] = upload(s3, shared_fixtures / name,
                                f"{BUCKET}/real/dir{REAL_LOG_DIRS.index(name)}")
        return done[name]

    return get


@pytest.fixture(scope="module")
def big_log(s3, tmp_path_factory) -> tuple[Path, str]:
    """A 16 MB partition written by the project's writer: 6 MB segments (three) with offset
    indexes every 4 KiB (one entry per ~4.5 KB batch of 50 records); local dir and its URI."""
    local = tmp_path_factory.mktemp("big") / "logs"
    kl.write_log(records(180_000), local, codec="none", segment_bytes=6 << 20,
                 max_batch_records=50)
    return local, upload(s3, local, f"{BUCKET}/big")


def small_log(tmp_path: Path, n: int = 3000) -> Path:
    local = tmp_path / "logs"
    kl.write_log(records(n), local, codec="none", segment_bytes=64 * 1024,
                 max_batch_records=40)
    return local


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([*KAFKALOG, *args], capture_output=True, text=True, timeout=timeout,
                          cwd=REPO)


def storage_args(options: dict[str, str]) -> list[str]:
    return [a for k, v in options.items() for a in ("--storage-option", f"{k}={v}")]


def one_line_error(result: subprocess.CompletedProcess) -> str:
    """The single ``Error: ...`` line a failed command prints (exit 2, no traceback)."""
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    return lines[0]


# --- 1. real broker log dirs read in place -----------------------------------------------------


@pytest.mark.fixtures
@pytest.mark.parametrize("name", REAL_LOG_DIRS)
def test_real_log_dir_read_equals_local(shared_fixtures, real_uri, opts, name):
    local = kl.read_log(shared_fixtures / name, include_headers=True, include_metadata=True)
    remote = kl.read_log(real_uri(name), include_headers=True, include_metadata=True,
                         storage_options=opts)
    assert local.num_rows > 0
    assert remote.schema.equals(local.schema, check_metadata=True)
    assert remote.equals(local)


# --- 2. verify, verify --local, info --json --------------------------------------------------


def normalized(obj, root: str):
    """``obj`` (a report as JSON data) with the path prefix ``root`` written ``<root>``."""
    if isinstance(obj, str):
        return obj.replace(root, "<root>")
    if isinstance(obj, dict):
        return {k: normalized(v, root) for k, v in obj.items()}
    if isinstance(obj, list):
        return [normalized(v, root) for v in obj]
    return obj


def strings(obj) -> Iterator[str]:
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from strings(v)


@pytest.mark.fixtures
@pytest.mark.parametrize("name", REAL_LOG_DIRS)
def test_verify_on_s3_equals_local_and_cli_names_uris(shared_fixtures, real_uri, opts, name):
    local_root, uri = shared_fixtures / name, real_uri(name)
    local = verify(local_root, deep=True)
    remote = verify(as_path(uri, opts), deep=True)
    assert local.partitions > 0 and local.ok
    assert normalized(remote.to_dict(), uri) == normalized(local.to_dict(), str(local_root))
    assert all(p.file.startswith(uri + "/") for p in remote.problems if p.file)

    result = cli("verify", "--local", "--deep", "--json", uri, *storage_args(opts))
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert normalized(report, uri) == normalized(local.to_dict(), str(local_root))
    assert all(p["file"].startswith(uri + "/") for p in report["problems"] if p["file"])

    result = cli("info", "--json", uri, *storage_args(opts))
    assert result.returncode == 0, result.stderr
    named = [s for s in strings(json.loads(result.stdout)) if "://" in s or s.startswith("/")]
    assert named and all(s == uri or s.startswith(uri + "/") for s in named), \
        [s for s in named if not s.startswith(uri)][:5]


# --- 3. offset windows fetch only the narrowed byte range -------------------------------------


def window(local: Path) -> tuple[Path, int, int]:
    """~1% of the offsets of the biggest rolled segment, starting 40% into it."""
    logs = sorted((local / "orders-0").glob("*.log"))
    assert len(logs) >= 3
    seg = max(logs[:-1], key=lambda p: p.stat().st_size)
    base, next_base = int(seg.stem), int(logs[logs.index(seg) + 1].stem)
    start = base + (next_base - base) * 2 // 5
    return seg, start, start + (next_base - base) // 100


def test_offset_window_fetches_only_the_indexed_range(big_log, opts):
    # first of the module's reads of this segment: its .index GET is counted too (the reader
    # keeps parsed object-store indexes per process)
    local, uri = big_log
    seg, start, end = window(local)
    entries = scan_entries(seg.read_bytes())
    holding = (entries.last_offset >= start) & (entries.offset <= end - 1)
    batches = int(entries.entry_size[holding].sum())
    index = seg.with_suffix(".index").stat().st_size
    needed = batches + index
    storage = storage_for(as_path(uri, opts))
    storage.requests.reset()
    got = kl.read_log(uri, start_offset=start, end_offset=end, storage_options=opts)
    counts = storage.requests.reset()
    assert got.num_rows == end - start
    ratio = counts["bytes"] / needed
    assert ratio <= 1.2, (f"GETs fetched {counts['bytes']} bytes for offsets [{start}, {end}) "
                          f"of {seg.name} ({seg.stat().st_size} bytes): {ratio:.2f}x the "
                          f"{needed} needed ({batches} in the batches holding them + {index} "
                          f"of .index); requests {counts}")


def test_timestamp_lookups_fetch_indexes_and_a_few_ranges(big_log, opts):
    """startingTimestamp / endingTimestamp / a timestamp filter resolve through each segment's
    .timeindex and .index and the few ranges they point to — not whole segments; the offsets
    found are the local ones."""
    local, uri = big_log
    logs = sorted((local / "orders-0").glob("*.log"))
    assert len(logs) == 3
    ts = kl.read_log(local).column("timestamp").cast(pa.int64()).to_numpy() // 1000
    storage = storage_for(as_path(uri, opts))
    for at in (0.15, 0.5, 0.9):  # into the first, second and third segment
        lo, hi = int(ts[int(len(ts) * at)]), int(ts[int(len(ts) * at) + 300])
        for extra in ({"startingTimestamp": str(lo), "endingTimestamp": str(hi)},
                      {"startingOffsetsByTimestamp": json.dumps({"orders": {"0": lo}})}):
            expected = [(s.min_offset, s.max_offset)
                        for s in plan_scan({"path": str(local), **extra}).splits]
            storage.requests.reset()
            plan = plan_scan({"path": uri, **extra, **spark_storage(opts)})
            counts = storage.requests.reset()
            assert [(s.min_offset, s.max_offset) for s in plan.splits] == expected
            # indexes (~30 KB here) and a few 64-256 KiB walks; a segment is 6 MB
            assert counts["bytes"] < 1.5e6, (at, extra, counts)


def test_a_partition_dir_named_directly_is_known_from_one_listing(big_log, opts):
    """Telling a partition dir from a log dir lists it once: no HEAD request per file (a
    migrate of 64 partition dirs of ~200 files each sent ~13,000), the same partition as the
    log dir's discovery finds."""
    _, uri = big_log
    storage = storage_for(as_path(uri, opts))
    storage.requests.reset()
    found = discover([as_path(f"{uri}/orders-0", opts)])
    counts = storage.requests.reset()
    whole = discover([as_path(uri, opts)])
    assert [p.path for p in found.partitions] == [p.path for p in whole.log_dirs[0].partitions
                                                   if p.topic == "orders" and p.partition == 0]
    files = len(storage.listdir(as_path(f"{uri}/orders-0", opts)))
    assert files >= 9 and counts.get("head", 0) <= 2, (files, counts)


def test_a_log_end_fetches_the_last_segment_s_tail_not_the_segment(big_log, opts):
    """migrate's planner finds each partition's log end from its last segment's offset index
    and the bytes after its last entry (Kafka's readNextOffset): on an object store a GET of the
    index and of that tail, not of the whole segment."""
    from kafkalog_spark.log.segment_info import next_offset

    local, uri = big_log
    (part,) = [p for p in discover([as_path(uri, opts)]).log_dirs[0].partitions
               if p.topic == "orders" and p.partition == 0]
    seg = part.segments[-1]
    storage = storage_for(as_path(uri, opts))
    storage.requests.reset()
    end = next_offset(seg)
    counts = storage.requests.reset()
    local_last = sorted((local / "orders-0").glob("*.log"))[-1]
    assert end == int(scan_entries(local_last.read_bytes()).last_offset[-1]) + 1
    assert counts["bytes"] < seg.log_size / 4, (counts, seg.log_size)


def test_offset_window_read_equals_local(big_log, opts):
    local, uri = big_log
    _, start, end = window(local)
    got = kl.read_log(uri, start_offset=start, end_offset=end, include_headers=True,
                      include_metadata=True, storage_options=opts)
    expected = kl.read_log(local, start_offset=start, end_offset=end, include_headers=True,
                           include_metadata=True)
    assert got.num_rows == end - start > 500
    assert got.equals(expected)


def test_full_read_equals_local(big_log, opts):
    local, uri = big_log
    storage = storage_for(as_path(uri, opts))
    storage.requests.reset()
    got = kl.read_log(uri, include_headers=True, include_metadata=True, storage_options=opts)
    counts = storage.requests.reset()
    assert got.num_rows == 180_000
    assert got.equals(kl.read_log(local, include_headers=True, include_metadata=True))
    on_disk = sum(p.stat().st_size for p in local.rglob("*") if p.is_file())
    assert counts["bytes"] <= 1.2 * on_disk, (counts, on_disk)  # each object fetched once


# --- 4. the Spark data source on s3:// --------------------------------------------------------


def spark_read(spark, path: str | Path, **options: str) -> pa.Table:
    reader = spark.read.format("kafkalog")
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load(str(path)).toArrow().sort_by(SORT)


def spark_storage(opts: dict[str, str]) -> dict[str, str]:
    return {f"storage.{k}": v for k, v in opts.items()}


@pytest.mark.spark
@pytest.mark.parametrize("which", ["generated", "real"])
def test_spark_read_on_s3_equals_local_spark_read(spark, big_log, real_uri, shared_fixtures,
                                                  opts, which):
    if which == "generated":
        local, uri = big_log
    else:
        name = REAL_LOG_DIRS[-1]  # KRaft, transactions, meta.properties with directory.id
        local, uri = shared_fixtures / name, real_uri(name)
    expected = spark_read(spark, local, includeHeaders="true", includeMetadata="true")
    got = spark_read(spark, uri, includeHeaders="true", includeMetadata="true",
                     **spark_storage(opts))
    assert expected.num_rows > 0
    assert got.schema.equals(expected.schema)
    assert got.equals(expected)


@pytest.mark.spark
def test_spark_read_on_s3_with_segments_cut_into_splits(spark, big_log, opts):
    local, uri = big_log
    seg, _, _ = window(local)
    cut = {"maxBytesPerPartition": str(1 << 20)}
    plan = plan_scan({"path": uri, **cut, **spark_storage(opts)})
    pieces = [s for s in plan.splits if s.segment.log.name == seg.name]
    assert len(pieces) >= 4, [(s.start_position, s.end_position) for s in pieces]
    assert all(isinstance(s.segment.log, ObjectPath) for s in plan.splits)
    expected = spark_read(spark, local, includeHeaders="true")
    got = spark_read(spark, uri, includeHeaders="true", **cut, **spark_storage(opts))
    assert got.num_rows == 180_000
    assert got.equals(expected)


# --- 5. refusals and errors -------------------------------------------------------------------


@pytest.fixture(scope="module")
def refusal_uri(s3, tmp_path_factory) -> str:
    return upload(s3, small_log(tmp_path_factory.mktemp("refusals")), f"{BUCKET}/refusals")


def listing(s3: SeaweedS3, prefix: str) -> list[tuple[str, int]]:
    infos = s3.filesystem().get_file_info(FileSelector(prefix, recursive=True))
    return sorted((i.path, i.size) for i in infos)


@pytest.mark.parametrize("args", [
    ["compact"], ["compact", "--execute"], ["retain"], ["retain", "--execute"],
    ["recover"], ["recover", "--execute"], ["rebuild-index"], ["rebuild-index", "--execute"],
    ["rebuild-index", "--execute", "@segment"]], ids=lambda a: "-".join(a).replace("@", ""))
def test_maintenance_on_s3_is_refused(s3, refusal_uri, args):
    before = listing(s3, f"{BUCKET}/refusals")
    target = refusal_uri
    if args[-1] == "@segment":
        args = args[:-1]
        target = f"{refusal_uri}/orders-0/00000000000000000000.log"
    line = one_line_error(cli(*args, target))
    assert "object storage cannot" in line and target in line
    assert listing(s3, f"{BUCKET}/refusals") == before


def test_maintenance_api_on_s3_raises_remote_storage_error(refusal_uri, opts):
    from kafkalog_spark.storage.lock import ensure_local

    with pytest.raises(RemoteStorageError, match="object storage cannot") as info:
        ensure_local(as_path(refusal_uri, opts))
    assert info.value.file == refusal_uri


@pytest.mark.parametrize("command", [["info"], ["verify", "--local"], ["dump"]])
def test_wrong_secret_is_access_denied_without_the_secret(s3, refusal_uri, command):
    secret = "wrong-secret-Zq81Xv"
    target = refusal_uri + ("/orders-0/00000000000000000000.log" if command == ["dump"] else "")
    result = cli(*command, target, *storage_args(store_options(s3, secret_access_key=secret)))
    line = one_line_error(result)
    assert "access denied" in line and target in line
    assert secret not in result.stdout + result.stderr


def test_wrong_secret_api_error_hides_the_secret(s3, refusal_uri):
    secret = "wrong-secret-Zq81Xv"
    with pytest.raises((OSError, KafkaLogError)) as info:
        kl.read_log(refusal_uri, storage_options=store_options(s3, secret_access_key=secret))
    assert "access denied" in str(info.value) and refusal_uri in str(info.value)
    assert secret not in str(info.value) and secret not in repr(info.value)


def test_missing_bucket_and_prefix(s3, refusal_uri, opts):
    missing_bucket, missing_prefix = "s3://no-such-bucket-k7/logs", refusal_uri + "-missing"
    for command in (["info"], ["verify", "--local"]):
        line = one_line_error(cli(*command, missing_bucket, *storage_args(opts)))
        assert "no such bucket" in line and missing_bucket in line
        line = one_line_error(cli(*command, missing_prefix, *storage_args(opts)))
        assert missing_prefix in line
    with pytest.raises(KafkaLogError, match="no such bucket") as info:
        kl.read_log(missing_bucket, storage_options=opts)
    assert missing_bucket in str(info.value)
    with pytest.raises(KafkaLogError) as info:
        kl.read_log(missing_prefix, storage_options=opts)
    assert missing_prefix in str(info.value)


def test_log_object_deleted_after_discovery(s3, tmp_path, opts):
    uri = upload(s3, small_log(tmp_path), f"{BUCKET}/stale")
    path = as_path(uri, opts)
    segs = [s for p in discover(path).all_partition_dirs() for s in p.segments if s.log_size]
    assert len(segs) >= 3
    victim = segs[1].log
    plans = plan_read(path)
    source = KafkaLogDataSource({"path": uri, **spark_storage(opts)})
    reader = source.reader(source.schema())
    parts = [pickle.loads(pickle.dumps(p)) for p in reader.partitions()]

    s3.filesystem().delete_file(victim.arrow_path)

    with pytest.raises(KafkaLogError) as info:
        list(LogReadResult(plans, DecodeOptions()))
    assert isinstance(info.value, LogDirError) and info.value.file == str(victim), info.value
    with pytest.raises(KafkaLogError) as info:
        for p in parts:
            list(reader.read(p))
    assert str(victim) in str(info.value)


@pytest.mark.timeout(150)
def test_refusing_endpoint_fails_fast_naming_the_uri(s3):
    with socket.socket() as closed:  # bound, never listening: connections are refused
        closed.bind(("127.0.0.1", 0))
        endpoint = f"http://127.0.0.1:{closed.getsockname()[1]}"
        options = store_options(s3, endpoint=endpoint, connect_timeout="2", timeout="2")
        uri = f"s3://{BUCKET}/refused"
        outcome: list[BaseException | None] = []

        def run() -> None:
            try:
                kl.read_log(uri, storage_options=options)
                outcome.append(None)
            except BaseException as exc:  # noqa: BLE001 - reported below
                outcome.append(exc)

        t0 = time.monotonic()
        worker = threading.Thread(target=run, daemon=True)
        worker.start()
        worker.join(90)
        elapsed = time.monotonic() - t0
        assert not worker.is_alive(), "read_log still waiting on a refusing endpoint after 90 s"
        assert elapsed < 60, elapsed
        exc = outcome[0]
        assert isinstance(exc, (OSError, KafkaLogError)), repr(exc)
        assert uri in str(exc)

        t0 = time.monotonic()
        result = cli("info", uri, *storage_args(options), timeout=90)
        assert time.monotonic() - t0 < 60
        line = one_line_error(result)
        assert uri in line and "did not answer" in line


@pytest.mark.parametrize("message, kind", [
    # a refusing endpoint whose port holds "403" / "404" (CI of 26c57cd: port 403xx)
    ("When getting information for key 'x' in bucket 'b': AWS Error NETWORK_CONNECTION during "
     "HeadObject operation: curlCode: 7, Could not connect to server; Details: Failed to connect "
     "to 127.0.0.1:40312 after 0 ms: Could not connect to server", TimeoutError),
    ("Failed to connect to [::1]:14044 after 0 ms: Could not connect to server", TimeoutError),
    ("AWS Error UNKNOWN (HTTP status 403) during HeadObject operation: No response body.",
     PermissionError),
    ("AWS Error UNKNOWN (HTTP status 404) during HeadObject operation: No response body.",
     FileNotFoundError),
])
def test_store_errors_read_statuses_not_port_numbers(message, kind):
    from kafkalog_spark.storage.options import store_error
    err = store_error(OSError(message), "s3://bkt/x", "read")
    assert type(err) is kind, (err, message)
    assert "s3://bkt/x" in str(err)


# --- 6. ObjectPath ----------------------------------------------------------------------------


SECRET = "sekrit-Value-42"
OPTIONS = {"aws_endpoint_url": "http://127.0.0.1:9", "aws_secret_access_key": SECRET,
           "aws_access_key_id": "AKIDEXAMPLE", "aws_allow_http": "true"}


def test_object_path_is_not_path_like(tmp_path):
    p = ObjectPath("s3://bkt/logs/orders-0/00000000000000000000.log", OPTIONS)
    assert not isinstance(p, os.PathLike)
    with pytest.raises(TypeError):
        open(p, "rb")  # noqa: SIM115
    with pytest.raises(TypeError):
        os.fspath(p)
    with pytest.raises(TypeError):
        Path(p)


def test_object_path_parts_and_joins():
    root = ObjectPath("s3://bkt/logs/", OPTIONS)
    seg = root / "orders-0" / "00000000000000000000.log"
    assert str(root) == "s3://bkt/logs"
    assert str(seg) == "s3://bkt/logs/orders-0/00000000000000000000.log"
    assert str(root / "a/b") == "s3://bkt/logs/a/b"
    assert (seg.name, seg.suffix, seg.stem) == ("00000000000000000000.log", ".log",
                                                "00000000000000000000")
    assert seg.parent == root / "orders-0" and seg.parent.parent == root
    assert str(ObjectPath("s3://bkt/x").parent) == "s3://bkt"
    assert seg.with_suffix(".index") == root / "orders-0/00000000000000000000.index"
    assert seg.with_suffix(".index").options == OPTIONS  # derived paths keep the options
    assert seg.arrow_path == "bkt/logs/orders-0/00000000000000000000.log"
    dotted = ObjectPath("s3://bkt/a.b.c")
    assert (dotted.suffix, dotted.stem) == (".c", "a.b")
    assert ObjectPath("s3://bkt/.hidden").suffix == ""
    assert seg.is_relative_to(root) and seg.is_relative_to(ObjectPath("s3://bkt"))
    assert not seg.is_relative_to(ObjectPath("s3://bkt/log"))  # a prefix, not a folder
    assert not seg.is_relative_to(ObjectPath("s3://other/logs"))
    assert not root.is_relative_to(seg)


def test_object_path_equality_ignores_options():
    a = ObjectPath("s3://bkt/logs", OPTIONS)
    b = ObjectPath("s3://bkt/logs", {"aws_region": "eu-west-1"})
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a != ObjectPath("s3://bkt/logs2") and a != ObjectPath("s3://bkt2/logs")
    assert ObjectPath("s3a://bkt/logs") == a  # s3a:// names the same store


def test_object_path_never_shows_option_values():
    p = as_path("s3://bkt/logs", {"endpoint": "http://127.0.0.1:9", "secret_access_key": SECRET,
                                  "access_key_id": "AKIDEXAMPLE", "allow_http": "true"})
    assert isinstance(p, ObjectPath) and p.options["aws_secret_access_key"] == SECRET
    for text in (str(p), repr(p), f"{p}", str(p / "orders-0"), repr(p.parent), str([p])):
        assert SECRET not in text and "AKIDEXAMPLE" not in text and "127.0.0.1" not in text


def test_object_path_pickles_with_its_options():
    p = ObjectPath("s3://bkt/logs/orders-0/00000000000000000000.log", OPTIONS)
    q = pickle.loads(pickle.dumps(p))
    assert q == p and str(q) == str(p) and q.options == OPTIONS
    assert (q.scheme, q.bucket, q.key) == (p.scheme, p.bucket, p.key)
    assert (q / "x").options == OPTIONS
