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

import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from servers import ManagedServer, ServerProcess, answers, free_port

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


@dataclass
class Azurite(ManagedServer):
    """``azurite-blob``; a context manager (start on enter, stop on exit)."""

    root: Path
    port: int = 0
    server: ServerProcess | None = None

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

        def launch() -> None:
            self.port = free_port()
            self.server = ServerProcess("azurite-blob", self.root / "azurite.out")
            self.server.start(
                [azurite_binary(), "--blobHost", "127.0.0.1", "--blobPort", str(self.port),
                 "--location", str(self.root / "data"), "--skipApiVersionCheck", "--loose",
                 "--disableTelemetry"],
                ready=lambda: answers(f"{self.endpoint}?comp=list"), timeout=timeout,
                port=self.port)

        self.start_on_free_ports(launch)
        return self

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
        """Create container ``name`` (an existing one is fine: not created again — Azurite's
        409 answer to a second create has been seen cut short under load)."""
        from pyarrow.fs import FileType

        fs = self.filesystem()
        if fs.get_file_info(name).type == FileType.NotFound:
            fs.create_dir(name)
