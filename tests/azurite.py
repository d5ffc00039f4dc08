"""A real Azure Blob Storage server for the tests (object-storage groundwork, issue 16):
Azurite's blob service (npm package ``azurite``, which ``./dev`` installs into
``.venv/node_modules`` when npm exists; it needs ``node`` on ``PATH``), on loopback and a free
port, over plain HTTP, stopped by the pid (process group) it was started with.

    with Azurite(tmp_path / "azurite") as az:
        fs = az.filesystem()            # pyarrow.fs.AzureFileSystem for this server
        az.make_container("kafka-logs")  # 3-63 chars: lowercase letters, digits, hyphens

Azurite serves path-style URLs (``http://127.0.0.1:P/devstoreaccount1/<container>/<blob>``)
with the well-known development account. It has no Data Lake (DFS) endpoint: pyarrow probes
for a hierarchical namespace on the *DFS* authority, so that must point at the blob port too
(Azurite answers the probe with 400 and pyarrow falls back to flat-namespace blob calls); left
unset, pyarrow tries ``devstoreaccount1.dfs.core.windows.net`` and fails."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

# Azurite's documented development account (public; accepted only by the emulator)
ACCOUNT_NAME = "devstoreaccount1"
ACCOUNT_KEY = ("Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/"
               "KBHBeksoGMGw==")


def azurite_binary() -> str | None:
    """``azurite-blob`` from ``<venv>/node_modules/.bin`` (what ``./dev`` installs), or on
    ``PATH``."""
    here = Path(sys.prefix) / "node_modules" / ".bin" / "azurite-blob"
    return str(here) if here.exists() else shutil.which("azurite-blob")


def azurite_missing() -> str | None:
    """Why Azurite cannot start here, or None when it can."""
    if azurite_binary() is None:
        return ("azurite-blob is not installed (npm package azurite: "
                f"npm install --prefix {sys.prefix} azurite, which ./dev does when npm exists)")
    if shutil.which("node") is None:
        return "azurite-blob is installed but node is not on PATH"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Azurite:
    """``azurite-blob``; a context manager (start on enter, stop on exit)."""

    root: Path
    port: int = 0
    proc: subprocess.Popen | None = None

    @property
    def authority(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def endpoint(self) -> str:
        return f"http://{self.authority}/{ACCOUNT_NAME}"

    def start(self, timeout: float = 30) -> "Azurite":
        missing = azurite_missing()
        if missing is not None:
            raise RuntimeError(missing)
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "data").mkdir(exist_ok=True)
        self.port = free_port()
        log = open(self.root / "azurite.out", "wb")
        self.proc = subprocess.Popen(
            [azurite_binary(), "--blobHost", "127.0.0.1", "--blobPort", str(self.port),
             "--location", str(self.root / "data"), "--skipApiVersionCheck", "--loose",
             "--disableTelemetry"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                out = self.output()[-3000:]
                self.proc = None
                raise RuntimeError(f"azurite-blob exited:\n{out}")
            try:
                urllib.request.urlopen(f"{self.endpoint}?comp=list", timeout=1).close()
                return self
            except urllib.error.HTTPError:  # it answers (403 without a signature)
                return self
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"azurite-blob did not answer on {self.endpoint} within {timeout}s;"
                           f" its output:\n{self.output()[-3000:]}")

    def output(self) -> str:
        return (self.root / "azurite.out").read_text(errors="replace")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)
        self.proc = None

    def __enter__(self) -> "Azurite":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def filesystem(self, account_key: str = ACCOUNT_KEY):
        """A ``pyarrow.fs.AzureFileSystem`` for this server (shared key, plain HTTP; the DFS
        authority is the blob port as well, see the module docstring)."""
        from pyarrow import fs

        return fs.AzureFileSystem(account_name=ACCOUNT_NAME, account_key=account_key,
                                  blob_storage_authority=self.authority,
                                  blob_storage_scheme="http",
                                  dfs_storage_authority=self.authority,
                                  dfs_storage_scheme="http")

    def make_container(self, name: str) -> None:
        """Create container ``name`` (an existing one is fine)."""
        self.filesystem().create_dir(name)
