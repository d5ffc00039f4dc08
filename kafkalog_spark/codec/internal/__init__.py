"""Kafka's internal topics' record schemas (codec layer): ``__consumer_offsets``,
``__transaction_state`` and the KRaft ``__cluster_metadata`` records, decoded from key and
value bytes. May import: ``errors`` only."""
