"""Bytes <-> Arrow (codec layer): Kafka's wire and file formats, with no files and no folders.

May import: ``errors`` only. Every function takes and returns bytes, numpy buffers or Arrow
data; reading and writing files is the storage layer's (:mod:`kafkalog_spark.storage`).

Rooms, lowest first (a room imports only from rooms before it and from this folder's shared
base: :mod:`.layout` — the wire layouts, one definition shared by kernels and Python —,
:mod:`._bytes` and :mod:`._jit`):

* :mod:`.compression` — gzip, snappy (raw and xerial), lz4 (frame and Kafka's broken legacy
  header), zstd: compress and decompress one entry's payload.
* :mod:`.records` — record batches v0/v1/v2: scan, decode to Arrow, encode from Arrow, CRCs,
  key digests, the default partitioner; the numba kernels behind them.
* :mod:`.files` — the other files of a log dir: ``.index``/``.timeindex``/``.txnindex``,
  producer snapshots, checkpoint and properties files, and Kafka's file and folder names.
* :mod:`.internal` — the record schemas of the internal topics (``__consumer_offsets``,
  ``__transaction_state``, KRaft ``__cluster_metadata``, tiered storage's
  ``__remote_log_metadata``); needs nothing but ``errors``.
"""
