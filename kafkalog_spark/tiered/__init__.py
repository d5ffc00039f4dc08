"""The remote tier of tiered storage, KIP-405 (tier layer): where a broker's RemoteStorageManager
put a partition's older segments, and which of them hold its history.

May import: ``errors``, ``codec`` and ``storage``. Imported by ``log`` (which puts the remote
segments before the local ones, :mod:`kafkalog_spark.log.history`) and everything above it.

Why this floor, between ``storage`` and ``log``: a tier is storage laid out by a plugin — object
names, folders, per-plugin transforms — plus the ``__remote_log_metadata`` records that say
which copies finished; turning those into segment descriptions needs the codec and the storage
seam, not the log model. The log model needs them to build a partition's whole history (reads,
Spark splits, ``info``, ``verify``), so it sits above.

Modules: :mod:`.tier` (a tier given by the user: its root and layout), :mod:`.metadata` (the
``__remote_log_metadata`` records replayed into each partition's remote segments and their
states), :mod:`.local_tiered_storage` (Kafka's LocalTieredStorage layout: byte copies with their
indexes), :mod:`.aiven` (Aiven's layout) with :mod:`.aiven_manifest` (manifest, chunk index),
:mod:`.aiven_transform` (decryption, decompression) and :mod:`.aiven_storage` (its segments as
plain segment files through the storage seam), :mod:`.segments` (the readable remote segments
of one partition, whatever the layout).
"""
