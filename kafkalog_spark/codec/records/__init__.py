"""Record batches, magic 0, 1 and 2 (codec layer): scan entries, decode them to Arrow columns,
encode Arrow tables to batches, CRCs, key digests and the default partitioner.

May import: the codec base (:mod:`..layout`, :mod:`.._bytes`, :mod:`.._jit`),
:mod:`..compression` and ``errors``. The hot loops are numba kernels over numpy buffers
(:mod:`._decode_kernels`, :mod:`._encode_kernels`); with ``NUMBA_DISABLE_JIT=1`` they run as
plain Python.
"""
