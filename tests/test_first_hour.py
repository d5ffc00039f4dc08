"""What a newcomer meets first: the CLI reference matches the code, every command and option is
explained, a missing or old Java gives one clear line, two Spark sessions start side by side."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click
import pytest

import kafkalog_spark as kl
from kafkalog_spark.cli import cli
from kafkalog_spark.cli.reference import reference_markdown

from test_read_write import records

REPO = Path(__file__).resolve().parents[1]


def test_cli_reference_is_generated_from_the_code() -> None:
    doc = (REPO / "docs" / "cli.md").read_text()
    assert doc == reference_markdown(), (
        "docs/cli.md is out of date: run .venv/bin/python -m kafkalog_spark.cli.reference "
        "> docs/cli.md")
    ctx = click.Context(cli, info_name="kafkalog")
    for name in cli.list_commands(ctx):
        assert f"## `kafkalog {name}`" in doc


def test_every_command_and_option_has_help() -> None:
    ctx = click.Context(cli, info_name="kafkalog")
    names = cli.list_commands(ctx)
    assert set(names) >= {"info", "dump", "verify", "rebuild-index", "recover", "compact",
                          "retain", "migrate"}
    for name in names:
        command = cli.get_command(ctx, name)
        assert (command.help or "").strip(), name
        for param in command.params:
            if isinstance(param, click.Option):
                assert (param.help or "").strip(), f"{name} {param.opts}"


def _cli_without_java(tmp_path: Path, path_dir: Path) -> subprocess.CompletedProcess:
    log_dir = tmp_path / "logs"
    kl.write_log(records(50), log_dir)
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(path_dir)
    code = "import sys; from kafkalog_spark.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, "verify", "--spark", str(log_dir)],
                          env=env, capture_output=True, text=True, timeout=120)


def test_missing_java_is_one_clear_line(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    out = _cli_without_java(tmp_path, empty)
    assert out.returncode == 2, out.stderr
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    assert out.stderr.startswith("Error: Spark needs Java 17 or newer, and none was found")
    assert "JAVA_HOME" in out.stderr and "without Java" in out.stderr


def test_old_java_is_named(tmp_path: Path) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    java = fake / "java"
    java.write_text('#!/bin/sh\necho \'openjdk version "11.0.2" 2019-01-15\' >&2\n')
    java.chmod(0o755)
    out = _cli_without_java(tmp_path, fake)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert f"{java} is Java 11; Spark 17+ is needed" in out.stderr


@pytest.mark.spark
def test_two_sessions_start_side_by_side(tmp_path: Path) -> None:
    """The Spark UI is off (no port 4040 to fight over) and driver ports are picked freely:
    two jobs on one machine start at the same time."""
    code = ("from kafkalog_spark.spark import session\n"
            "s = session('local[1]')\n"
            "assert s.conf.get('spark.ui.enabled') == 'false'\n"
            "print(s.range(5).count())\n")
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-2000:]
        assert out.strip().splitlines()[-1] == "5"
