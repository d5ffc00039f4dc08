"""Command line (entry-point layer): ``kafkalog`` — a thin click layer over the library.

Each command lives in its own module and registers itself on :data:`main`; library errors
(:class:`~kafkalog_spark.errors.KafkaLogError`) become clean one-line messages with exit code 2,
never tracebacks.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys

import click

from ..errors import KafkaLogError

# command name -> module under kafkalog_spark.cli that defines a click command named `command`
# (a command whose module does not exist yet is simply not listed)
COMMANDS = {
    "info": "info",
    "dump": "dump",
    "verify": "verify",
    "rebuild-index": "rebuild_index",
    "recover": "recover",
    "compact": "compact",
    "retain": "retain",
    "migrate": "migrate",
}


class _LazyGroup(click.Group):
    """Imports a command's module only when that command runs (keeps ``--help`` fast)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(name for name, mod in COMMANDS.items() if _module_exists(mod))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS or not _module_exists(COMMANDS[name]):
            return None
        module = importlib.import_module(f"{__name__}.{COMMANDS[name]}")
        return module.command


def _module_exists(mod: str) -> bool:
    return importlib.util.find_spec(f"{__name__}.{mod}") is not None


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kafkalog_spark")
def cli() -> None:
    """Read, verify and repair Apache Kafka log directories offline."""


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``kafkalog`` script: library errors become one-line messages."""
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
