"""Spark DataSource ``kafkalog`` (data source layer): read and write Kafka log dirs as DataFrames.

May import: ``errors``, ``codec``, ``storage`` and ``log``. Imported by the session helper
(:mod:`kafkalog_spark.spark`), the engines' Spark jobs, ``cli`` and ``jobs``. Importing this
package imports pyspark; ``import kafkalog_spark`` alone does not.
"""

from __future__ import annotations

from .source import KafkaLogDataSource, spark_schema

__all__ = ["KafkaLogDataSource", "spark_schema"]
