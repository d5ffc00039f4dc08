"""What ``./dev example`` installs: its setup step (``./dev setup`` runs the same function) in a
temporary copy of the checkout fills that copy's ``.venv`` with the package and what its
runtime requirements pull in, nothing else — none of the test extras (pytest, hypothesis, the
storage test servers, Azurite) — and the example runs there to its last line."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]

# run in the copy's venv: every distribution installed, and those kafkalog_spark's runtime
# requirements reach (markers evaluated, no extra chosen), by pip's own packaging helpers
CLOSURE = r"""
import json, importlib.metadata as md
from pip._vendor.packaging.requirements import Requirement
from pip._vendor.packaging.utils import canonicalize_name as canon
needed, todo = set(), ["kafkalog_spark"]
while todo:
    name = canon(todo.pop())
    if name not in needed:
        needed.add(name)
        for line in md.requires(name) or []:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
print(json.dumps({"needed": sorted(needed),
                  "installed": sorted({canon(d.metadata["Name"]) for d in md.distributions()})}))
"""


def canon(requirement: str) -> str:
    return re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9._-]+", requirement).group(0)).lower()


def checkout_copy(root: Path) -> Path:
    """What ``pip install -e .`` and ``./dev`` read, copied (numba's caches left out)."""
    copy = root / "clone"
    copy.mkdir()
    for name in ("dev", "pyproject.toml", "setup.py", "kafkalog_spark_pyspark.pth", "README.md",
                 "examples/main_job.py"):
        (copy / name).parent.mkdir(exist_ok=True)
        shutil.copy2(REPO / name, copy / name)
    for name in ("kafkalog_spark", "pyspark_kafkalog"):
        shutil.copytree(REPO / name, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def dev_setup(copy: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PYTHON"] = getattr(sys, "_base_executable", sys.executable)
    done = subprocess.run(["./dev", "setup"], cwd=copy, env=env, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    return done


# installs about 1.2 GB into a temporary venv (25-40 s with a warm pip cache), then runs the
# example there (numba compiles its kernels anew in the copy, a Spark JVM starts): 1-2 minutes
@pytest.mark.slow
@pytest.mark.spark
def test_dev_example_installs_the_runtime_dependencies_only(tmp_path: Path) -> None:
    copy = checkout_copy(tmp_path)
    first = dev_setup(copy)
    assert "==> installing kafkalog_spark and its runtime dependencies into .venv" in first.stdout
    python = copy / ".venv" / "bin" / "python"
    found = json.loads(subprocess.run([str(python), "-c", CLOSURE], cwd=copy,
                                      capture_output=True, text=True, check=True).stdout)
    installed, needed = set(found["installed"]), set(found["needed"])

    runtime = {canon(r) for r in PYPROJECT["dependencies"]}
    assert runtime <= installed, f"runtime dependencies missing: {sorted(runtime - installed)}"
    test_only = {canon(r) for r in PYPROJECT["optional-dependencies"]["test"]} - runtime
    assert not installed & test_only, f"test extras installed: {sorted(installed & test_only)}"
    # pip and setuptools come with the venv itself
    assert installed - needed <= {"pip", "setuptools"}, (
        f"installed but not required by the package: {sorted(installed - needed - {'pip'})}")
    assert not (copy / ".venv" / "node_modules").exists(), "a test server was installed"
    # the start-up hook a wheel would install (an editable install has none: ./dev copies it)
    hook = (copy / ".venv").glob("lib/python*/site-packages/kafkalog_spark_pyspark.pth")
    assert len(list(hook)) == 1
    stamps = sorted(p.name for p in (copy / ".venv").glob(".installed-*"))
    assert [s.rsplit("-", 1)[0] for s in stamps] == [".installed-runtime"], stamps

    # what was installed is enough: the example runs there to its last line (local Spark
    # included), and the command is on the venv's bin
    example = subprocess.run([str(python), "examples/main_job.py", str(tmp_path / "out")],
                             cwd=copy, capture_output=True, text=True, timeout=900)
    assert example.returncode == 0, example.stdout[-3000:] + example.stderr[-3000:]
    assert example.stdout.rstrip().endswith("Spark read every record"), example.stdout[-2000:]
    subprocess.run([str(copy / ".venv" / "bin" / "kafkalog"), "--help"], cwd=copy, check=True,
                   capture_output=True, timeout=300)

    again = dev_setup(copy)  # a second run installs nothing
    assert "==> installing" not in again.stdout, again.stdout
