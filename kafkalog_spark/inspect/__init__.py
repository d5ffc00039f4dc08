"""Looking at a log dir without changing it (inspect layer): ``dump`` (Kafka's
``kafka-dump-log`` output, byte for byte) and ``verify`` (every check a broker's load and a
consumer's fetch would make, plus checkpoint and snapshot cross-checks).

May import: ``errors``, ``codec``, ``storage`` and ``log``. Imported by the engines
(recovery verifies what it repairs), ``report``, ``cli`` and ``jobs``.
"""
