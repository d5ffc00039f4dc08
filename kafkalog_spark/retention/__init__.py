"""Retention (engine layer): deleting old segments by Kafka's rules (KAFKA_FORMATS §14).

May import: ``errors``, ``codec``, ``storage`` and ``log``. Imported by ``compaction``,
``report``, ``cli`` and ``jobs``.
"""
