"""Numba warm-up (entry-point layer): compile every kernel once, so the first real call is fast.

The hot loops are ``@njit(cache=True)`` kernels: the first process that calls one compiles it
(seconds) and stores the machine code in numba's cache (``__pycache__`` next to the sources,
or ``$NUMBA_CACHE_DIR``); later processes load it in milliseconds. Without a warm-up a
newcomer's first ``kafkalog verify`` pays every compile (about 3 s more than a warm call on
the development machine). ``./dev test`` runs this once after installing, ``./dev example``
once after the example's last line (the example compiles the few kernels it calls itself)::

    python -m kafkalog_spark.warmup

It writes a small log dir (every codec, two partitions, headers, keys) to a temporary folder,
adds an empty partition, then runs the commands that reach the kernels — ``info``, ``verify --deep``, ``dump`` (deep,
with data, text and JSON lines), ``rebuild-index``, ``recover``/``compact``/``retain`` dry
runs, then an executed compaction in several passes and the Spark compaction's key combining —
and ``read_log``, all on that folder only. Under ``NUMBA_DISABLE_JIT=1`` it does the
same work with nothing to compile.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def _table(n: int, topic: str):
    import pyarrow as pa

    from .codec.records.schema import HEADERS_TYPE

    return pa.table({
        "topic": pa.array([topic] * n, pa.string()),
        "partition": pa.array([i % 2 for i in range(n)], pa.int32()),
        "key": pa.array([None if i % 7 == 0 else f"k{i % 5}".encode() for i in range(n)],
                        pa.binary()),
        "value": pa.array([None if i % 11 == 0 else bytes(20 + i % 30) for i in range(n)],
                          pa.binary()),
        "timestamp": pa.array([(1_700_000_000_000 + i) * 1000 for i in range(n)],
                              pa.timestamp("us", tz="UTC")),
        "headers": pa.array([[{"key": "h", "value": b"v"}] if i % 3 == 0 else []
                             for i in range(n)], HEADERS_TYPE),
    })


def _cli(*args: str) -> int:
    """``kafkalog ARGS`` in a child process, output discarded; exit 0 or 1 ("work to do")."""
    # A child of its own per command: a kernel first compiled as the callee of another kernel
    # in a long-lived process was not always found in the cache by a fresh ``kafkalog``
    # process (measured: ``dump`` still compiled 19 kernels after an in-process warm-up).
    out = subprocess.run([sys.executable, "-m", "kafkalog_spark.cli", *args],
                         capture_output=True, text=True)
    if out.returncode not in (0, 1):
        raise RuntimeError(f"warm-up step `kafkalog {' '.join(args)}` failed:\n"
                           f"{(out.stdout + out.stderr)[-2000:]}")
    return out.returncode


def _python(code: str) -> None:
    """``python -c CODE`` in a child process (a kernel the commands do not reach)."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"warm-up step failed:\n{(out.stdout + out.stderr)[-2000:]}")


def warm_up(verbose: bool = False) -> float:
    """Run the kernel paths once on a small temporary log dir; returns the seconds taken.

    Parameters
    ----------
    verbose : bool
        Print each step's time on stderr.

    Returns
    -------
    float
        Wall time of the whole warm-up.
    """
    from .log.reader import read_log
    from .log.writer import write_log
    from .storage import LOCAL

    start = time.perf_counter()

    def step(label: str, fn, *args, **kwargs):
        t = time.perf_counter()
        result = fn(*args, **kwargs)
        if verbose:
            print(f"  {label}: {time.perf_counter() - t:.2f} s", file=sys.stderr)
        return result

    with LOCAL.temp_dir("kafkalog-warmup-") as tmp:
        log_dir = Path(tmp) / "kafka-logs"
        for codec in CODECS:
            step(f"write_log {codec}", write_log, _table(300, f"warm-{codec}"), log_dir,
                 codec=codec, max_batch_records=50, segment_bytes=4096)
        # an empty segment: mapped_file hands it over as a writable empty array, a second
        # signature of every scan kernel (brokers leave many empty partitions)
        empty = log_dir / "warm-empty-0"
        LOCAL.make_dir(empty)
        LOCAL.write_whole(empty / "00000000000000000000.log", b"")
        step("read_log", read_log, log_dir, include_headers=True, include_metadata=True)
        segment = str(log_dir / "warm-none-0" / "00000000000000000000.log")
        index = str(log_dir / "warm-none-0" / "00000000000000000000.index")
        step("info", _cli, "info", str(log_dir))
        step("verify --deep", _cli, "verify", "--deep", "--local", str(log_dir))
        step("dump", _cli, "dump", "--deep-iteration", "--print-data-log", segment, index)
        step("dump jsonl", _cli, "dump", "--format", "jsonl", "--print-data-log", segment)
        step("rebuild-index", _cli, "rebuild-index", "--force", str(log_dir))
        step("recover", _cli, "recover", str(log_dir))
        step("retain", _cli, "retain", "--config", "retention.ms=1", str(log_dir))
        step("compact", _cli, "compact", "--config", "cleanup.policy=compact", "--force",
             str(log_dir))
        # last: it changes the folder (several passes of a tiny key map: key digests, the map)
        step("compact --execute", _cli, "compact", "--config", "cleanup.policy=compact",
             "--force", "--execute", "--high-watermark", "log-end", "--dedupe-buffer-size",
             "100", str(log_dir))
        step("Spark compaction's key combining", _python,
             "import numpy as np; from kafkalog_spark.compaction.key_map import combine_keys; "
             "a = np.arange(10, dtype=np.int64); combine_keys(a % 3, a % 3, a, a > 5, a)")
    return time.perf_counter() - start


def main() -> int:
    """``python -m kafkalog_spark.warmup [-v]``: warm numba's cache, print the time taken."""
    seconds = warm_up(verbose="-v" in sys.argv[1:])
    print(f"numba kernels compiled and cached in {seconds:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
