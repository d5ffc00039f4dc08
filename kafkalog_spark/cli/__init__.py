"""Command line (entry-point layer): ``kafkalog`` — a thin click layer over the library.

Each command lives in its own module and registers itself on :data:`main`; library errors
(:class:`~kafkalog_spark.errors.KafkaLogError`) and OS errors (a directory this user may not
list) become clean one-line messages naming the file, with exit code 2, never tracebacks.
"""

from __future__ import annotations

import importlib
import importlib.util
import io
import os
import sys
from pathlib import Path

import click

from ..errors import KafkaLogError
from ..storage import LOCAL

# command name -> module under kafkalog_spark.cli that defines a click command named `command`
# (a command whose module does not exist yet is simply not listed)
COMMANDS = {
    "info": "info",
    "dump": "dump",
    "verify": "verify",
    "rebuild-index": "rebuild_index",
    "recover": "recover",
    "reconcile": "reconcile",
    "compact": "compact",
    "retain": "retain",
    "migrate": "migrate",
    "restore": "restore",
    "erase": "erase",
}


class _LazyGroup(click.Group):
    """Imports a command's module only when that command runs or is listed (``kafkalog
    COMMAND`` loads one command; ``kafkalog --help`` loads all of them, about 0.6 s)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(name for name, mod in COMMANDS.items() if _module_exists(mod))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS or not _module_exists(COMMANDS[name]):
            return None
        module = importlib.import_module(f"{__name__}.{COMMANDS[name]}")
        return module.command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list with each command's whole first sentence (click cuts it to the
        terminal width with "...", which hid what most commands do)."""
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit=400)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def _module_exists(mod: str) -> bool:
    return importlib.util.find_spec(f"{__name__}.{mod}") is not None


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kafkalog_spark")
def cli() -> None:
    """Read, verify and repair Apache Kafka log directories offline."""


def _numba_cache_fallback() -> None:
    """Point numba's cache at a per-user temp folder when it could write neither next to the
    sources (a read-only install) nor under ``$HOME`` (a service user without one): numba then
    fails every cached kernel with "cannot cache function ... no locator available"."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return
    package = LOCAL.resolve(__file__).parents[1] / "codec"
    pycache = package / "__pycache__"
    if LOCAL.writable(pycache if LOCAL.is_dir(pycache) else package):
        return
    home = Path(os.path.expanduser("~"))
    if LOCAL.is_dir(home) and LOCAL.writable(home):
        return  # numba's user-wide cache (~/.cache) works
    # numba's cache files are pickles: only a folder this user alone owns and can write is
    # safe in a shared /tmp (another user could plant one under a guessable name)
    path = os.path.join(LOCAL.temp_root(), f"kafkalog-numba-cache-{os.getuid()}")
    try:
        LOCAL.make_dir(path, mode=0o700)
    except FileExistsError:
        pass
    except OSError:
        return
    st = LOCAL.lstat(path)
    if not (LOCAL.is_dir(path) and not LOCAL.is_symlink(path) and st.st_uid == os.getuid()
            and not st.st_mode & 0o022):
        path = LOCAL.make_temp_dir("kafkalog-numba-cache-")
    os.environ["NUMBA_CACHE_DIR"] = path


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``kafkalog`` script: library and OS errors become one-line messages."""
    _numba_cache_fallback()
    for stream in (sys.stdout, sys.stderr):
        # a directory name that is not UTF-8 (surrogate-escaped by Python) is printed as its
        # bytes, not a UnicodeEncodeError in the middle of a report (the process's own
        # streams only: a caller's replacement stream is left as it is)
        if (stream is sys.__stdout__ or stream is sys.__stderr__) and \
                isinstance(stream, io.TextIOWrapper) and stream.errors == "strict":
            stream.reconfigure(errors="surrogateescape")
    try:
        cli.main(args=argv, prog_name="kafkalog", standalone_mode=False)
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        return 1
    except KafkaLogError as exc:
        click.echo(f"Error: {exc}", err=True)
        return 2
    except BrokenPipeError:
        return 0
    except OSError as exc:  # e.g. a partition dir this user may not list
        where = f" (file {exc.filename})" if exc.filename else ""
        click.echo(f"Error: {exc.strerror or exc}{where}", err=True)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
