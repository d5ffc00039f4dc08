"""Table features (Delta layer): which parts of a Delta table's protocol the ``deltalake``
package (delta-rs) cannot write or read, and the one-line refusal that says so.

``migrate`` and ``erase --table`` write such a table with delta-spark; ``restore`` and
``erase`` read one with deletion vectors themselves (:mod:`.scan`).

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


def refusal(path: Path, features: list[str], what: str, remedy: str) -> str:
    """The one-line reason delta-rs cannot ``what`` the table at ``path``, with ``remedy`` and
    how to drop the features in Spark."""
    drop = "; ".join(DROP_HINT.format(path=path, feature=f) for f in features
                     if not f.startswith("min"))
    return (f"{path}: the table has {', '.join(features)}, which delta-rs (deltalake) cannot "
            f"{what}: {remedy}" + (f"; or drop the feature in Spark: {drop}" if drop else ""))
