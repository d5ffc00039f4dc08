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

## Rules every command follows

**What a path must hold.** Every command refuses what `read_log` refuses, with exit code 2
and one line saying why, never a run that does nothing and reports success:

* a folder with no Kafka data (empty, or neither a log dir nor partition dirs nor segments):
  `Error: no Kafka data here: ...`, naming what the folder holds; a `.log` outside a
  `<topic>-<partition>` folder that does not start with a Kafka record batch or message is no
  Kafka data either (`info` lists no partition for it);
* a `--topic` (or `--topic-pattern`) that is not there: `Error: topic(s) ... not found in ...;
  topics there: ...` (`restore`: the topics of the table);
* corrupt data a command reads (`migrate`, `erase`, `compact`, `dump`): the typed error of the
  first bad entry, naming file and byte position. `verify` reports damage (exit 1) and
  `recover` repairs it: damage is their input, not an error;
* `.log` files outside a `<topic>-<partition>` folder: `migrate` and `erase` need the folder
  name for the topic and partition; `info`, `verify`, `dump` and `rebuild-index` take them.

**When a command writes.**

* Commands that change an existing log dir or table in place — `compact`, `retain`,
  `recover`, `rebuild-index`, `erase` — and `reconcile` (a repair that writes a new log dir)
  only plan unless `--execute`. (`erase --dry-run` is accepted and is the same plan.)
* Commands that create new output — `migrate` (Delta tables) and `restore` (a log dir) — write
  unless `--dry-run`; a second run adds only what is new, and says `up to date` when nothing
  is.
* `info`, `dump` and `verify` never change a byte.

**Exit codes.**

| exit | meaning |
|---|---|
| 0 | done, or nothing to do (a plan that would change nothing; `up to date`) |
| 1 | a plan (`--dry-run`, or no `--execute`) that would change something; `verify` found a problem; `erase --check` found matching records |
| 2 | an error: bad path or option, no Kafka data, a topic that is not there, corrupt data a command reads (a `dump` that could not dump a file), a log dir a broker holds; one line `Error: ...` naming the file, byte position and base offset where there is one |

The spark-submit jobs (`jobs/*.py`) take the same flags and exit with the same codes.
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
