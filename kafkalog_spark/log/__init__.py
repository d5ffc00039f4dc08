"""The on-disk model of a Kafka log dir (log layer).

Discovery of log dirs, partitions and segments, selection by topic, partition state (log start, log end, high watermark), lookups
through the indexes, transactions, reading to Arrow (``read_log``), writing partition dirs
(``write_log``), and Kafka's own crash-safe protocols over segments (``.cleaned``/``.swap``
/``.deleted`` swaps, staged and published partition dirs).

With tiered storage, a partition's history starts with the remote segments of a tier
(:mod:`.history`). May import: ``errors``, ``codec``, ``storage`` and ``tiered``. Imported by
``inspect``, the data source, the maintenance engines, ``report``, ``cli`` and ``jobs``.
"""
