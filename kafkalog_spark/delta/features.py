"""Table features (Delta layer): which parts of a Delta table's protocol the ``deltalake``
package (delta-rs) cannot write or read, so that ``migrate`` picks delta-spark for such a table
and ``restore`` / ``erase --table`` read it through Spark, or say in one line why they cannot.

What delta-rs supports is taken from ``deltalake`` itself (``SUPPORTED_WRITER_FEATURES``,
``SUPPORTED_READER_FEATURES``, the reader and writer versions its pyarrow path refuses), so the
answer moves with a ``deltalake`` upgrade. The usual case: delta-spark with deletion vectors
on (``delta.enableDeletionVectors``, or the session default
``spark.databricks.delta.properties.defaults.enableDeletionVectors``) makes a table with the
``deletionVectors`` reader and writer feature, which deltalake 1.6 neither reads nor writes.
"""

from __future__ import annotations

from pathlib import Path

from .commit import delta_table

DROP_HINT = "ALTER TABLE delta.`{path}` DROP FEATURE {feature}"


def unwritable(path: Path) -> list[str]:
    """The features of the table at ``path`` that delta-rs cannot write (writer features,
    or a legacy writer version whose implied features it does not list)."""
    from deltalake.table import NOT_SUPPORTED_PYARROW_WRITER_VERSIONS, SUPPORTED_WRITER_FEATURES

    protocol = delta_table(path).protocol()
    if protocol.min_writer_version in NOT_SUPPORTED_PYARROW_WRITER_VERSIONS:
        return [f"minWriterVersion {protocol.min_writer_version}"]
    return sorted(set(protocol.writer_features or ()) - SUPPORTED_WRITER_FEATURES)


def unreadable(path: Path) -> list[str]:
    """The reader features of the table at ``path`` that delta-rs cannot read."""
    from deltalake.table import MAX_SUPPORTED_READER_VERSION, SUPPORTED_READER_FEATURES

    protocol = delta_table(path).protocol()
    if protocol.min_reader_version > MAX_SUPPORTED_READER_VERSION:
        return [f"minReaderVersion {protocol.min_reader_version}"]
    return sorted(set(protocol.reader_features or ()) - SUPPORTED_READER_FEATURES)


def needs_delta_spark(path: Path, features: list[str], what: str) -> str:
    """The one-line reason ``what`` needs delta-spark for the table at ``path``."""
    drop = "; ".join(DROP_HINT.format(path=path, feature=f) for f in features
                     if not f.startswith("min"))
    return (f"{path}: the table has {', '.join(features)}, which delta-rs (deltalake) cannot "
            f"{what}: run with a Spark session that has the Delta jars (docs/delta.md)"
            + (f", or drop the feature in Spark: {drop}" if drop else ""))
