"""README.md and docs/ are checked against the code: the command tables (names, arguments,
options), the commands said to show progress, the keyword arguments of the Python examples, the
files they name; and the README stays short (under 8,000 characters) with every old section's
text kept in docs/."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import click
import pytest

import kafkalog_spark as kl
from kafkalog_spark.cli import cli

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()
# the two command tables: the README's short one, and the one with every detail in docs/usage.md
TABLES = ["README.md", "docs/usage.md"]
DOCS = ["README.md"] + sorted(f"docs/{p.name}" for p in (REPO / "docs").glob("*.md"))
# contexts as a real run makes them: click caches a command's help option from the first
# context it sees, and a context without the group's settings would cache plain `--help`
CTX = cli.make_context("kafkalog", [], resilient_parsing=True)


def text(name: str) -> str:
    return (REPO / name).read_text()


def command_rows(doc: str) -> dict[str, tuple[str, str]]:
    """``{command: (arguments as written, rest of the row)}`` from the command table of `doc`."""
    body = text(doc)
    start = body.index("The `kafkalog` command")
    rows = {}
    for line in body[start:].splitlines()[1:]:
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


@pytest.mark.parametrize("doc", TABLES)
def test_the_command_table_lists_every_command_with_its_arguments(doc: str) -> None:
    rows = command_rows(doc)
    assert sorted(rows) == cli.list_commands(CTX)
    for name, (args, _) in rows.items():
        command = cli.get_command(CTX, name)
        usage = command.get_usage(click.Context(command, info_name=name, parent=CTX))
        assert usage.split("[OPTIONS] ", 1)[1] == args, (name, usage)


@pytest.mark.parametrize("doc", TABLES)
def test_every_option_the_table_names_exists(doc: str) -> None:
    for name, (_, row) in command_rows(doc).items():
        named = set(re.findall(r"`(--[a-z][a-z0-9-]*)", row))
        assert named, name
        missing = named - options_of(name)
        assert not missing, f"{doc} names {missing} for `kafkalog {name}`"


@pytest.mark.parametrize("doc", TABLES)
def test_the_commands_said_to_show_progress_have_the_option(doc: str) -> None:
    m = re.search(r"Long jobs \(([^)]*)\) print a progress line", text(doc))
    assert m is not None
    names = re.findall(r"`([a-z-]+)`", m.group(1))
    assert len(names) >= 5
    for name in names:
        assert {"--progress", "--no-progress"} <= options_of(name), name


def test_python_examples_use_real_keywords() -> None:
    calls = 0
    for doc in DOCS:
        for block in re.findall(r"```python\n(.*?)```", text(doc), re.S):
            for fn, args in re.findall(r"\bkl\.(\w+)\(([^)]*)\)", block):
                params = inspect.signature(getattr(kl, fn)).parameters
                for kw in re.findall(r"(\w+)=", args):
                    assert kw in params, f"kl.{fn}({kw}=...) in {doc}"
                    calls += 1
    assert calls >= 4


# --- the short README and where its old sections went (issue 29) ----------------------------

# every section of the README before it was cut short: (heading, the file that holds its text
# now under a heading starting with that name, a phrase of that text)
OLD_SECTIONS = [
    ("Two commands", "README.md", "./dev test"),
    ("Two commands", "docs/usage.md", "it is refreshed when"),
    ("Using it", "docs/usage.md", "Without Spark"),
    ("On a cluster", "docs/cluster.md", "Shipping the package to executors"),
    ("Object storage", "docs/object-storage.md", "Credentials, first that has them"),
    ("When something goes wrong", "docs/troubleshooting.md", "The first command takes seconds"),
    ("Support matrix", "docs/support.md", "Writing the legacy formats is out of scope"),
    ("Layout", "docs/layout.md", "One storage seam"),
    ("Not done yet", "docs/limits.md", "Progress lines of `--spark` runs"),
]
# the package's folders, as docs name their modules without the `kafkalog_spark/` prefix
ROOMS = ("codec/", "storage/", "log/", "inspect/", "datasource/", "recovery/", "retention/",
         "compaction/", "delta/", "cli/")


def test_the_readme_is_short() -> None:
    assert len(README) < 8000, f"README.md has {len(README)} characters; move detail to docs/"


def _slug(heading: str) -> str:
    """A Markdown heading's anchor as GitHub makes it."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(doc: Path) -> set[str]:
    return {_slug(h) for h in re.findall(r"(?m)^#+ (.*)$", doc.read_text())}


@pytest.mark.parametrize("doc", DOCS)
def test_every_markdown_link_to_a_doc_exists(doc: str) -> None:
    here = (REPO / doc).parent
    links = re.findall(r"\]\(([^)#\s]+\.md)(?:#([^)\s]*))?\)", text(doc))
    if doc == "README.md":
        assert len(links) >= 10, "the README links to docs/ for everything else"
    for target, anchor in links:
        path = (here / target).resolve()
        assert path.is_file(), f"{doc} links to {target}, which does not exist"
        if anchor:
            assert anchor in _anchors(path), f"{doc} links to {target}#{anchor}: no such heading"


@pytest.mark.parametrize("doc", DOCS)
def test_every_file_a_doc_names_exists(doc: str) -> None:
    """Paths like `log/swap.py` or `tests/test_restore.py` name files that are there (a module
    moved in a restructuring leaves no stale name behind)."""
    for name in re.findall(r"`([\w./*-]+/[\w./*-]*\.(?:py|md))`", text(doc)):
        where = [name, f"kafkalog_spark/{name}"] if name.startswith(ROOMS) else [name]
        assert any(next(REPO.glob(w), None) for w in where), \
            f"{doc} names {name}, which does not exist"


@pytest.mark.parametrize(("heading", "doc", "phrase"), OLD_SECTIONS)
def test_every_old_readme_section_has_a_home(heading: str, doc: str, phrase: str) -> None:
    body = text(doc)
    assert re.search(rf"(?m)^#+ {re.escape(heading)}", body), f"no heading {heading!r} in {doc}"
    assert phrase in body, f"{doc} lost {phrase!r} of the old README's {heading!r}"
