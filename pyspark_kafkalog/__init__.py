"""PySpark auto-registration hook (Spark layer): PySpark imports every installed top-level
``pyspark_*`` package at session start and registers its ``DefaultSource``, so
``spark.read.format("kafkalog")`` works with no register call."""

from kafkalog_spark.datasource import KafkaLogDataSource as DefaultSource

__all__ = ["DefaultSource"]
