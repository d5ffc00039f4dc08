"""How to decode (codec layer): :class:`DecodeOptions`, one table of defaults for
:mod:`.decode` and :mod:`.decode_columns`, every value validated on construction."""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import InvalidOptionError
from ..compression.codecs import DEFAULT_MAX_DECOMPRESSED
from .schema import check_columns, default_columns

ON_ERROR_CHOICES = ("fail", "skip")
DEFAULT_MAX_ROWS = 65536
# With decode's chunk bounds this keeps every column's data below 2 GiB (int32 offsets).
MAX_DECOMPRESSED_LIMIT = 1024 * 1024 * 1024


@dataclass(frozen=True)
class DecodeOptions:
    """How to decode (one table of defaults; every value validated on construction).

    Attributes
    ----------
    verify_crc : bool
        Check CRC-32 (v0/v1, inner messages of wrappers included) and CRC-32C (v2).
    include_headers, include_metadata : bool
        Add the ``headers`` column / the Kafka metadata columns (``codec.records.schema``).
    columns : sequence of str, optional
        Decode only these columns, in this order (any subset of ``codec.records.schema.ALL_COLUMNS``;
        the two flags above then do not matter). Key, value and header bytes not asked for
        are neither sized nor copied. Checked by :func:`~kafkalog_spark.codec.records.schema.check_columns`.
    include_control : bool
        Return the records of control batches (transaction markers, KRaft control records),
        which a consumer never sees.
    on_error : {"fail", "skip"}
        Raise on the first bad entry, or drop bad entries and report them as bad ranges.
    max_decompressed : int
        Largest decompressed payload of one entry (bounds memory against decompression
        bombs); at most ``MAX_DECOMPRESSED_LIMIT``.
    max_rows : int
        Rows per yielded ``RecordBatch``.
    allow_partial_tail : bool
        Treat an entry cut off by the end of the data (a segment being appended to, a fetch
        response cut at its size limit) as the end, like Kafka's ``FileLogInputStream``;
        by default it is reported as truncation.
    """

    verify_crc: bool = True
    include_headers: bool = False
    include_metadata: bool = False
    include_control: bool = False
    on_error: str = "fail"
    max_decompressed: int = DEFAULT_MAX_DECOMPRESSED
    max_rows: int = DEFAULT_MAX_ROWS
    allow_partial_tail: bool = False
    columns: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.columns is not None:
            if isinstance(self.columns, str):
                raise InvalidOptionError(f"columns must be a sequence of column names; "
                                         f"got {self.columns!r}")
            object.__setattr__(self, "columns", check_columns(self.columns))
        if self.on_error not in ON_ERROR_CHOICES:
            raise InvalidOptionError(f"on_error must be one of {', '.join(ON_ERROR_CHOICES)}; "
                                     f"got {self.on_error!r}")
        if not isinstance(self.max_rows, int) or self.max_rows < 1:
            raise InvalidOptionError(f"max_rows must be a positive int; got {self.max_rows!r}")
        if (not isinstance(self.max_decompressed, int)
                or not 0 < self.max_decompressed <= MAX_DECOMPRESSED_LIMIT):
            raise InvalidOptionError(f"max_decompressed must be an int in 1..{MAX_DECOMPRESSED_LIMIT}"
                                     f"; got {self.max_decompressed!r}")
        for name in ("verify_crc", "include_headers", "include_metadata", "include_control",
                     "allow_partial_tail"):
            if not isinstance(getattr(self, name), bool):
                raise InvalidOptionError(f"{name} must be True or False; "
                                         f"got {getattr(self, name)!r}")

    @property
    def output_columns(self) -> tuple[str, ...]:
        """The names of the decoded columns, in order."""
        if self.columns is not None:
            return self.columns
        return default_columns(self.include_headers, self.include_metadata)
