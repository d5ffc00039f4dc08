"""numba's ``njit`` for every kernel (codec layer): ``cache=True`` only where numba can cache.

numba keeps compiled kernels on disk next to a module's source file (or under
``$NUMBA_CACHE_DIR``); for a module imported from a ``.zip`` on ``sys.path`` (Spark's
``--py-files pkg.zip``) a numba with a zip locator (0.68 has one) uses ``~/.cache/numba``. For anything else — a
wheel on ``sys.path`` (``--py-files pkg.whl``), a zip with an older numba — ``cache=True``
makes numba raise ``RuntimeError: cannot cache function ...: no locator available`` when the
module is imported. There this ``njit`` drops ``cache=True``: the kernels still work, but every
new Python process compiles the ones it calls (seconds; on Spark, once per executor Python
worker), and a warning says so once. The package's location is this module's own: all codec
modules are imported from the same place.
"""

from __future__ import annotations

import logging
import zipimport
from importlib.machinery import SourceFileLoader

import numba
from numba.core import caching

log = logging.getLogger(__name__)


def cacheable(spec) -> bool:
    """Whether numba can cache kernels of a module imported with ``spec``: a source file, or a
    ``.zip`` archive when this numba has a locator for zips."""
    loader = getattr(spec, "loader", None)
    if isinstance(loader, SourceFileLoader):
        return True
    if isinstance(loader, zipimport.zipimporter):
        return hasattr(caching, "ZipCacheLocator") and loader.archive.endswith(".zip")
    return False


CACHEABLE = cacheable(__spec__)
if not CACHEABLE and not numba.config.DISABLE_JIT:
    log.warning("kafkalog_spark is imported from %s, where numba cannot cache compiled kernels: "
                "each Python process compiles them on first use. Install the package where "
                "executors run, ship a packed virtualenv (--archives), or put a .zip (not a "
                "wheel) in --py-files", getattr(__spec__, "origin", None))


def njit(*args, cache: bool = False, **kwargs):
    """``numba.njit`` with ``cache`` honoured only where :data:`CACHEABLE`."""
    return numba.njit(*args, cache=cache and CACHEABLE, **kwargs)
