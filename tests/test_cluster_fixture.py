"""The test harness's own servers do not race for ports when two test runs start them at once
(``./dev test`` runs two pytest processes side by side): two standalone clusters started at the
same moment by two processes come up on distinct ports, each seeing its own master and only its
own workers (``tests/cluster.py``); a server given a port another process took first is not
fooled by the other server's answers there and starts again on a fresh port
(``tests/servers.py``, what the S3, GCS and Azure servers start through)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from servers import ManagedServer, PortInUse, ServerProcess, answers, free_port, listens

HERE = Path(__file__).resolve().parent


def http_server(port: int) -> list[str]:
    """A plain HTTP server on loopback ``port`` (Python's own: exits "Address already in use"
    when the port is taken)."""
    return [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port)]


def test_a_server_on_a_taken_port_is_not_taken_for_ready_and_restarts_elsewhere(tmp_path):
    squatter = ServerProcess("squatter", tmp_path / "squatter.out")
    squatted: list[int] = []

    def squat() -> None:
        squatted.append(free_port())
        squatter.start(http_server(squatted[-1]), timeout=30, port=squatted[-1],
                       ready=lambda: answers(f"http://127.0.0.1:{squatted[-1]}/"))

    ManagedServer.start_on_free_ports(squat)
    taken = squatted[-1]
    try:
        ours = ServerProcess("ours", tmp_path / "ours.out")
        # the squatter answers at once on that port: without the listening-socket check this
        # start would return as if ours were ready
        with pytest.raises(PortInUse, match="ours found a port taken"):
            ours.start(http_server(taken), ready=lambda: answers(f"http://127.0.0.1:{taken}/"),
                       timeout=30, port=taken)

        used: list[int] = []

        def launch() -> None:
            used.append(free_port() if used else taken)  # first the taken port: a lost race
            port = used[-1]
            ours.start(http_server(port), ready=lambda: answers(f"http://127.0.0.1:{port}/"),
                       timeout=30, port=port)

        ManagedServer.start_on_free_ports(launch)
        try:
            assert len(used) >= 2 and used[0] == taken != used[-1]
            assert ours.proc is not None and listens(ours.proc.pid, used[-1])
            assert not listens(ours.proc.pid, taken)
            assert squatter.proc is not None and listens(squatter.proc.pid, taken)
        finally:
            ours.stop()
    finally:
        squatter.stop()


def test_a_server_that_fails_for_another_reason_is_not_retried(tmp_path):
    calls = []

    def launch() -> None:
        calls.append(1)
        ServerProcess("broken", tmp_path / "broken.out").start(
            [sys.executable, "-c", "raise SystemExit('no config file')"],
            ready=lambda: False, timeout=30, port=free_port())

    with pytest.raises(RuntimeError, match="broken exited") as raised:
        ManagedServer.start_on_free_ports(launch)
    assert not isinstance(raised.value, PortInUse) and len(calls) == 1


@pytest.mark.cluster
@pytest.mark.slow
def test_two_clusters_started_at_once_each_see_their_own_master_and_workers(tmp_path):
    procs = [subprocess.Popen([sys.executable, str(HERE / "cluster.py"), str(tmp_path / name)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, start_new_session=True)
             for name in ("a", "b")]
    try:
        seen = []
        for proc in procs:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            try:
                seen.append(json.loads(line))
            except ValueError:
                raise AssertionError(f"a cluster did not start:\n{line}{proc.stdout.read()}")
    finally:
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.close()  # the cluster stops itself
        for proc in procs:
            try:
                proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    a, b = seen
    assert a["url"] != b["url"] and a["ui_port"] != b["ui_port"]
    for cluster in (a, b):
        assert cluster["state_url"] == cluster["url"]
        assert len(cluster["own_workers"]) == 2
        assert cluster["listed_workers"] == cluster["own_workers"]
    assert not set(a["own_workers"]) & set(b["own_workers"])
    assert [p.returncode for p in procs] == [0, 0]
