"""Transitional alias (log layer): :func:`mapped_file` now lives in :mod:`.storage`."""

from .storage import READ_BELOW_BYTES, mapped_file  # noqa: F401  # re-exported until importers move
