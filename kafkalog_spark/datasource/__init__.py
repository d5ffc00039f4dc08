"""Spark DataSource ``kafkalog`` (data source layer): read and write Kafka log dirs as DataFrames.

May import: ``errors``, ``codec``, ``storage`` and ``log``. Imported by the session helper
(:mod:`kafkalog_spark.spark`), the engines' Spark jobs, ``cli`` and ``jobs``. Importing this
package imports nothing: its two public names resolve on first use, so a Python worker that
unpickles one module of it (a write task or the write's commit: :mod:`.writer`) imports that
module's needs only, not the reader's planning and Spark type conversions (:mod:`.source`).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {"KafkaLogDataSource": ".source", "spark_schema": ".columns"}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name], __name__), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
