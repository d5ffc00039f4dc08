"""Log compaction (engine layer): Kafka's cleaner rules (KAFKA_FORMATS §15), run locally or as
a Spark job; and ``erase``, which rewrites segments without chosen records the same way.

May import: ``errors``, ``codec``, ``storage``, ``log``, the data source's task helpers and the
session (:mod:`kafkalog_spark.spark`), and ``retention`` (Kafka's cleaner deletes old segments
of ``compact,delete`` logs itself). Imported by ``delta`` (erase from tables too), ``report``,
``cli`` and ``jobs``.
"""
