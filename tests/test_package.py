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
    """The CLI group, the progress/warm-up modules and ``kafkalog --help`` (which imports the
    command modules for their short help, and with them the codec: numba was 0.6 s of it,
    measured, before kernels compiled on first call) stay light."""
    code = (
        "import sys\n"
        "import kafkalog_spark.cli, kafkalog_spark.cli.progress, kafkalog_spark.warmup\n"
        "try:\n"
        "    kafkalog_spark.cli.main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        f"heavy = {HEAVY!r}\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_a_write_task_and_the_commit_load_the_writer_not_the_reader() -> None:
    """A Python worker that unpickles the data source's writer or its commit message imports
    ``datasource.writer`` only: not the reader's planning, column conversions and Spark type
    mapping, which cost a cold worker ~0.1 s; the data source's class imports them only when
    asked for a schema or a reader."""
    code = (
        "import sys\n"
        "from kafkalog_spark.datasource import writer\n"
        "print(sorted(m for m in sys.modules if m.startswith('kafkalog_spark.datasource.')))\n"
        "from kafkalog_spark.datasource import KafkaLogDataSource\n"
        "print(KafkaLogDataSource.name(), KafkaLogDataSource.__module__)\n"
        "print(sorted(m for m in sys.modules if m.startswith('kafkalog_spark.datasource.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded, named, with_source = out.stdout.strip().splitlines()
    writing = ("executors", "options", "write_options", "writer")
    assert loaded == str([f"kafkalog_spark.datasource.{m}" for m in writing])
    assert named == "kafkalog kafkalog_spark.datasource.source"
    # the class Spark unpickles in the write's set-up process brings no reading side either
    assert with_source == str([f"kafkalog_spark.datasource.{m}" for m in sorted(
        (*writing, "source"))])


def test_spark_planning_processes_load_no_numba(tmp_path) -> None:
    """Spark runs the data source's lookup, schema, read plan, write set-up and commit each in
    a Python process of its own; none of them runs a kernel, so none pays numba's import
    (0.3-0.5 s each): a kernel compiles on its first call (``codec._jit``). Reading records
    then does load it."""
    import pickle

    import pyarrow as pa
    from pyspark.sql.types import BinaryType, StructField, StructType

    from kafkalog_spark.datasource.source import KafkaLogDataSource
    from kafkalog_spark.log.writer import write_log

    log_dir, out = tmp_path / "logs", tmp_path / "out"
    write_log(pa.table({"value": [b"v"] * 10}), log_dir, topic="t", partition=0, codec="lz4")
    values = StructType([StructField("value", BinaryType())])
    writer = KafkaLogDataSource({"path": str(out), "topic": "t", "numPartitions": "1"}).writer(
        values, False)
    staged = writer.write(iter([pa.record_batch({"value": [b"w"] * 5})]))  # a task: kernels
    (tmp_path / "commit.pickle").write_bytes(pickle.dumps((writer, [staged])))
    code = (
        "import pickle, sys\n"
        "import pyspark_kafkalog\n"
        "from pyspark.sql.types import BinaryType, StructField, StructType\n"
        "from kafkalog_spark.datasource.source import KafkaLogDataSource\n"
        f"source = KafkaLogDataSource({{'path': {str(log_dir)!r}}})\n"
        "tasks = source.reader(source.schema()).partitions()\n"
        f"KafkaLogDataSource({{'path': {str(tmp_path / 'new')!r}, 'topic': 't', "
        "'numPartitions': '1'}).writer(StructType([StructField('value', BinaryType())]), "
        "False)\n"
        f"writer, messages = pickle.loads(open({str(tmp_path / 'commit.pickle')!r}, 'rb').read())\n"
        "writer.commit(messages)\n"
        "print(len(tasks), writer.last_metrics['records'], 'numba' in sys.modules)\n"
        "from kafkalog_spark import read_log\n"
        f"print(read_log({str(out)!r}).num_rows, 'numba' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "5", "False", "5", "True"]
