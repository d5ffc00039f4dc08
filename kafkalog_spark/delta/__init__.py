"""Delta Lake migration (engine layer): Kafka log dirs become Delta tables, incrementally.

May import: ``errors``, ``codec``, ``storage``, ``log``, the data source (a migration reads
through it), ``recovery`` (a restore rebuilds derived files) and ``compaction`` (erase matchers).
Imported by ``report``, ``cli`` and ``jobs``.

``kafkalog_spark.delta.migrate(sources, dest, ...)`` (also ``kafkalog migrate SRC DEST`` and
``jobs/migrate_delta.py``) writes every record, with every Kafka field kept, to Delta tables
that Spark+Delta, delta-rs, polars and DuckDB read; later runs add only what is new, exactly
once. See ``docs/delta.md`` for the options, the table layout and how the offsets reached are
recorded. Modules: :mod:`.options`, :mod:`.plan`, :mod:`.columns`, :mod:`.files`,
:mod:`.spark_job`, :mod:`.commit`, :mod:`.migrate`.

Importing this package imports neither pyspark nor deltalake; they load when a run needs them.
"""

from __future__ import annotations

from .commit import ConcurrentMigrationError
from .migrate import migrate
from .options import MIGRATE_OPTIONS, MigrateOptions, options_doc, parse_migrate_options
from .plan import DataLossError

__all__ = ["ConcurrentMigrationError", "DataLossError", "MIGRATE_OPTIONS", "MigrateOptions",
           "migrate", "options_doc", "parse_migrate_options"]
