"""The package's structure rules, checked on its syntax trees (nothing is imported or run).

1. One storage seam: no module but ``storage/local.py`` (+ ``storage/posix.py``) and its object
   stores (``storage/remote*.py``) touches a file system itself (``open``, ``os``/``os.path`` file calls, ``mmap``, ``shutil``, ``glob``,
   ``tempfile``, ``fcntl``, ``pathlib`` I/O methods, pyarrow reading or writing a path without
   the storage's ``filesystem=``).
2. Rooms point one way (docs/layout.md): errors <- codec (base <- compression, internal <-
   records <- files) <- storage <- tiered <- log <- (inspect, datasource, spark) <- (compaction,
   retention, recovery, delta) <- report <- (cli, jobs); no import upwards, none sideways but
   the edges of ``SIDEWAYS_ALLOWED``; every room's ``__init__`` says its layer and what it may
   import; no import circles between modules (function-level imports included).
3. Every module opens with a docstring and no module is over 400 lines (kernel files: 500).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "kafkalog_spark"
SEAM = tuple(PACKAGE / "storage" / f for f in ("local.py", "posix.py", "remote.py",
                                               "remote_reads.py", "remote_io.py"))


def _sources() -> list[Path]:
    files = sorted(PACKAGE.rglob("*.py")) + sorted((ROOT / "jobs").glob("*.py"))
    return files + sorted((ROOT / "pyspark_kafkalog").glob("*.py"))


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


# --- 1. the storage seam ---------------------------------------------------------------------

_OS_FS = {
    "open", "close", "read", "write", "replace", "rename", "renames", "listdir", "scandir",
    "stat", "lstat", "fstat", "fsync", "fdatasync", "remove", "unlink", "removedirs", "rmdir",
    "makedirs", "mkdir", "walk", "fwalk", "link", "symlink", "readlink", "utime", "truncate",
    "ftruncate", "chmod", "chown", "access", "mkfifo", "sendfile",
}
_OS_PATH_FS = {"exists", "lexists", "isdir", "isfile", "islink", "ismount", "getsize",
               "getmtime", "getctime", "getatime", "realpath", "samefile"}
_MODULES_FS = {"mmap", "shutil", "glob", "tempfile", "fcntl"}
_MODULE_ALLOWED = {("shutil", "which")}  # looks a program up on PATH; reads no file
# methods of pathlib.Path that touch the file system and that neither str nor os.DirEntry has
_PATH_ONLY = {"iterdir", "read_bytes", "write_bytes", "read_text", "write_text", "unlink",
              "mkdir", "rmdir", "touch", "exists", "lstat", "glob", "rglob", "resolve",
              "samefile", "chmod", "lchmod", "symlink_to", "hardlink_to", "readlink", "open"}
# methods shared by Path and the os.DirEntry objects storage.scandir yields: allowed only on
# a listing entry (a name bound by iterating a scandir, or one of the names below)
_ENTRY_METHODS = {"is_file", "is_dir", "is_symlink", "stat"}
_ENTRY_NAMES = {"entry", "e"}
# pyarrow functions that open a path themselves unless given the storage's filesystem
_ARROW_PATH = {"read_table", "read_metadata", "read_schema", "ParquetWriter", "ParquetFile",
               "write_table", "memory_map", "OSFile", "ParquetDataset", "dataset"}


def _entry_names(tree: ast.AST) -> set[str]:
    """Names bound by iterating a listing: ``for x in it`` / ``for x in <...>.scandir(...)``."""
    names = set(_ENTRY_NAMES)
    for node in ast.walk(tree):
        if isinstance(node, (ast.For, ast.comprehension)) and isinstance(node.target, ast.Name):
            it = node.iter
            if isinstance(it, ast.Name) and it.id == "it" or isinstance(it, ast.Call) and \
                    isinstance(it.func, ast.Attribute) and it.func.attr == "scandir":
                names.add(node.target.id)
    return names


def _fs_calls(path: Path, name: str | None = None) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    name = name or _rel(path)
    loop_names = _entry_names(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        where = f"{name}:{node.lineno}"
        if isinstance(f, ast.Name) and f.id == "open":
            found.append(f"{where} open()")
            continue
        if not isinstance(f, ast.Attribute):
            continue
        recv = f.value
        if isinstance(recv, ast.Name):
            if recv.id == "os" and f.attr in _OS_FS:
                found.append(f"{where} os.{f.attr}()")
            elif recv.id in _MODULES_FS and (recv.id, f.attr) not in _MODULE_ALLOWED:
                found.append(f"{where} {recv.id}.{f.attr}()")
            elif recv.id in ("pq", "pa", "ds", "parquet") and f.attr in _ARROW_PATH and \
                    not any(k.arg == "filesystem" for k in node.keywords):
                found.append(f"{where} {recv.id}.{f.attr}() without filesystem=")
        if isinstance(recv, ast.Attribute) and isinstance(recv.value, ast.Name) and \
                recv.value.id == "os" and recv.attr == "path" and f.attr in _OS_PATH_FS:
            found.append(f"{where} os.path.{f.attr}()")
            continue
        if _is_storage_call(recv) or isinstance(recv, ast.Name) and \
                recv.id in _MODULES_FS | {"os"}:
            continue  # a storage method, or a module function judged above
        if f.attr in _PATH_ONLY:
            found.append(f"{where} .{f.attr}()")
        elif f.attr in ("rename", "replace") and len(node.args) == 1 and not node.keywords:
            found.append(f"{where} .{f.attr}(path)")
        elif f.attr in _ENTRY_METHODS and not node.args:
            ok = isinstance(recv, ast.Name) and recv.id in loop_names or \
                isinstance(recv, ast.Subscript) and isinstance(recv.value, ast.Name) and \
                recv.value.id == "entries"
            if not ok:
                found.append(f"{where} .{f.attr}()")
    return found


def _is_storage_call(node: ast.AST) -> bool:
    """``storage_for(x)``, ``fs``, ``LOCAL``, ``self.fs``: a storage object as receiver."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return node.func.id == "storage_for"
    if isinstance(node, ast.Name):
        return node.id in ("fs", "LOCAL", "storage")
    if isinstance(node, ast.Attribute):
        return node.attr in ("fs", "storage")
    return False


def test_no_file_access_outside_the_storage_seam():
    offenders = [line for p in _sources() if p not in SEAM for line in _fs_calls(p)]
    assert not offenders, "direct file-system calls outside the storage seam:\n" + \
        "\n".join(offenders)


def test_the_checker_finds_direct_file_access(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import os, shutil\nfrom pathlib import Path\n"
                   "def f(p):\n    open(p)\n    os.replace(p, p)\n    shutil.rmtree(p)\n"
                   "    Path(p).read_bytes()\n    Path(p).is_dir()\n    os.path.exists(p)\n"
                   "    Path(p).replace(p)\n    pq.read_table(p)\n")
    found = _fs_calls(bad, "bad.py")
    kinds = " ".join(found)
    for what in ("open()", "os.replace()", "shutil.rmtree()", ".read_bytes()", ".is_dir()",
                 "os.path.exists()", ".replace(path)", "pq.read_table()"):
        assert what in kinds, (what, found)


# --- 2. layers and circles ------------------------------------------------------------------

# Floors, lowest first: a room imports only from its own room or a lower floor (README "Layout",
# docs/layout.md). The codec's sub-rooms have floors of their own: its base (layout, _bytes,
# _jit) <- compression and internal topics <- records <- file formats.
FLOOR = {
    "errors": 0,
    "codec": 1, "codec.compression": 1.1, "codec.internal": 1.1, "codec.records": 1.2,
    "codec.files": 1.3,
    "storage": 2,
    # the remote tier of tiered storage: plugin layouts and __remote_log_metadata over the
    # storage seam; the log model joins its segments to the local ones (tiered/__init__.py)
    "tiered": 2.5,
    "log": 3,
    "spark_daemon": 3.5,  # the session's worker daemon: below the session helper
    "inspect": 4, "datasource": 4, "spark": 4,
    "compaction": 5, "retention": 5, "recovery": 5, "delta": 5,
    "report": 6,
    "cli": 7, "jobs": 7, "warmup": 7, "daemon": 7, "__init__": 7, "__main__": 7,
}
SIDEWAYS_ALLOWED = {
    # the session helper registers the data source it configures Spark for
    ("spark", "datasource"),
    # Kafka's cleaner runs retention for cleanup.policy=compact,delete logs itself
    # (LogCleaner's deletableLogs -> deleteOldSegments): compaction calls retention
    ("compaction", "retention"),
    # a restore writes segments and then lets recovery rebuild every derived file (indexes,
    # transaction indexes, producer snapshots, leader epochs), as a broker's load would
    ("delta", "recovery"),
    # erasing from the lake selects rows with the log dirs' erase matchers (one SQL engine and
    # one key test for both copies) and one run covers both
    ("delta", "compaction"),
}


def _room(module: str) -> str:
    """The room of a dotted module of the package (``codec.records``, ``log``, ``jobs``...)."""
    parts = module.split(".")[1:]
    if not parts:
        return "__init__"
    if parts[0] == "codec" and len(parts) > 2:
        return f"codec.{parts[1]}"
    return parts[0]


def _module_of(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    if rel.parts[0] in ("jobs", "pyspark_kafkalog"):
        return "kafkalog_spark.jobs"  # entry points: may import anything below them
    name = ".".join(rel.parts)
    return name.removesuffix(".__init__")


def _imports(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` of every package module ``path`` imports — at module level, inside
    functions and under ``TYPE_CHECKING`` alike; ``from pkg import name`` counts as an import of
    ``pkg.name`` when that is a module."""
    tree = ast.parse(path.read_text(), str(path))
    mod = _module_of(path)
    package = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
    out = []
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join(base + (node.module.split(".") if node.module else []))
            else:
                target = node.module or ""
            subs = [f"{target}.{a.name}" for a in node.names]
            targets = [s if s in MODULES else target for s in subs]
        elif isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        out += [(node.lineno, t) for t in dict.fromkeys(targets) if t in MODULES]
    return out


MODULES = {_module_of(p) for p in PACKAGE.rglob("*.py")}


def test_layers_point_one_way():
    problems = []
    for p in _sources():
        mine = _room(_module_of(p))
        for line, other_module in _imports(p):
            other = _room(other_module)
            if other == mine or (mine, other) in SIDEWAYS_ALLOWED:
                continue
            if FLOOR.get(other) is None or FLOOR.get(mine) is None:
                problems.append(f"{_rel(p)}:{line} imports {other_module}: {mine} or {other} "
                                "has no floor in tests/test_layers.py")
            elif FLOOR[other] > FLOOR[mine]:
                problems.append(f"{_rel(p)}:{line} ({mine}) imports upwards: {other_module}")
            elif FLOOR[other] == FLOOR[mine]:
                problems.append(f"{_rel(p)}:{line} ({mine}) imports sideways: {other_module}")
    assert not problems, "\n".join(problems)


def test_every_room_says_its_layer_and_what_it_may_import():
    for init in sorted(PACKAGE.rglob("__init__.py")):
        if init.parent in (PACKAGE, PACKAGE / "cli"):
            continue  # the public API, and the command line's registry
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        room = _rel(init.parent)
        assert "layer" in doc.split("\n\n")[0], f"{room}/__init__.py names no layer"
        assert "import" in doc, f"{room}/__init__.py does not say what the room may import"


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        m = stack.pop()
                        on_stack.discard(m)
                        comp.append(m)
                        if m == node:
                            break
                    if len(comp) > 1:
                        found.append(sorted(comp))
    return found


def _import_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for p in PACKAGE.rglob("*.py"):
        graph.setdefault(_module_of(p), set()).update(
            m for _, m in _imports(p) if m != _module_of(p))
    return graph


def test_no_import_circles():
    """No two modules import each other, directly or around a ring — function-level and
    ``TYPE_CHECKING`` imports included: a circle means neither can be read, tested or changed
    alone."""
    circles = _circles(_import_graph())
    assert not circles, "import circles:\n" + "\n".join(" <-> ".join(c) for c in circles)


def test_the_circle_finder_finds_a_ring():
    ring = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _circles(ring) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


# --- 3. modules ------------------------------------------------------------------------------

@pytest.mark.parametrize("path", _sources(), ids=_rel)
def test_module_opens_with_a_docstring_and_stays_small(path):
    text = path.read_text()
    tree = ast.parse(text, str(path))
    doc = ast.get_docstring(tree)
    if path.name == "__init__.py" and not text.strip():
        return  # an empty package marker
    assert doc, f"{_rel(path)} has no module docstring"
    summary = doc.split("\n\n")[0]
    assert len(summary.splitlines()) <= 3, f"{_rel(path)}: the docstring's summary is over 3 lines"
    if path != PACKAGE / "__init__.py":  # the package root is the public API itself
        assert "layer" in summary, f"{_rel(path)}: the docstring's summary names no layer"
    lines = len(text.splitlines())
    limit = 500 if path.name.endswith("_kernels.py") else 410  # "~400": one cohesive thing
    assert lines <= limit, f"{_rel(path)} has {lines} lines"
