"""CLI reference (entry-point layer): ``docs/cli.md`` generated from the click commands, so the
documented options are the ones the code has.

    .venv/bin/python -m kafkalog_spark.cli.reference > docs/cli.md

``tests/test_first_hour.py`` fails when ``docs/cli.md`` differs from what this prints.
"""

from __future__ import annotations

import inspect

import click

from . import cli

HEADER = """# `kafkalog` command reference

Generated from the code by `python -m kafkalog_spark.cli.reference > docs/cli.md`; a test
fails when this file is out of date. Every command also answers `kafkalog <command> --help`.
Library errors print one line `Error: ...` (naming file, byte position and base offset where
there is one) and exit with code 2; usage errors exit 2; `verify` exits 1 when it finds a
problem; dry runs of `compact`, `retain` and `recover` exit 1 when they would change something.
"""


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _param_row(ctx: click.Context, param: click.Parameter) -> str:
    if isinstance(param, click.Argument):
        name = f"`{param.human_readable_name}`" + (" …" if param.nargs == -1 else "")
        return f"| {name} | argument{'' if param.required else ', optional'} | |"
    assert isinstance(param, click.Option)
    names = ", ".join(f"`{n}`" for n in param.opts + param.secondary_opts)
    record = param.get_help_record(ctx)
    help_text = record[1] if record else ""
    if param.is_flag:
        kind = "flag"
    elif isinstance(param.type, click.Choice):
        kind = " or ".join(f"`{c}`" for c in param.type.choices)
    else:
        kind = param.metavar or param.type.name.upper()
    if param.multiple:
        kind += ", repeatable"
    return f"| {names} | {_cell(kind)} | {_cell(help_text)} |"


def _group_context() -> click.Context:
    """The group's context as a real run makes it (its settings, e.g. ``-h`` for help, are what
    the commands inherit; click caches a command's help option from the first context)."""
    return cli.make_context("kafkalog", [], resilient_parsing=True)


def command_markdown(name: str, command: click.Command) -> str:
    """One command's section: usage, its help text, and a table of its parameters."""
    ctx = click.Context(command, info_name=name, parent=_group_context())
    lines = [f"## `kafkalog {name}`", "", "```", command.get_usage(ctx), "```", ""]
    lines += [inspect.cleandoc(command.help or ""), ""]
    params = [p for p in command.get_params(ctx) if p.name != "help"]
    lines += ["| parameter | kind | help |", "|---|---|---|"]
    lines += [_param_row(ctx, p) for p in params]
    return "\n".join(lines) + "\n"


def reference_markdown() -> str:
    """The whole reference: the group's help, then every command in name order."""
    ctx = _group_context()
    parts = [HEADER, (cli.help or "").strip() + "\n"]
    for name in cli.list_commands(ctx):
        parts.append(command_markdown(name, cli.get_command(ctx, name)))
    return "\n".join(parts)


if __name__ == "__main__":
    click.echo(reference_markdown(), nl=False)
