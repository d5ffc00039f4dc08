"""The Azure Blob test server (tests/azure.py) works: a real Azurite on loopback, reached through
pyarrow's Azure file system — objects put whole, listed, read back by byte range (what reading
segments in place needs), a missing object reported as such, a wrong account key refused.
Groundwork for log dirs on object storage (issue 16)."""

from __future__ import annotations

import base64

import pytest
from azurite import Azurite, azurite_missing
from pyarrow.fs import FileSelector, FileType

pytestmark = pytest.mark.skipif(azurite_missing() is not None, reason=azurite_missing() or "")


@pytest.fixture(scope="module")
def azurite(tmp_path_factory):
    with Azurite(tmp_path_factory.mktemp("azurite")) as server:
        yield server


def test_put_list_and_ranged_read(azurite) -> None:
    azurite.make_container("kafka-logs")
    fs = azurite.filesystem()
    data = bytes(range(256)) * 4096  # 1 MiB
    with fs.open_output_stream("kafka-logs/t-0/00000000000000000000.log") as f:
        f.write(data)
    names = [i.path for i in fs.get_file_info(FileSelector("kafka-logs", recursive=True))]
    assert "kafka-logs/t-0/00000000000000000000.log" in names
    with fs.open_input_file("kafka-logs/t-0/00000000000000000000.log") as f:
        assert f.size() == len(data)
        assert f.read_at(100, 500_000) == data[500_000:500_100]
        assert f.read_at(10, len(data) - 10) == data[-10:]


def test_missing_object_is_file_not_found(azurite) -> None:
    azurite.make_container("kafka-logs")
    fs = azurite.filesystem()
    assert fs.get_file_info("kafka-logs/t-0/missing.log").type == FileType.NotFound
    with pytest.raises(FileNotFoundError):
        fs.open_input_file("kafka-logs/t-0/missing.log")


def test_wrong_account_key_is_refused(azurite) -> None:
    azurite.make_container("secret-container")
    with azurite.filesystem().open_output_stream("secret-container/a.bin") as f:
        f.write(b"payload")
    bad = azurite.filesystem(account_key=base64.b64encode(b"wrong" * 12).decode())
    with pytest.raises(OSError, match="AuthorizationFailure"):
        bad.get_file_info(FileSelector("secret-container"))
    with pytest.raises(OSError, match="AuthorizationFailure"):
        bad.open_input_file("secret-container/a.bin")
