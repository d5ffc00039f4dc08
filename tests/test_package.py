"""The package root stays light: importing it loads no Spark, no numba, no codec library."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("pyspark", "numba", "lz4", "zstandard", "snappy", "cramjam", "deltalake", "delta")


def test_import_loads_nothing_heavy() -> None:
    code = (
        "import sys, kafkalog_spark\n"
        f"heavy = {HEAVY!r}\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_public_names_resolve() -> None:
    import kafkalog_spark

    assert issubclass(kafkalog_spark.CorruptRecordError, kafkalog_spark.KafkaLogError)
    assert "read_log" in dir(kafkalog_spark)


def test_cli_help_loads_nothing_heavy() -> None:
    """``kafkalog --help`` and the progress/warm-up modules stay light: a newcomer's first
    command answers at once, and a missing codec library cannot break ``--help``."""
    code = (
        "import sys, contextlib, io\n"
        "import kafkalog_spark.cli.progress, kafkalog_spark.warmup\n"
        "from kafkalog_spark.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    assert main(['--help']) == 0\n"
        "assert 'verify' in out.getvalue() and 'Usage: kafkalog' in out.getvalue()\n"
        f"heavy = {HEAVY!r}\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
