"""Kafka's internal topics' record schemas (codec layer): keys and values decoded from bytes.

``__consumer_offsets``, ``__transaction_state``, the KRaft ``__cluster_metadata`` records and
tiered storage's ``__remote_log_metadata`` records. May import: ``errors`` only."""
