"""Compression codecs of Kafka's record batches (codec layer, first room).

May import: the codec base (:mod:`..layout`) and ``errors``. :mod:`.codecs` is the registry (a missing library fails
only when its codec is met, with an install hint); :mod:`.framings` the byte framings (xerial
snappy, lz4 frames, Kafka's legacy lz4 header); :mod:`.sink` the growable array decoders
write into (a decode chunk's payloads side by side)."""
