"""The package's structure rules, checked on its syntax trees (nothing is imported or run).

1. One storage seam: no module but ``log/storage.py`` and its object stores
   (``log/object_store.py``) touches a file system itself (``open``, ``os``/``os.path`` file calls, ``mmap``, ``shutil``, ``glob``,
   ``tempfile``, ``fcntl``, ``pathlib`` I/O methods, pyarrow reading or writing a path without
   the storage's ``filesystem=``).
2. Layers point one way (README "Layout"): errors <- codec <- log <- (datasource, spark) <-
   (compaction, retention, recovery, delta) <- report <- (cli, jobs); no import upwards and none
   sideways between the maintenance jobs but the edges of ``BUILDS_ON``.
3. Every module opens with a docstring and no module is over 500 lines.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "kafkalog_spark"
SEAM = (PACKAGE / "log" / "storage.py", PACKAGE / "log" / "object_store.py",
        PACKAGE / "log" / "object_io.py")


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
    assert not offenders, "direct file-system calls outside log/storage.py:\n" + \
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


# --- 2. layers -------------------------------------------------------------------------------

LAYER = {
    "errors": 0,
    "codec": 1,
    "log": 2,
    "datasource": 3, "spark": 3,
    "compaction": 4, "retention": 4, "recovery": 4, "delta": 4,
    "report": 5,
    "cli": 6, "jobs": 6, "warmup": 6, "__init__": 6, "__main__": 6,
}
SIDEWAYS_FORBIDDEN = {"compaction", "retention", "recovery", "delta", "cli", "jobs"}
# the edges inside the maintenance layer, each mirroring the thing it models
BUILDS_ON = {
    # Kafka's cleaner runs retention for cleanup.policy=compact,delete logs itself
    # (LogCleaner's deletableLogs -> deleteOldSegments): compaction calls retention
    ("compaction", "retention"),
    # a migration reads the log dirs through the kafkalog data source (split planning, packing)
    ("delta", "datasource"),
    # a restore writes segments and then lets recovery rebuild every derived file (indexes,
    # transaction indexes, producer snapshots, leader epochs), as a broker's load would
    ("delta", "recovery"),
    # erasing from the lake selects rows with the log dirs' erase matchers (one SQL engine and
    # one key test for both copies) and one run covers both
    ("delta", "compaction"),
}


def _unit(path: Path) -> str:
    rel = path.relative_to(ROOT)
    if rel.parts[0] == "jobs":
        return "jobs"
    if rel.parts[0] == "pyspark_kafkalog":
        return "cli"  # the entry point PySpark finds: may import anything below it
    return rel.parts[1].removesuffix(".py")


def _imported_units(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), str(path))
    rel = path.relative_to(ROOT)
    package = list(rel.parts[:-1])
    out = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                mod = base + (node.module.split(".") if node.module else [])
                if not node.module:
                    mod_names = [mod + [a.name] for a in node.names]
                else:
                    mod_names = [mod]
            else:
                mod_names = [(node.module or "").split(".")]
            names = [".".join(m) for m in mod_names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for n in names:
            parts = n.split(".")
            if parts[0] == "kafkalog_spark" and len(parts) > 1:
                out.append((node.lineno, parts[1]))
    return out


def test_layers_point_one_way():
    problems = []
    for p in _sources():
        unit = _unit(p)
        mine = LAYER[unit]
        for line, other in _imported_units(p):
            if other == unit or (unit, other) in BUILDS_ON:
                continue
            theirs = LAYER.get(other)
            if theirs is None:
                problems.append(f"{_rel(p)}:{line} imports kafkalog_spark.{other}, "
                                "which has no layer in tests/test_layers.py")
            elif theirs > mine:
                problems.append(f"{_rel(p)}:{line} ({unit}) imports upwards: {other}")
            elif theirs == mine and unit in SIDEWAYS_FORBIDDEN:
                problems.append(f"{_rel(p)}:{line} ({unit}) imports sideways: {other}")
    assert not problems, "\n".join(problems)


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
    assert lines <= 500, f"{_rel(path)} has {lines} lines"
