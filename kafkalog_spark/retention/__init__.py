"""Retention (log-management layer): deleting old segments by Kafka's rules (KAFKA_FORMATS §14)."""
