"""Codec benchmark: decode, encode and CRC-verify, side by side with aiokafka and kafka-python.

Same input for every implementation, measured in one process: 1 M records with 16-byte keys
and 100-byte values in producer-sized batches (``--batch-records``, default 150 ≈ 16 KiB), for
each codec. Each figure is the best of ``--repeat`` runs (the machines are noisy; best-of is
the least noisy estimator of what the code can do). kafka-python is pure Python and slow, so it
runs on the first ``--slow-records`` records only; its records/s is still a like-for-like rate.

    .venv/bin/python benchmarks/bench_codec.py                 # full run, markdown table
    .venv/bin/python benchmarks/bench_codec.py --records 100000 --repeat 1   # quick look

``--compare OLD NEW`` times decoding only, under two checkouts of the project side by side:
one long-lived worker process per checkout (``PYTHONPATH`` set to it), both decoding the same
encoded bytes, the parent asking them in turn for one timed decode at a time (``--repeat``
rounds, the order flipping every round) so that load from other processes hits both alike;
prints best and median ns per record and NEW/OLD, for the ``value`` column alone (what a
pruned Spark scan decodes) and for every column with headers (the table above)::

    git worktree add /tmp/before <commit>
    .venv/bin/python benchmarks/bench_codec.py --compare /tmp/before . --records 300000 --repeat 15
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa


CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def make_table(n: int, value_size: int = 100, seed: int = 7) -> pa.Table:
    rng = np.random.default_rng(seed)
    # printable, moderately compressible payloads (JSON-like text compresses ~2-4x)
    alphabet = np.frombuffer(b'abcdefghijklmnopqrstuvwxyz0123456789 {}":,', np.uint8)
    values = alphabet[rng.integers(0, len(alphabet) // 3, size=n * value_size)]
    keys = np.frombuffer(b"".join(b"key-%012d" % (i % 100_000) for i in range(n)), np.uint8)
    val_offsets = np.arange(0, (n + 1) * value_size, value_size, dtype=np.int32)
    key_offsets = np.arange(0, (n + 1) * 16, 16, dtype=np.int32)
    ts = (1_700_000_000_000 + np.arange(n, dtype=np.int64)) * 1000
    return pa.table({
        "key": pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(key_offsets),
                                                       pa.py_buffer(keys)]),
        "value": pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(val_offsets),
                                                         pa.py_buffer(values)]),
        "timestamp": pa.array(ts, pa.timestamp("us", tz="UTC")),
    })


def best_of(fn: Callable[[], object], repeat: int) -> float:
    return best_of_each([fn], repeat)[0]


def best_of_each(fns: list[Callable[[], object]], repeat: int) -> list[float]:
    """Best time of each function, with the runs interleaved (a, b, a, b, ...) so that a burst
    of load from other processes hits every contender alike."""
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn()
            best[i] = min(best[i], time.perf_counter() - t0)
    return best


def python_records(table: pa.Table) -> list[tuple[bytes, bytes, int]]:
    keys = table["key"].to_pylist()
    values = table["value"].to_pylist()
    ts = [int(t.timestamp() * 1000) for t in table["timestamp"].to_pylist()]
    return list(zip(keys, values, ts))


def build_with(builder_cls, records, codec_id: int, batch_records: int) -> bytes:
    out = bytearray()
    for start in range(0, len(records), batch_records):
        b = builder_cls(magic=2, compression_type=codec_id, is_transactional=False,
                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                        batch_size=1 << 30)
        for i, (k, v, ts) in enumerate(records[start:start + batch_records]):
            b.append(i, timestamp=ts, key=k, value=v, headers=[])
        buf = bytearray(b.build())
        buf[0:8] = int(start).to_bytes(8, "big", signed=True)  # base offset (outside the CRC)
        out += buf
    return bytes(out)


def consume_with(memory_records_cls, data: bytes) -> int:
    n = 0
    records = memory_records_cls(data)
    while records.has_next():
        batch = records.next_batch()
        for rec in batch:
            rec.key, rec.value, rec.timestamp, rec.offset, rec.headers
            n += 1
    return n


def main() -> None:
    # imported here, not at the top: bench_paths --compare generates records with make_table
    # under checkouts whose modules live elsewhere
    from kafkalog_spark.codec import layout as L
    from kafkalog_spark.codec.compression.codecs import decompress
    from kafkalog_spark.codec.records.crc import verify_crcs
    from kafkalog_spark.codec.records.decode import DecodeOptions, decode_to_table
    from kafkalog_spark.codec.records.encode import encode_record_batches
    from kafkalog_spark.codec.records.scan import scan_entries

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--slow-records", type=int, default=50_000)
    ap.add_argument("--batch-records", type=int, default=150)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--codecs", default=",".join(CODECS))
    ap.add_argument("--compare", nargs=2, metavar=("OLD", "NEW"),
                    help="decode times under two checkouts, side by side")
    ap.add_argument("--serve", help=argparse.SUPPRESS)  # a --compare worker over this folder
    args = ap.parse_args()
    if args.serve:
        return serve(Path(args.serve))
    if args.compare:
        return compare(args)

    import aiokafka.record.default_records as aio_default
    import aiokafka.record.memory_records as aio_memory
    import kafka.record.default_records as kp_default
    import kafka.record.memory_records as kp_memory

    table = make_table(args.records)
    slow = table.slice(0, args.slow_records)
    records = python_records(table)
    slow_records = records[: args.slow_records]
    options = DecodeOptions(include_headers=True)
    rows = []
    bounds = []  # (codec, rec/s of decompression alone, its share of our decode time)
    for codec in args.codecs.split(","):
        cid = L.CODEC_IDS[codec]
        data = bytes(encode_record_batches(table, codec=cid,
                                           max_batch_records=args.batch_records).data)
        slow_data = build_with(aio_default.DefaultRecordBatchBuilder, slow_records, cid,
                               args.batch_records)
        assert decode_to_table(data, topic="t", partition=0).num_rows == args.records

        n, ns = args.records, args.slow_records
        t_dec, t_aio = best_of_each(
            [lambda: decode_to_table(data, topic="t", partition=0, options=options),
             lambda: consume_with(aio_memory.MemoryRecords, data)], args.repeat)
        t_kp = best_of(lambda: consume_with(kp_memory.MemoryRecords, slow_data), 1)
        rows.append(("decode", codec, n / t_dec, n / t_aio, ns / t_kp))
        if cid != L.CODEC_NONE:
            payloads = _payloads(data)
            t_lib = best_of(lambda: [decompress(cid, p) for p in payloads], args.repeat)
            bounds.append((codec, n / t_lib, t_lib / t_dec))

        t_enc, t_aio_enc = best_of_each(
            [lambda: encode_record_batches(table, codec=cid, max_batch_records=args.batch_records),
             lambda: build_with(aio_default.DefaultRecordBatchBuilder, records, cid,
                                args.batch_records)], args.repeat)
        t_kp_enc = best_of(lambda: build_with(kp_default.DefaultRecordBatchBuilder, slow_records,
                                              cid, args.batch_records), 1)
        rows.append(("encode", codec, n / t_enc, n / t_aio_enc, ns / t_kp_enc))

        if codec == "none":
            entries = scan_entries(data)
            batches = list(_aio_batches(aio_memory.MemoryRecords, data))
            t_ver, t_aio_ver = best_of_each(
                [lambda: verify_crcs(data, scan_entries(data)),
                 lambda: [b.validate_crc() for b in batches]], args.repeat)
            gb = len(data) / 1e9
            verify_row = (len(entries), gb / t_ver, gb / t_aio_ver)

    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, {platform.processor() or '?'}; "
          f"python {platform.python_version()}; numba JIT "
          f"{'off' if os.environ.get('NUMBA_DISABLE_JIT') == '1' else 'on'}")
    print(f"records: {args.records:,} x (16-byte key, 100-byte value), "
          f"{args.batch_records} records per batch; best of {args.repeat}\n")
    print("| op | codec | kafkalog_spark rec/s | aiokafka (C) rec/s | kafka-python rec/s "
          "| vs aiokafka | vs kafka-python |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for op, codec, ours, aio, kp in rows:
        print(f"| {op} | {codec} | {ours:,.0f} | {aio:,.0f} | {kp:,.0f} | {ours / aio:.1f}x "
              f"| {ours / kp:.1f}x |")
    if bounds:
        print("\nWhat bounds compressed decoding: the codec library alone (decompressing every "
              "batch's records section, no parsing)")
        print("| codec | decompression alone rec/s | share of kafkalog_spark decode time |")
        print("|---|---:|---:|")
        for codec, rate, share in bounds:
            print(f"| {codec} | {rate:,.0f} | {share:.0%} |")
    if "none" in args.codecs.split(","):
        n_batches, ours_gbs, aio_gbs = verify_row
        print(f"\nCRC verify, uncompressed, {n_batches:,} batches: kafkalog_spark "
              f"{ours_gbs:.2f} GB/s, aiokafka validate_crc {aio_gbs:.2f} GB/s "
              f"({ours_gbs / aio_gbs:.1f}x)")


# --- --compare: two checkouts side by side ----------------------------------------------------

DECODES = {"value": dict(columns=("value",)), "all": dict(include_headers=True)}


def serve(folder: Path) -> None:
    """A --compare worker: for each line ``<codec> <columns>`` on stdin, decode
    ``folder/<codec>.bin`` once (after one untimed warm-up per pair) and print the seconds."""
    from kafkalog_spark.codec.records.decode import DecodeOptions, decode_to_table

    cache: dict[str, bytes] = {}
    for line in sys.stdin:
        codec, cols = line.split()
        data = cache.get(codec)
        if data is None:
            data = cache[codec] = (folder / f"{codec}.bin").read_bytes()
            for kwargs in DECODES.values():
                decode_to_table(data, topic="t", partition=0, options=DecodeOptions(**kwargs))
        options = DecodeOptions(**DECODES[cols])
        t0 = time.perf_counter()
        decode_to_table(data, topic="t", partition=0, options=options)
        print(time.perf_counter() - t0, flush=True)


def compare(args: argparse.Namespace) -> None:
    from kafkalog_spark.codec import layout as L
    from kafkalog_spark.codec.records.encode import encode_record_batches

    trees = {"OLD": str(Path(args.compare[0]).resolve()), "NEW": str(Path(args.compare[1]).resolve())}
    codecs = args.codecs.split(",")
    folder = Path(tempfile.mkdtemp(prefix="bench-codec-"))
    table = make_table(args.records)
    for codec in codecs:
        (folder / f"{codec}.bin").write_bytes(bytes(encode_record_batches(
            table, codec=L.CODEC_IDS[codec], max_batch_records=args.batch_records).data))
    workers = {name: subprocess.Popen(
        [sys.executable, __file__, "--serve", str(folder)], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": tree})
        for name, tree in trees.items()}
    times: dict[tuple[str, str, str], list[float]] = {}
    try:
        for r in range(args.repeat):
            for codec in codecs:
                for cols in DECODES:
                    for name in (("OLD", "NEW") if r % 2 == 0 else ("NEW", "OLD")):
                        w = workers[name]
                        w.stdin.write(f"{codec} {cols}\n")
                        w.stdin.flush()
                        times.setdefault((codec, cols, name), []).append(
                            float(w.stdout.readline()))
    finally:
        for w in workers.values():
            w.stdin.close()
            w.wait()
        for f in folder.iterdir():
            f.unlink()
        folder.rmdir()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores; python "
          f"{platform.python_version()}; load average {os.getloadavg()[0]:.2f} at the end")
    print(f"OLD = {trees['OLD']}, NEW = {trees['NEW']}; {args.records:,} records x (16-byte key, "
          f"100-byte value), {args.batch_records} records per batch; {args.repeat} alternating "
          f"rounds\n")
    print("| codec | columns | OLD ns/rec best | NEW ns/rec best | NEW/OLD best "
          "| OLD median | NEW median | NEW/OLD median |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for codec in codecs:
        for cols in DECODES:
            old, new = times[(codec, cols, "OLD")], times[(codec, cols, "NEW")]
            ob, nb = min(old) / args.records * 1e9, min(new) / args.records * 1e9
            om = statistics.median(old) / args.records * 1e9
            nm = statistics.median(new) / args.records * 1e9
            print(f"| {codec} | {cols} | {ob:.1f} | {nb:.1f} | {nb / ob:.2f} | {om:.1f} "
                  f"| {nm:.1f} | {nm / om:.2f} |")


def _payloads(data: bytes) -> list[memoryview]:
    from kafkalog_spark.codec import layout as L
    from kafkalog_spark.codec.records.scan import scan_entries

    entries = scan_entries(data)
    view = memoryview(data)
    return [view[p + L.RECORDS_OFFSET:p + s]
            for p, s in zip(entries.position.tolist(), entries.entry_size.tolist())]


def _aio_batches(memory_records_cls, data: bytes):
    records = memory_records_cls(data)
    while records.has_next():
        yield records.next_batch()


if __name__ == "__main__":
    main()
