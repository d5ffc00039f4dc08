"""Log compaction (log-management layer): Kafka's cleaner rules (KAFKA_FORMATS §15), run locally
or as a Spark job."""
