"""Shared option bundles (entry-point layer) for the maintenance commands (compact, retain), the
topic-config options ``kafkalog info`` shares with them, and the check of named files.

One definition of the options every command takes, so their names, help texts and parsing
cannot drift apart (``--config`` is parsed by :func:`kafkalog_spark.report.parse_config_options`,
which the spark-submit jobs share).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from ..errors import InvalidOptionError
from ..log.partition_state import HIGH_WATERMARK_SOURCES
from ..storage import as_path, storage_for
from ..storage.options import normalize_options
from ..storage.paths import is_remote


class PathOrURI(click.ParamType):
    """A local path (checked as ``click.Path`` checks it) or an object-store URI (``s3://``,
    ``gs://``, ``abfs[s]://``: checked when it is read, with the ``--storage-option`` values)."""

    name = "path"

    def __init__(self, *, exists: bool = False, file_okay: bool = True,
                 dir_okay: bool = True) -> None:
        self._local = click.Path(exists=exists, file_okay=file_okay, dir_okay=dir_okay)

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        if is_remote(value):
            return str(value)
        return self._local.convert(value, param, ctx)


def parse_storage_options(ctx: Any, param: Any, values: tuple[str, ...]
                          ) -> dict[str, str] | None:
    """The click callback of ``--storage-option``-like options: ``NAME=VALUE`` pairs,
    normalised (``log.object_options``)."""
    pairs = {}
    for item in values:
        name, eq, value = item.partition("=")
        if not eq:
            raise click.BadParameter(f"{item!r} is not NAME=VALUE", param=param)
        pairs[name] = value
    try:
        return normalize_options(pairs) if pairs else None
    except InvalidOptionError as exc:
        raise click.BadParameter(str(exc), param=param) from None


def storage_option(fn: Any) -> Any:
    """``--storage-option NAME=VALUE`` (repeatable), parsed into ``storage_options``."""
    return click.option(
        "--storage-option", "storage_options", multiple=True, metavar="NAME=VALUE",
        callback=parse_storage_options,
        help="Object-store option for s3:// gs:// abfss:// paths (delta-rs names: endpoint, "
             "region, allow_http, access_key_id, secret_access_key, account_name, ...); unset "
             "ones come from the store's provider chain (environment, profile, role).")(fn)


def _apply(decorators: list[Callable[[Any], Any]]) -> Callable[[Any], Any]:
    def apply(fn: Any) -> Any:
        for decorator in reversed(decorators):
            fn = decorator(fn)
        return fn

    return apply


def _config_decorators(config_example: str) -> list[Callable[[Any], Any]]:
    return [
        click.option("--config", "configs", multiple=True, metavar="NAME=VALUE",
                     help=f"Topic config override for every topic, e.g. {config_example}."),
        click.option("--config-file", type=click.Path(exists=True, dir_okay=False),
                     help="JSON ({topic: {name: value}} or flat) or .properties topic configs."),
    ]


def config_options(config_example: str) -> Callable[[Any], Any]:
    """``--config NAME=VALUE`` (repeatable) and ``--config-file``: topic config overrides
    (parse ``--config`` with :func:`kafkalog_spark.report.parse_config_options`)."""
    return _apply(_config_decorators(config_example))


def maintenance_options(config_example: str) -> Callable[[Any], Any]:
    """``LOG_DIRS...``, ``--execute``, ``--now``, ``--config``, ``--config-file``, ``--topic``,
    ``--high-watermark``;
    ``config_example`` shows a typical ``--config`` override in the help text."""
    return _apply([
        click.argument("log_dirs", nargs=-1, required=True,
                       type=PathOrURI(exists=True, file_okay=False)),
        click.option("--execute", is_flag=True,
                     help="Change the disk (default: dry run, only plan)."),
        click.option("--now", "now_ms", type=int, help="Current time in ms (reproducible runs)."),
        *_config_decorators(config_example),
        click.option("--topic", "topics", multiple=True, help="Only these topics."),
        click.option("--high-watermark", type=click.Choice(HIGH_WATERMARK_SOURCES),
                     default="checkpoint", show_default=True,
                     help="Where the high watermark comes from: replication-offset-checkpoint "
                          "(Kafka's rule: without an entry nothing is cleanable or deletable), "
                          "or the log end offset - only for a copied log dir that no broker "
                          "will load again."),
    ])


def remote_tier_options(fn: Any) -> Any:
    """``--remote-tier URI`` and ``--remote-tier-layout``: tiered storage's remote tier read
    beside the log dirs (``remote_tier`` / ``remote_tier_layout``, turned into a tier by
    :func:`kafkalog_spark.tiered.tier.as_remote_tier`)."""
    from ..tiered.tier import LAYOUTS

    return _apply([
        click.option("--remote-tier", metavar="URI", default=None,
                     help="Tiered storage: the remote tier's folder or bucket URI (for "
                          "LocalTieredStorage its rsm.config.dir); each partition's remote "
                          "segments come before its local ones, each offset once."),
        click.option("--remote-tier-layout", type=click.Choice(LAYOUTS), default=None,
                     help="The remote tier's layout [default: local-tiered-storage]."),
        click.option("--remote-tier-private-key", "remote_tier_private_key", multiple=True,
                     metavar="PEM", help="RSA private key file of encrypted aiven segments "
                     "(repeatable; read when needed, never printed)."),
    ])(fn)


def refuse_remote_tier(command: str) -> Callable[[Any], Any]:
    """``--remote-tier`` / ``--remote-tier-layout`` on a maintenance command: refused with one
    line saying why (the broker owns the remote tier)."""
    def refuse(ctx: Any, param: Any, value: Any) -> None:
        if value is not None:
            raise InvalidOptionError(
                f"{command} does not change a remote tier: the broker owns it (its "
                "RemoteLogManager copies segments there and deletes them by retention); "
                f"{command} changes the local log dirs of a stopped broker only - run it "
                "without --remote-tier")

    return _apply([click.option(name, expose_value=False, callback=refuse, default=None,
                                metavar="URI", help=f"Refused: {command} never changes a "
                                "remote tier (tiered storage); the broker owns it.")
                   for name in ("--remote-tier", "--remote-tier-layout",
                                "--remote-tier-private-key")])


def refuse_symlinked_files(paths: tuple[str, ...] | list[str], *,
                           allow_named_link: bool = False) -> None:
    """Refuse a named segment file that is a symlink, or whose segment siblings are symlinks
    leading out of its folder.

    Log dirs and partition dirs are checked by discovery; a single named file is taken with its
    ``.log``/``.index``/``.timeindex``/``.txnindex`` siblings, which a planted symlink could
    point anywhere (``rebuild-index --execute`` would then write into the link's target
    folder, ``dump`` of an index would read the target as the log).

    Parameters
    ----------
    paths : sequence of str
        The command's path arguments; directories are skipped.
    allow_named_link : bool
        Accept a named file that is itself a symlink (``dump``, read-only, takes files as
        ``kafka-dump-log.sh`` does); its siblings are still checked.
    """
    from ..errors import Location, LogDirError

    for item in paths:
        if is_remote(item):
            continue  # object stores have no symlinks
        path = as_path(item)
        fs = storage_for(path)
        stem, dot, kind = path.name.partition(".")
        if fs.is_dir(path) or not dot or not stem.isdigit():
            continue
        if fs.is_symlink(path) and not allow_named_link:
            raise LogDirError(f"the named .{kind} is a symlink; name the file it points to",
                              Location(file=str(path)))
        folder = fs.resolve(path.parent)
        for suffix in (".log", ".index", ".timeindex", ".txnindex"):
            sibling = path.parent / (stem + suffix)
            if sibling.name == path.name:
                continue
            if fs.is_symlink(sibling) and not fs.resolve(sibling).is_relative_to(folder):
                raise LogDirError(f"symlink leads outside {folder} to {fs.resolve(sibling)}; "
                                  "refusing to follow it", Location(file=str(sibling)))
