"""The GCS test server (tests/gcs.py) works: a real fake-gcs-server on loopback, reached through
pyarrow's GCS file system — objects put whole, listed, read back by byte range (what reading
segments in place needs), a missing object reported as such. Groundwork for log dirs on object
storage (issue 16). fake-gcs-server checks no credentials, so there is no refusal test."""

from __future__ import annotations

import pytest
from gcs import PACKAGE, FakeGcs, fake_gcs_binary
from pyarrow.fs import FileSelector, FileType

pytestmark = pytest.mark.skipif(fake_gcs_binary() is None,
                                reason=f"fake-gcs-server (package {PACKAGE}) is not installed")


@pytest.fixture(scope="module")
def gcs_server(tmp_path_factory):
    with FakeGcs(tmp_path_factory.mktemp("fake-gcs")) as server:
        yield server


def test_put_list_and_ranged_read(gcs_server) -> None:
    gcs_server.make_bucket("kafka-logs")
    fs = gcs_server.filesystem()
    data = bytes(range(256)) * 4096  # 1 MiB
    with fs.open_output_stream("kafka-logs/t-0/00000000000000000000.log") as f:
        f.write(data)
    names = [i.path for i in fs.get_file_info(FileSelector("kafka-logs", recursive=True))]
    assert "kafka-logs/t-0/00000000000000000000.log" in names
    with fs.open_input_file("kafka-logs/t-0/00000000000000000000.log") as f:
        assert f.size() == len(data)
        assert f.read_at(100, 500_000) == data[500_000:500_100]
        assert f.read_at(10, len(data) - 10) == data[-10:]


def test_missing_object_is_file_not_found(gcs_server) -> None:
    gcs_server.make_bucket("kafka-logs")
    fs = gcs_server.filesystem()
    assert fs.get_file_info("kafka-logs/t-0/missing.log").type == FileType.NotFound
    with pytest.raises(FileNotFoundError):
        fs.open_input_file("kafka-logs/t-0/missing.log")


def test_filesystem_backend_keeps_objects_on_disk(gcs_server) -> None:
    gcs_server.make_bucket("on-disk")
    with gcs_server.filesystem().open_output_stream("on-disk/a.bin") as f:
        f.write(b"payload")
    assert any(p.is_file() for p in (gcs_server.root / "data").rglob("*"))
