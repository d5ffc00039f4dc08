"""Log dirs written by us for the oracle tests (test harness): varied records as Arrow tables
for ``write_log`` and the data source, the ``kafkalog`` CLI run as a user runs it, and our own
view of a log dir (records, log start and end offsets) to hold a broker's answers against."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pyarrow as pa

import kafkalog_spark as kl

from .logdirs import CHECKPOINTS, read_checkpoint, write_checkpoint

HEADERS_TYPE = pa.list_(pa.field("element", pa.struct([pa.field("key", pa.string(), nullable=False),
                                                       pa.field("value", pa.binary())]),
                                 nullable=False))


def records_table(rng: random.Random, n: int, partitions: int, *, first_ms: int,
                  keys: list[bytes] | None = None, step_ms: int = 7) -> pa.Table:
    """``n`` records over ``partitions``: null, empty and repeated keys (or keys drawn from
    ``keys``), tombstones, empty and random values, headers (a null value, a non-ASCII name),
    timestamps from ``first_ms`` rising by ``step_ms`` and now and then going back."""
    cols: dict[str, list] = {"partition": [], "key": [], "value": [], "timestamp": [],
                             "headers": []}
    for i in range(n):
        cols["partition"].append(i % partitions)
        cols["key"].append(rng.choice(keys) if keys else
                           rng.choice([None, b"", f"k{rng.randrange(40)}".encode()]))
        cols["value"].append(None if rng.random() < 0.1 else rng.randbytes(rng.randrange(300)))
        cols["timestamp"].append((first_ms + i * step_ms - rng.randrange(50)) * 1000)
        cols["headers"].append(rng.choice([[], [{"key": "h", "value": b"v"}],
                                           [{"key": "n", "value": None},
                                            {"key": "h\u00fc", "value": b""}]]))
    return pa.table({"partition": pa.array(cols["partition"], pa.int32()),
                     "key": pa.array(cols["key"], pa.binary()),
                     "value": pa.array(cols["value"], pa.binary()),
                     "timestamp": pa.array(cols["timestamp"], pa.timestamp("us", tz="UTC")),
                     "headers": pa.array(cols["headers"], HEADERS_TYPE)})


def offsets(log_dir: Path) -> dict[tuple[str, int], tuple[int, int]]:
    """``(topic, partition) -> (log start offset, log end offset)`` as ``kafkalog info`` says."""
    info = json.loads(kafkalog_here("info", "--json", log_dir))
    return {(p["topic"], p["partition"]): (p["start_offset"], p["next_offset"])
            for d in info["log_dirs"] for p in d["partitions"]}


def renamed_copy(src: Path, topic: str, new_topic: str, dest: Path) -> Path:
    """Log dir ``dest`` holding a copy of ``topic``'s partitions of log dir ``src`` as topic
    ``new_topic`` (folders and checkpoint entries renamed; a topic name lives nowhere else in
    a partition dir)."""
    dest.mkdir(parents=True, exist_ok=True)
    for d in sorted(Path(src).glob(f"{topic}-*")):
        suffix = d.name[len(topic) + 1:]
        if suffix.isdigit():
            shutil.copytree(d, dest / f"{new_topic}-{suffix}")
    for name in CHECKPOINTS:
        entries = {(new_topic, p): o for (t, p), o in read_checkpoint(Path(src) / name).items()
                   if t == topic}
        if entries:
            write_checkpoint(dest / name, entries)
    return dest


def read_ours(log_dir: Path, topic: str):
    return kl.read_log(log_dir, topics=[topic], include_headers=True)


def kafkalog_here(*args) -> str:
    """Run the ``kafkalog`` CLI in this process (``kafkalog_spark.cli.main``): a command with
    ``--engine spark`` then runs on the test session's Spark instead of starting its own JVM.
    Fails the test on a non-zero exit code; returns what it printed."""
    import contextlib
    import io

    from kafkalog_spark.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in args])
    assert code == 0, f"kafkalog {' '.join(map(str, args))} exited {code}:\n" \
                      f"{out.getvalue()[-3000:]}\n{err.getvalue()[-3000:]}"
    return out.getvalue()
