"""Fuzzing harness (tests): seeded mutations of valid Kafka files fed to every parser.

``corpus`` builds the valid inputs, ``mutators`` damages them, ``harness`` runs the targets under
a time and memory bound and reports anything that is not a correct result or a typed
:class:`~kafkalog_spark.errors.KafkaLogError`.
"""
