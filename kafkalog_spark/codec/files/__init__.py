"""The other files of a Kafka log dir, as bytes (codec layer): offset, time and transaction
indexes (and their rebuild from a ``.log``), producer-state snapshots, checkpoint and
properties files, and Kafka's names for files and folders (:mod:`.naming`).

May import: :mod:`..records` (an index rebuild scans batches), the codec base and ``errors``.
"""
