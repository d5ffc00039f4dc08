"""Compression (codec layer): decompress (bounded) and compress Kafka's gzip, snappy, lz4 and
zstd payloads by codec id, loading each codec's Python library only when it is needed.

What Kafka compresses is the records section of a v2 batch or the value of a v0/v1 wrapper
message (KAFKA_FORMATS §7.1); this module only turns those bytes into plain bytes and back.
The framings themselves (layouts, decoders, encoders) are in :mod:`.framings` and :mod:`.zstd`.

Every failure is a :class:`~kafkalog_spark.errors.CompressionError` carrying the caller's
:class:`~kafkalog_spark.errors.Location`; every decoder is bounded by ``max_size`` before it
allocates. Codec libraries are imported only when their codec is met.
"""

from __future__ import annotations

from typing import Any, Callable

from kafkalog_spark.codec.compression.framings import (LZ4_KAFKA_BLOCK_SIZE, _gzip_decode,
                                                       _gzip_encode, _lz4_decode, _lz4_encode,
                                                       _snappy_decode, _snappy_encode)
from kafkalog_spark.codec.compression.sink import Sink
from kafkalog_spark.codec.compression.zstd import _zstd_decode, _zstd_encode
from kafkalog_spark.codec.layout import (CODEC_GZIP, CODEC_LZ4, CODEC_NAMES, CODEC_NONE,
                                         CODEC_SNAPPY, CODEC_ZSTD)
from kafkalog_spark.errors import CompressionError, Location, MissingCodecError

DEFAULT_MAX_DECOMPRESSED = 256 * 1024 * 1024

_Decoder = Callable[[Any, memoryview, int, int, "Location | None", Sink], None]
_Encoder = Callable[[Any, memoryview, int, "int | None"], bytes]
_DECODERS: dict[int, _Decoder] = {
    CODEC_GZIP: _gzip_decode,
    CODEC_SNAPPY: _snappy_decode,
    CODEC_LZ4: _lz4_decode,
    CODEC_ZSTD: _zstd_decode,
}
_ENCODERS: dict[int, _Encoder] = {
    CODEC_GZIP: _gzip_encode,
    CODEC_SNAPPY: _snappy_encode,
    CODEC_LZ4: _lz4_encode,
    CODEC_ZSTD: _zstd_encode,
}

_INSTALL_HINTS = {
    CODEC_SNAPPY: ("cramjam", "pip install cramjam"),
    CODEC_LZ4: ("lz4.block", "pip install lz4 xxhash cramjam"),
    CODEC_ZSTD: ("zstandard", "pip install zstandard"),
}


def require_codec(codec: int) -> None:
    """Check that the Python library a codec needs is importable.

    Parameters
    ----------
    codec : int
        Kafka codec id (``CODEC_NONE`` .. ``CODEC_ZSTD`` from :mod:`kafkalog_spark.codec.layout`).

    Raises
    ------
    MissingCodecError
        The library is not installed; the message says what to ``pip install``.
    CompressionError
        ``codec`` is not a Kafka codec id.
    """
    if codec in (CODEC_NONE, CODEC_GZIP):
        return
    if codec not in _INSTALL_HINTS:
        raise CompressionError(f"unknown compression codec id {codec}")
    _import_codec(codec)


def _import_codec(codec: int, location: Location | None = None) -> Any:
    module, hint = _INSTALL_HINTS[codec]
    try:
        if codec == CODEC_SNAPPY:
            import cramjam

            return cramjam.snappy
        if codec == CODEC_LZ4:  # lz4's own blocks encode; cramjam's decode in place
            import cramjam
            import lz4.block
            import xxhash

            return lz4.block, cramjam.lz4.decompress_block_into, xxhash.xxh32_intdigest
        import zstandard

        return zstandard
    except ImportError as exc:
        raise MissingCodecError(
            f"{CODEC_NAMES[codec]} data met but the Python library {exc.name or module!r} is "
            f"missing: {hint}",
            location,
        ) from exc


def _view(data: Any) -> memoryview:
    """A flat byte view of bytes, bytearray, memoryview or a numpy uint8 array, without copying
    when the input is already contiguous."""
    view = memoryview(data)
    if view.ndim != 1 or view.itemsize != 1 or not view.c_contiguous:
        view = memoryview(view.tobytes())
    return view.cast("B") if view.format != "B" else view


def decompress(
    codec: int,
    data: Any,
    *,
    magic: int = 2,
    max_size: int = DEFAULT_MAX_DECOMPRESSED,
    location: Location | None = None,
) -> bytes:
    """Decompress one Kafka compressed payload (a v2 records section or a v0/v1 wrapper value).

    Parameters
    ----------
    codec : int
        Kafka codec id (attributes bits 0-2).
    data : bytes-like or numpy uint8 array
        The compressed bytes.
    magic : int
        Record format of the enclosing batch/message; magic 0 lz4 data carries Kafka's broken
        header checksum, which is then not verified.
    max_size : int
        Largest decompressed size accepted; larger output is an error, never allocated.
    location : Location, optional
        Where the payload sits, carried by any error raised.

    Returns
    -------
    bytes
        The decompressed bytes.

    Raises
    ------
    CompressionError
        Corrupt or truncated data, an unsupported framing option, or output beyond ``max_size``.
    MissingCodecError
        The codec's Python library is not installed.
    """
    sink = Sink()
    decompress_into(sink, codec, data, magic=magic, max_size=max_size, location=location)
    return sink.tobytes()


def decompress_into(sink: Sink, codec: int, data: Any, *, magic: int = 2,
                    max_size: int = DEFAULT_MAX_DECOMPRESSED,
                    location: Location | None = None) -> int:
    """:func:`decompress`, the output appended to ``sink`` (payload after payload, no copy
    through ``bytes``); returns its size. On an error ``sink.size`` is unchanged (bytes past
    it may have been written)."""
    view = _view(data)
    before = sink.size
    if codec == CODEC_NONE:
        if len(view) > max_size:
            raise CompressionError(f"payload of {len(view)} bytes exceeds {max_size}", location)
        sink.append(view)
        return len(view)
    decoder = _DECODERS.get(codec)
    if decoder is None:
        raise CompressionError(f"unknown compression codec id {codec}", location)
    if codec == CODEC_ZSTD and magic < 2:
        raise CompressionError(f"zstd is not valid for record format magic {magic}", location)
    lib = _import_codec(codec, location) if codec != CODEC_GZIP else None
    try:
        decoder(lib, view, magic, max_size, location, sink)
    except (CompressionError, MissingCodecError):
        sink.size = before
        raise
    except Exception as exc:  # any library error on bad input is a corrupt payload
        sink.size = before
        raise CompressionError(
            f"{CODEC_NAMES[codec]} payload does not decompress: {type(exc).__name__}: {exc}",
            location,
        ) from exc
    return sink.size - before


def lz4_block_decoder(location: Location | None = None) -> Callable[[memoryview, Sink], int]:
    """A decoder of one compressed lz4 block of at most 64 KiB (what
    :func:`~.framings.lz4_single_blocks` finds) appended to a sink; returns its size. Errors
    are those :func:`decompress_into` raises for the same frame."""
    _, block_into, _ = _import_codec(CODEC_LZ4, location)

    def decode(block: memoryview, sink: Sink) -> int:
        try:
            n = block_into(block, sink.reserve(LZ4_KAFKA_BLOCK_SIZE),
                           output_len=LZ4_KAFKA_BLOCK_SIZE)
        except Exception as exc:
            raise CompressionError(
                f"lz4 payload does not decompress: {type(exc).__name__}: {exc}") from exc
        sink.commit(n)
        return n

    return decode


def compress(codec: int, data: Any, *, magic: int = 2, level: int | None = None) -> bytes:
    """Compress bytes the way Kafka's Java producer/broker frames them.

    Parameters
    ----------
    codec : int
        Kafka codec id.
    data : bytes-like or numpy uint8 array
        The uncompressed bytes (records section or inner message set).
    magic : int
        Record format of the enclosing batch/message: lz4 for magic 0 is written with Kafka's
        historic header checksum, zstd is refused below magic 2.
    level : int, optional
        Codec level; ``None`` means Kafka's default (gzip 6, lz4 9 = fast compressor, zstd 3).

    Returns
    -------
    bytes
        The compressed payload.

    Raises
    ------
    CompressionError
        Unknown codec, zstd for magic < 2, or a level the library rejects.
    MissingCodecError
        The codec's Python library is not installed.
    """
    view = _view(data)
    if codec == CODEC_NONE:
        return view.tobytes()
    encoder = _ENCODERS.get(codec)
    if encoder is None:
        raise CompressionError(f"unknown compression codec id {codec}")
    if codec == CODEC_ZSTD and magic < 2:
        raise CompressionError(f"zstd is not valid for record format magic {magic}")
    lib = _import_codec(codec) if codec != CODEC_GZIP else None
    try:
        return encoder(lib, view, magic, level)
    except (CompressionError, MissingCodecError):
        raise
    except Exception as exc:
        raise CompressionError(
            f"{CODEC_NAMES[codec]} compression failed: {type(exc).__name__}: {exc}"
        ) from exc

