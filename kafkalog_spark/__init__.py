"""kafkalog_spark: read, write, verify and repair Apache Kafka log directories, offline.

The package root imports nothing heavy: no pyspark, no compression library, not even numba.
Public names resolve lazily on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS = {
    "read_log": "kafkalog_spark.log.reader",
    "write_log": "kafkalog_spark.log.writer",
    "discover": "kafkalog_spark.log.discovery",
    "verify": "kafkalog_spark.inspect.verify",
    "register": "kafkalog_spark.spark",
    "session": "kafkalog_spark.spark",
    "KafkaLogError": "kafkalog_spark.errors",
    "CorruptRecordError": "kafkalog_spark.errors",
    "InvalidOptionError": "kafkalog_spark.errors",
    "LogDirLockedError": "kafkalog_spark.errors",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'kafkalog_spark' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
