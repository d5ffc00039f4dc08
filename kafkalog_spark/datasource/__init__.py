"""Spark DataSource ``kafkalog`` (Spark layer): read and write Kafka log dirs as DataFrames.

Importing this package imports pyspark; ``import kafkalog_spark`` alone does not.
"""

from __future__ import annotations

from .source import KafkaLogDataSource, spark_schema

__all__ = ["KafkaLogDataSource", "spark_schema"]
