"""Tests over real broker data find it where ``$KAFKALOG_REAL_FIXTURES`` says, else in
``../shared/fixtures/real`` next to the clone (``tests/real_fixtures.py``); a folder the
variable names but that is not there fails the tests that need it instead of skipping them.
Each case runs a real fixture test in a pytest of its own, with the variable set."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from real_fixtures import ENV, NEXT_TO_CLONE, real_fixtures_dir, where_looked

REPO = Path(__file__).resolve().parents[1]
# a fixture test that reads one small file of the fixture folder
SELECTION = ["tests/test_checkpoints.py::test_real_offset_checkpoint_values"]
CLEANER = "DonaldY__kafka-2.7.1/kafka-logs/cleaner-offset-checkpoint"


def run_fixture_test(tmp_path: Path, folder: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, ENV: str(folder)}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           f"--basetemp={tmp_path / 'pytest'}", "-rs", *SELECTION],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)


def fixture_folder(root: Path, last_offset: int) -> Path:
    """A fixture folder holding only the cleaner checkpoint the selected test reads."""
    path = root / CLEANER
    path.parent.mkdir(parents=True)
    path.write_text("0\n3\n__consumer_offsets 28 2\n__consumer_offsets 17 1\n"
                    f"__consumer_offsets 39 {last_offset}\n")
    return root


def test_the_variable_names_the_folder_the_tests_read(tmp_path):
    good = run_fixture_test(tmp_path / "a", fixture_folder(tmp_path / "good", 18))
    assert good.returncode == 0 and "1 passed" in good.stdout, good.stdout[-3000:]
    # the same file with another offset fails: the test read this folder, not ../shared
    bad = run_fixture_test(tmp_path / "b", fixture_folder(tmp_path / "bad", 19))
    assert bad.returncode == 1 and "1 failed" in bad.stdout, bad.stdout[-3000:]
    assert "39): 19" in bad.stdout


def test_a_missing_folder_the_variable_names_fails_instead_of_skipping(tmp_path):
    missing = tmp_path / "no-such-folder"
    done = run_fixture_test(tmp_path, missing)
    assert done.returncode == 1 and "skipped" not in done.stdout, done.stdout[-3000:]
    assert f"${ENV} names {missing}, which is not a folder" in done.stdout


def test_without_the_variable_the_folder_next_to_the_clone_and_skips_say_where(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert real_fixtures_dir() == NEXT_TO_CLONE == REPO.parent / "shared" / "fixtures" / "real"
    assert str(NEXT_TO_CLONE) in where_looked() and f"set ${ENV}" in where_looked()
    monkeypatch.setenv(ENV, "")  # empty: not set
    assert real_fixtures_dir() == NEXT_TO_CLONE


def test_a_relative_folder_is_taken_from_the_working_directory(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(ENV, "fixtures/real")
    assert real_fixtures_dir() == tmp_path / "fixtures" / "real"
    assert where_looked() == f"{tmp_path / 'fixtures' / 'real'} (${ENV})"
