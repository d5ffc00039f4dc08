"""README.md is checked against the code: its command table (names, arguments, options), the
commands it says show progress, and the keyword arguments of its Python examples."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import click

import kafkalog_spark as kl
from kafkalog_spark.cli import cli

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()
# contexts as a real run makes them: click caches a command's help option from the first
# context it sees, and a context without the group's settings would cache plain `--help`
CTX = cli.make_context("kafkalog", [], resilient_parsing=True)


def command_rows() -> dict[str, tuple[str, str]]:
    """``{command: (arguments as written, rest of the row)}`` from the command table."""
    start = README.index("The `kafkalog` command")
    rows = {}
    for line in README[start:].splitlines()[1:]:
        m = re.match(r"^\| `([a-z-]+) ?([^`]*)` \| (.*) \|$", line)
        if m:
            rows[m.group(1)] = (m.group(2), m.group(3))
        elif rows and not line.startswith("|"):
            break
    return rows


def options_of(name: str) -> set[str]:
    command = cli.get_command(CTX, name)
    return {o for p in command.params if isinstance(p, click.Option)
            for o in p.opts + p.secondary_opts}


def test_the_command_table_lists_every_command_with_its_arguments() -> None:
    rows = command_rows()
    assert sorted(rows) == cli.list_commands(CTX)
    for name, (args, _) in rows.items():
        command = cli.get_command(CTX, name)
        usage = command.get_usage(click.Context(command, info_name=name, parent=CTX))
        assert usage.split("[OPTIONS] ", 1)[1] == args, (name, usage)


def test_every_option_the_table_names_exists() -> None:
    for name, (_, text) in command_rows().items():
        named = set(re.findall(r"`(--[a-z][a-z0-9-]*)", text))
        assert named, name
        missing = named - options_of(name)
        assert not missing, f"README names {missing} for `kafkalog {name}`"


def test_the_commands_said_to_show_progress_have_the_option() -> None:
    m = re.search(r"Long jobs \(([^)]*)\) print a progress line", README)
    assert m is not None
    names = re.findall(r"`([a-z-]+)`", m.group(1))
    assert len(names) >= 5
    for name in names:
        assert {"--progress", "--no-progress"} <= options_of(name), name


def test_python_examples_use_real_keywords() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README, re.S)
    calls = 0
    for block in blocks:
        for fn, args in re.findall(r"\bkl\.(\w+)\(([^)]*)\)", block):
            params = inspect.signature(getattr(kl, fn)).parameters
            for kw in re.findall(r"(\w+)=", args):
                assert kw in params, f"kl.{fn}({kw}=...) in README.md"
                calls += 1
    assert calls >= 4
