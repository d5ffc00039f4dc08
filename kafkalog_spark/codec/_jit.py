"""numba's ``njit`` for every kernel (codec layer), compiled on first call, ``cache=True`` only
where numba can cache.

Importing numba costs ~0.3-0.5 s, and many processes import the codec without running a
kernel: Spark's planning processes (each data source lookup, schema, read plan, write set-up
and commit runs in a Python process of its own), the CLI's ``--help``, commands that only
list files. So a kernel here is a :class:`Kernel`: numba is imported, and the kernel compiled
or loaded from numba's cache, when it is first called. Before that it compiles the kernels
it calls (its globals, and a module's attributes it names), so numba's typing sees
dispatchers, and puts the dispatchers in their place: later calls from the defining module
go straight to numba.

numba keeps compiled kernels on disk next to a module's source file (or under
``$NUMBA_CACHE_DIR``); for a module imported from a ``.zip`` on ``sys.path`` (Spark's
``--py-files pkg.zip``) a numba with a zip locator (0.68 has one) uses ``~/.cache/numba``.
For anything else — a wheel on ``sys.path`` (``--py-files pkg.whl``), a zip with an older
numba — ``cache=True`` makes numba raise ``RuntimeError: cannot cache function ...: no
locator available``. There this ``njit`` drops ``cache=True``: the kernels still work, but
every new Python process compiles the ones it calls (seconds; on Spark, once per executor
Python worker), and a warning says so once, at import. The package's location is this
module's own: all codec modules are imported from the same place.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import types
import zipimport
from collections.abc import Callable, Iterator, Mapping
from importlib.machinery import SourceFileLoader
from typing import Any

log = logging.getLogger(__name__)


def cacheable(spec) -> bool:
    """Whether numba can cache kernels of a module imported with ``spec``: a source file, or a
    ``.zip`` archive when this numba has a locator for zips."""
    loader = getattr(spec, "loader", None)
    if isinstance(loader, SourceFileLoader):
        return True
    if isinstance(loader, zipimport.zipimporter):
        from numba.core import caching

        return hasattr(caching, "ZipCacheLocator") and loader.archive.endswith(".zip")
    return False


def jit_disabled() -> bool:
    """numba's ``NUMBA_DISABLE_JIT`` (kernels run as Python), read without importing numba
    when the environment says it."""
    if "NUMBA_DISABLE_JIT" in os.environ:
        return os.environ["NUMBA_DISABLE_JIT"].strip() not in ("", "0")
    from numba import config  # a .numba_config.yaml may set it

    return bool(config.DISABLE_JIT)


CACHEABLE = cacheable(__spec__)
if not CACHEABLE and not jit_disabled():
    log.warning("kafkalog_spark is imported from %s, where numba cannot cache compiled kernels: "
                "each Python process compiles them on first use. Install the package where "
                "executors run, ship a packed virtualenv (--archives), or put a .zip (not a "
                "wheel) in --py-files", getattr(__spec__, "origin", None))

_COMPILING = threading.RLock()  # one compile at a time (a kernel compiles its callees first)


class Kernel:
    """A function compiled by ``numba.njit(**options)`` on its first call (see the module
    docstring). ``bind`` names globals of the function made at that time, by a function of no
    arguments (a numba intrinsic, which needs numba to exist)."""

    def __init__(self, py_func: Callable[..., Any], options: Mapping[str, Any],
                 bind: Mapping[str, Callable[[], Any]]) -> None:
        functools.update_wrapper(self, py_func)
        self.py_func = py_func
        self._options = dict(options)
        self._bind = dict(bind)
        self._dispatcher: Any = None

    def dispatcher(self) -> Any:
        """numba's dispatcher of this kernel (compiled, or loaded from the cache, once)."""
        if self._dispatcher is None:
            with _COMPILING:
                if self._dispatcher is None:
                    self._dispatcher = self._compile()
        return self._dispatcher

    def _compile(self) -> Any:
        import numba

        scope = self.py_func.__globals__
        for name, make in self._bind.items():
            scope[name] = make()
        names = set(_global_names(self.py_func.__code__))
        for name in names:
            value = scope.get(name)
            if isinstance(value, Kernel):
                scope[name] = value.dispatcher()
            elif isinstance(value, types.ModuleType):  # module.kernel inside a kernel
                for attr in names:
                    inner = vars(value).get(attr)
                    if isinstance(inner, Kernel):
                        setattr(value, attr, inner.dispatcher())
        dispatcher = numba.njit(**self._options)(self.py_func)
        if scope.get(self.__name__) is self:
            scope[self.__name__] = dispatcher
        return dispatcher

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.dispatcher()(*args, **kwargs)

    def __repr__(self) -> str:
        state = "compiled" if self._dispatcher is not None else "not compiled yet"
        return f"<kernel {self.__module__}.{self.__qualname__}, {state}>"


def _global_names(code: types.CodeType) -> Iterator[str]:
    """The global (and attribute) names ``code`` and the functions defined in it use."""
    yield from code.co_names
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _global_names(const)


def njit(*, cache: bool = False, bind: Mapping[str, Callable[[], Any]] | None = None,
         **options: Any) -> Callable[[Callable[..., Any]], Kernel]:
    """``numba.njit(**options)`` as a decorator, compiled on first call (:class:`Kernel`);
    ``cache`` honoured only where :data:`CACHEABLE`."""
    options["cache"] = cache and CACHEABLE

    def decorate(py_func: Callable[..., Any]) -> Kernel:
        return Kernel(py_func, options, bind or {})

    return decorate
