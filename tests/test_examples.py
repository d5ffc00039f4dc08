"""Every example under examples/ (one per user journey) runs and reaches its checks, so the
examples never rot. Each example asserts its own results; these tests also check what it
returns."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_example_is_covered_here():
    covered = {"explore_notebook", "verify_and_recover", "compact", "migrate_to_delta",
               "erase_and_restore", "main_job"}  # main_job runs via ./dev example (not owned here)
    assert {p.stem for p in EXAMPLES.glob("*.py")} <= covered


def test_verify_and_recover(tmp_path):
    out = load("verify_and_recover").main([str(tmp_path)])
    assert out == {"problems": 1, "actions": 2, "records": 2000, "manifests": 1}
    assert (tmp_path / "quarantine").is_dir()


def test_compact(tmp_path):
    out = load("compact").main([str(tmp_path)])
    assert out["after"] < out["before"] == 5000 and out["segments_rewritten"] > 0


def test_migrate_to_delta_local(tmp_path):
    out = load("migrate_to_delta").main([str(tmp_path)])
    assert out == {"first": 206, "second": 50, "third": 0, "version": 1}


def test_erase_and_restore(tmp_path):
    out = load("erase_and_restore").main([str(tmp_path)])
    assert out == {"customer": 15, "where": 30, "restored": 255}


@pytest.mark.spark
def test_migrate_to_delta_spark(spark, tmp_path):
    out = load("migrate_to_delta").main([str(tmp_path), "--spark"])
    assert out == {"first": 206, "second": 50, "third": 0, "version": 1}


@pytest.mark.spark
def test_explore_notebook(spark, tmp_path):
    module = load("explore_notebook")
    log_dir = module.example_log_dir(tmp_path / "logs")
    out = module.main([str(log_dir)])
    assert out["records"] == 3000 and out["window"] == 100
    assert out["last_10_minutes_of_first_hour"] == 600
    assert out["sources"] == {"web": 1500, "app": 1500}
    assert out["top_customer"].startswith("customer-")
