"""Data source ceiling benchmark: ``format("kafkalog")`` (all columns, and pruned through a user
schema) against Parquet and against the fastest a Python data source can be, in one Spark session.

The same records (16-byte keys, 100-byte values, ``--partitions`` partitions) are written as a
Kafka log dir per codec (``--codecs``), as Parquet (Spark's writer, snappy) and as one Arrow IPC
file per partition holding the decoded batches (65,536 rows each, like ``maxRowsPerBatch``).
The **ceiling** is a minimal Python ``DataSource`` registered here (``arrowipc``): one task per
IPC file, which it memory-maps and yields batch by batch — no decoding, nothing but what any
Python data source must do (hand Arrow batches to Spark). Like ``kafkalog`` it takes a user
schema to ship fewer columns. Contenders, in one ``local[N]`` session, interleaved, best of
``--repeat``:

* ``kafkalog all``: ``load()`` (every Kafka-source column);
* ``kafkalog pruned``: ``.schema(<the query's columns>)`` (DDL string, as a user writes it);
* ``ceiling all`` / ``ceiling pruned``: the ``arrowipc`` source, the same two ways;
* ``parquet``: Spark's reader (it reads only the query's columns by itself).

Two queries: the **full row** (``sum(length(key)), sum(length(value)), max(offset),
max(timestamp), max(timestampType), max(topic), max(partition), count(*)``: every column of
the Kafka source; "pruned" is then the same 7 columns through ``.schema``) and the **2-column**
query (``sum(length(value)), count(*)``: pruned sources ship ``value`` only). The issue's
targets: kafkalog ≥ 0.95× the ceiling shipping the same columns in every row, and the pruned
2-column query ≥ 1.15× the all-columns one. Timings are printed, never asserted.

    .venv/bin/python benchmarks/bench_datasource_ceiling.py                 # 2 M records
    .venv/bin/python benchmarks/bench_datasource_ceiling.py --records 500000 --repeat 3
    .venv/bin/python benchmarks/bench_datasource_ceiling.py --task-times   # where the gap is

``--task-times`` times, inside the Python workers, how long each task's ``read()`` generator
takes to produce its batches (the source's own work, without Spark consuming them; wall and
the thread's CPU time) for ``kafkalog pruned`` and ``ceiling pruned`` on the 2-column query,
for each codec: what a decoding source adds to a source that decodes nothing, next to the
whole query's time; then the same reads outside Spark (the driver's Python calling the
reader's ``read`` on each partition), the per-row cost a worker would have alone.
``--batch-records`` sets the records per Kafka batch (default 10,000; producers write ~150
records of this size per 16 KiB batch)::

    .venv/bin/python benchmarks/bench_datasource_ceiling.py --task-times --codecs none,lz4,zstd --batch-records 150
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import kafkalog_spark as kl  # noqa: E402
from kafkalog_spark.log.reader import iter_log  # noqa: E402
from bench_datasource import interleaved  # noqa: E402
from bench_migrate import make_records  # noqa: E402

FULL_DDL = ("key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, "
            "timestamp TIMESTAMP, timestampType INT")
VALUE_DDL = "value BINARY"


# --- the ceiling: a minimal Python data source over memory-mapped Arrow IPC files ------------

@dataclass(frozen=True)
class IpcFile(InputPartition):
    path: str


class ArrowIpcSource(DataSource):
    """``arrowipc``: the ``.arrow`` files of the folder ``path``, one task each, batches
    yielded as stored (a user schema selects columns by name)."""

    @classmethod
    def name(cls) -> str:
        return "arrowipc"

    def _files(self) -> list[str]:
        return sorted(str(p) for p in Path(self.options["path"]).glob("*.arrow"))

    def schema(self) -> StructType:
        from pyspark.sql.pandas.types import from_arrow_schema

        with pa.memory_map(self._files()[0]) as f:
            return from_arrow_schema(pa.ipc.open_file(f).schema)

    def reader(self, schema: StructType) -> DataSourceReader:
        return IpcReader(self._files(), schema)


class IpcReader(DataSourceReader):
    def __init__(self, files: list[str], schema: StructType) -> None:
        from pyspark.sql.pandas.types import to_arrow_schema

        self.files = files
        self.arrow = to_arrow_schema(schema, timezone="UTC")

    def partitions(self) -> list[InputPartition]:
        return [IpcFile(p) for p in self.files]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, IpcFile)
        reader = pa.ipc.open_file(pa.memory_map(partition.path))
        names = self.arrow.names
        for i in range(reader.num_record_batches):
            b = reader.get_batch(i).select(names)
            yield b if b.schema.equals(self.arrow) else pa.RecordBatch.from_arrays(
                b.columns, schema=self.arrow)


# --- task times: each read() generator's own time, inside the Python workers ---------------

def _timed(batches: Iterator[pa.RecordBatch], tag: str, log: str) -> Iterator[pa.RecordBatch]:
    produce, cpu, rows, t0 = 0.0, 0.0, 0, time.perf_counter()
    it = iter(batches)
    while True:
        s, c = time.perf_counter(), time.thread_time()
        try:
            b = next(it)
        except StopIteration:
            produce += time.perf_counter() - s
            cpu += time.thread_time() - c
            break
        produce += time.perf_counter() - s
        cpu += time.thread_time() - c
        rows += b.num_rows
        yield b
    package = Path(kl.__file__).parent.parent  # the checkout the worker imported
    with open(log, "a") as f:
        f.write(f"{tag} {produce:.6f} {time.perf_counter() - t0:.6f} {rows} {cpu:.6f} "
                f"{package}\n")


def timed_sources(log: str) -> list[type]:
    """``kafkalog`` and ``arrowipc`` under the names ``kafkalog_timed`` / ``arrowipc_timed``,
    their tasks appending ``(source, produce s, task s, rows)`` lines to ``log`` (the classes
    are defined here, in ``__main__``, so Spark ships them by value)."""
    from kafkalog_spark.datasource import KafkaLogDataSource

    def timed_reader(base: type, name: str, tag: str) -> type:
        def reader(self, schema):
            r = base.reader(self, schema)
            read = r.read
            r.read = lambda part: _timed(read(part), tag, log)
            return r
        return type(name, (base,), {"name": classmethod(lambda cls: name), "reader": reader})

    return [timed_reader(KafkaLogDataSource, "kafkalog_timed", "kafkalog"),
            timed_reader(ArrowIpcSource, "arrowipc_timed", "ceiling")]


WORKER_PACKAGES: set[str] = set()


def task_times(spark, codec: str, logs: str, ipc: str, repeat: int, log: str) -> list[str]:
    frames = {"kafkalog": spark.read.format("kafkalog_timed").schema(VALUE_DDL).load(logs),
              "ceiling": spark.read.format("arrowipc_timed").schema(VALUE_DDL).load(ipc)}
    for df in frames.values():
        value_query(df)  # warm-up
    open(log, "w").close()
    best = interleaved({k: (lambda df=df: value_query(df)) for k, df in frames.items()}, repeat)
    lines = [x.split() for x in open(log).read().splitlines()]
    out = []
    for k in frames:
        mine = [(float(p), float(w), int(n), float(c)) for tag, p, w, n, c, _ in lines
                if tag == k]
        WORKER_PACKAGES.update(x[5] for x in lines)
        produce = statistics.median(p for p, _, _, _ in mine)
        wall = statistics.median(w for _, w, _, _ in mine)
        rows = statistics.median(n for _, _, n, _ in mine)
        cpu = statistics.median(c for _, _, _, c in mine)
        out.append(f"| {codec} | {k} pruned | {best[k]:.3f} | {len(mine) // repeat} | "
                   f"{rows:,.0f} | {produce * 1e3:.1f} | {produce / rows * 1e9:.0f} | "
                   f"{cpu / rows * 1e9:.0f} | {wall * 1e3:.1f} |")
    return out


def outside_spark(spark, logs: str, repeat: int) -> tuple[float, float, float]:
    """Best and median wall and median CPU ns per row of the very reads a pruned kafkalog
    query's tasks run (the same reader, partitions and ``read``), here in the driver's Python,
    one at a time."""
    from kafkalog_spark.datasource import KafkaLogDataSource

    schema = spark.read.format("kafkalog").schema(VALUE_DDL).load(logs).schema
    reader = KafkaLogDataSource({"path": logs}).reader(schema)
    parts = reader.partitions()
    times, cpu, rows = [], [], 0
    for _ in range(repeat + 1):  # the first: warm-up
        t0, c0, rows = time.perf_counter(), time.thread_time(), 0
        for part in parts:
            rows += sum(b.num_rows for b in reader.read(part))
        times.append(time.perf_counter() - t0)
        cpu.append(time.thread_time() - c0)
    return (min(times[1:]) / rows * 1e9, statistics.median(times[1:]) / rows * 1e9,
            statistics.median(cpu[1:]) / rows * 1e9)


# --- the benchmark ---------------------------------------------------------------------------

def full_query(df) -> list:
    from pyspark.sql import functions as F

    return df.select(F.sum(F.length("key")), F.sum(F.length("value")), F.max("offset"),
                     F.max("timestamp"), F.max("timestampType"), F.max("topic"),
                     F.max("partition"), F.count("*")).collect()


def value_query(df) -> list:
    from pyspark.sql import functions as F

    return df.select(F.sum(F.length("value")), F.count("*")).collect()


QUERIES: dict[str, tuple[Callable[[object], list], str]] = {
    "full row": (full_query, FULL_DDL),
    "2 columns": (value_query, VALUE_DDL),
}


def write_ipc(logs: Path, out: Path, partitions: int) -> None:
    """One IPC file per partition: the decoded batches of that partition, as kafkalog's tasks
    yield them (65,536 rows each)."""
    out.mkdir(parents=True)
    for p in range(partitions):
        result = iter_log(logs, partitions=[p])
        with pa.OSFile(str(out / f"part-{p}.arrow"), "wb") as sink:
            writer = None
            for batch in result:
                if writer is None:
                    writer = pa.ipc.new_file(sink, batch.schema)
                writer.write_batch(batch)
            if writer is not None:
                writer.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--codecs", default="none,lz4")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--batch-records", type=int, default=10_000,
                    help="records per Kafka batch written (producers: ~150 for 16 KiB)")
    ap.add_argument("--task-times", action="store_true",
                    help="time each task's read() inside the workers (2-column query, every "
                         "codec) and the same reads outside Spark")
    a = ap.parse_args(argv)
    from kafkalog_spark.spark import session

    codecs = [c for c in a.codecs.split(",") if c]
    work = Path(tempfile.mkdtemp(prefix="bench-ceiling-"))
    results: list[tuple[str, str, dict[str, float]]] = []
    try:
        table = make_records(a.records, a.partitions).drop_columns(["headers"])
        for codec in codecs:
            kl.write_log(table, work / f"logs-{codec}", codec=codec,
                         max_batch_records=a.batch_records)
        del table
        write_ipc(work / f"logs-{codecs[0]}", work / "ipc", a.partitions)
        # Spark's Python workers run `python -m pyspark.daemon` in the driver's working
        # directory, which then comes first on their path: from the checkout this process
        # imported, they import the same kafkalog_spark (under --compare style runs with
        # PYTHONPATH set to another checkout too)
        os.chdir(Path(kl.__file__).resolve().parent.parent)
        spark = session(a.master, app_name="bench-datasource-ceiling", driver_memory="2g")
        spark.dataSource.register(ArrowIpcSource)
        spark.read.format("kafkalog").load(str(work / f"logs-{codecs[0]}")).write.parquet(
            str(work / "parquet"))
        parquet = spark.read.parquet(str(work / "parquet"))
        ipc = str(work / "ipc")
        if a.task_times:
            for src in timed_sources(str(work / "tasks.txt")):
                spark.dataSource.register(src)
            rows, outside = [], []
            for codec in codecs:
                logs = str(work / f"logs-{codec}")
                rows += task_times(spark, codec, logs, ipc, a.repeat, str(work / "tasks.txt"))
                outside.append((codec, *outside_spark(spark, logs, a.repeat)))
            spark.stop()
            print(f"Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}  \n"
                  f"Command: `{' '.join([Path(sys.executable).name, *sys.argv])}`  \n"
                  f"{a.records:,} records, {a.batch_records:,} per batch, {a.partitions} "
                  f"partitions, {a.master}; 2-column query, medians over the tasks of "
                  f"{a.repeat} runs; load average {os.getloadavg()[0]:.2f} at the end; "
                  f"kafkalog_spark from {', '.join(sorted(WORKER_PACKAGES))} in the workers\n")
            print("| codec | source | best query s | tasks per query | rows per task | produce ms "
                  "per task | produce ns per row | produce CPU ns per row | task ms (produce + "
                  "Spark consuming) |")
            print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
            print("\n".join(rows))
            print("\nThe same reads outside Spark (the driver's Python, one partition after "
                  "another):\n\n| codec | ns per row best | ns per row median | CPU ns per row median |"
                  "\n|---|---:|---:|---:|")
            for codec, best_ns, median_ns, cpu_ns in outside:
                print(f"| {codec} | {best_ns:.0f} | {median_ns:.0f} | {cpu_ns:.0f} |")
            return 0
        for codec in codecs:
            logs = str(work / f"logs-{codec}")
            for qname, (query, ddl) in QUERIES.items():
                frames = {
                    "kafkalog all": spark.read.format("kafkalog").load(logs),
                    "kafkalog pruned": spark.read.format("kafkalog").schema(ddl).load(logs),
                    "ceiling all": spark.read.format("arrowipc").load(ipc),
                    "ceiling pruned": spark.read.format("arrowipc").schema(ddl).load(ipc),
                    "parquet": parquet,
                }
                answers = {name: query(df) for name, df in frames.items()}  # warm-up
                first = next(iter(answers.values()))
                assert all(v == first for v in answers.values()), answers
                best = interleaved({name: (lambda df=df: query(df))
                                    for name, df in frames.items()}, a.repeat)
                results.append((codec, qname, best))
        spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(f"Machine: {platform.machine()}, {platform.python_version()}  \n"
          f"Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}  \n"
          f"Command: `{' '.join([Path(sys.executable).name, *sys.argv])}`  \n"
          f"Data: {a.records:,} records, 16-byte keys, 100-byte values, {a.partitions} "
          f"partitions; Spark {a.master}; best of {a.repeat}, interleaved\n")
    print("| codec | query | kafkalog all | kafkalog pruned | ceiling all | ceiling pruned | "
          "parquet | all / ceiling all | pruned / ceiling pruned | pruned / all |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for codec, qname, best in results:
        r = {k: a.records / v for k, v in best.items()}
        print(f"| {codec} | {qname} | " + " | ".join(
            f"{r[k] / 1e6:.2f} M" for k in ("kafkalog all", "kafkalog pruned", "ceiling all",
                                            "ceiling pruned", "parquet"))
              + f" | {r['kafkalog all'] / r['ceiling all']:.2f}x"
              f" | {r['kafkalog pruned'] / r['ceiling pruned']:.2f}x"
              f" | {r['kafkalog pruned'] / r['kafkalog all']:.2f}x |")
    print("\nrows/s; targets: kafkalog ≥ 0.95x the ceiling shipping the same columns, pruned "
          "2-column query ≥ 1.15x all columns")
    return 0


if __name__ == "__main__":
    sys.exit(main())
