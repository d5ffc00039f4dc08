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


def test_cli_modules_load_nothing_heavy() -> None:
    """The CLI group and the progress/warm-up modules stay light (``--help`` imports the command
    modules for their short help, and with them numba: about 0.6 s, measured)."""
    code = (
        "import sys\n"
        "import kafkalog_spark.cli, kafkalog_spark.cli.progress, kafkalog_spark.warmup\n"
        f"heavy = {HEAVY!r}\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_write_task_and_the_commit_load_the_writer_not_the_reader() -> None:
    """A Python worker that unpickles the data source's writer or its commit message imports
    ``datasource.writer`` only: not the reader's planning, column conversions and Spark type
    mapping (``datasource.source`` and what it imports), which cost a cold worker ~0.1 s."""
    code = (
        "import sys\n"
        "from kafkalog_spark.datasource import writer\n"
        "print(sorted(m for m in sys.modules if m.startswith('kafkalog_spark.datasource.')))\n"
        "from kafkalog_spark.datasource import KafkaLogDataSource\n"
        "print(KafkaLogDataSource.name(), KafkaLogDataSource.__module__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded, named = out.stdout.strip().splitlines()
    assert loaded == str([f"kafkalog_spark.datasource.{m}" for m in
                          ("executors", "options", "write_options", "writer")])
    assert named == "kafkalog kafkalog_spark.datasource.source"
