"""A real Spark standalone cluster for the tests: one master and N workers started from the
installed pyspark (``$SPARK_HOME/bin/spark-class``), on loopback, each a JVM of its own whose
executors are further JVMs with their own Python workers — as on a multi-host cluster, nothing
is shared with the test process but the file system.

Two clusters may start at once (``./dev test`` runs two pytest processes side by side), so no
port is picked beforehand: every process binds port 0 and the master's RPC and web UI ports are
read from its own log; the web UI's JSON must name this cluster's master URL, and only workers
whose own logs name their address count as this cluster's.

Every process is started in a new session and stopped by the pid this module got when it
started it (its process group: a worker's executors and their Python workers go with it);
nothing is ever looked up or killed by name.

``python tests/cluster.py ROOT`` starts one, prints its addresses as one JSON line, and stops it
when its stdin closes (``tests/test_cluster_fixture.py`` starts two at once this way).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from servers import children, descendants

REPO = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent


def spark_home() -> str:
    from pyspark.find_spark_home import _find_spark_home

    return _find_spark_home()


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


@dataclass
class StandaloneCluster:
    """``start()`` / ``stop()`` a master and ``workers`` workers of ``cores`` cores each."""

    root: Path
    workers: int = 2
    cores: int = 1
    memory: str = "2g"
    master_port: int = 0
    ui_port: int = 0
    # a folder the executors do not see (an empty tmpfs over it in the workers' own mount
    # namespace): a path on the driver's disk only, the classic mistake on a real cluster
    hidden: Path | None = None
    # pin worker i (its executors and their Python workers inherit it) to CPU cpus[i % len]:
    # "one core per worker" as on separate hosts (benchmarks; tests leave it unset)
    cpus: tuple[int, ...] | None = None
    procs: list[subprocess.Popen] = field(default_factory=list)

    # what the master and the workers log once bound (their own output files)
    MASTER_URL = re.compile(r"Starting Spark master at spark://127\.0\.0\.1:(\d+)")
    MASTER_UI = re.compile(r"Successfully started service 'MasterUI' on port (\d+)")
    WORKER_ADDRESS = re.compile(r"Starting Spark worker (\S+:\d+) with")

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    def _env(self, name: str) -> dict[str, str]:
        env = dict(os.environ)
        env.update(SPARK_LOCAL_IP="127.0.0.1", SPARK_LOG_DIR=str(self.root / "logs"),
                   SPARK_HOME=spark_home(), SPARK_NO_DAEMONIZE="1",
                   # the executors' Python: the package installed in this venv (route a)
                   PYSPARK_PYTHON=sys.executable)
        env.pop("PYSPARK_GATEWAY_PORT", None)
        env.pop("PYSPARK_SUBMIT_ARGS", None)
        env["SPARK_WORKER_DIR"] = str(self.root / name)
        # an empty conf dir: Spark's default logging, which the addresses are read from
        env["SPARK_CONF_DIR"] = str(self.root / "conf")
        return env

    def _spawn(self, name: str, args: list[str], hide: bool = False,
               cpu: int | None = None) -> subprocess.Popen:
        log = open(self.root / f"{name}.out", "wb")
        cmd = [os.path.join(spark_home(), "bin", "spark-class"), *args,
               "--properties-file", str(self.root / "cluster.conf")]
        if hide and self.hidden is not None:
            cmd = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
                   'mount -t tmpfs -o size=1m kafkalog-hidden "$0" && exec "$@"',
                   str(self.hidden), *cmd]
        if cpu is not None:
            cmd = ["taskset", "-c", str(cpu), *cmd]
        proc = subprocess.Popen(cmd, env=self._env(name), stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        self.procs.append(proc)
        return proc

    def start(self, timeout: float = 120) -> "StandaloneCluster":
        self.root.mkdir(parents=True, exist_ok=True)
        if self.hidden is not None:
            self.hidden.mkdir(parents=True, exist_ok=True)
        (self.root / "conf").mkdir(exist_ok=True)
        self.master_port = self.ui_port = 0  # read from the master's log once it has bound
        (self.root / "cluster.conf").write_text(
            "spark.master.rest.enabled false\n"
            "spark.worker.cleanup.enabled false\n"
            "spark.ui.reverseProxy false\n")
        self._spawn("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                               "--port", "0", "--webui-port", "0"])
        self._wait(lambda state: state is not None, timeout, "the master to start")
        for i in range(self.workers):
            self.add_worker(i)
        self._wait(lambda s: s is not None and self.alive_workers(s) >= self.workers, timeout,
                   f"{self.workers} workers to register")
        return self

    def add_worker(self, i: int) -> subprocess.Popen:
        (self.root / f"worker{i}").mkdir(parents=True, exist_ok=True)
        return self._spawn(f"worker{i}", [
            "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
            "--cores", str(self.cores), "--memory", self.memory, "--webui-port", "0",
            "--work-dir", str(self.root / f"worker{i}"), self.url], hide=True,
            cpu=self.cpus[i % len(self.cpus)] if self.cpus else None)

    def _logged(self, name: str, pattern: re.Pattern) -> str | None:
        """The first group of ``pattern``'s first match in ``name``'s output, if any yet."""
        try:
            m = pattern.search((self.root / f"{name}.out").read_text(errors="replace"))
        except OSError:
            return None
        return m.group(1) if m else None

    def state(self) -> dict | None:
        """The master's JSON status, None until its web UI answers; raises when the JSON is
        another master's."""
        if not self.ui_port:
            port, ui = self._logged("master", self.MASTER_URL), self._logged("master",
                                                                             self.MASTER_UI)
            if port is None or ui is None:
                return None
            self.master_port, self.ui_port = int(port), int(ui)
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5) as r:
                state = json.load(r)
        except (OSError, ValueError):  # not up yet: refused, or an empty page while it starts
            return None
        if state.get("url") != self.url:
            raise RuntimeError(f"the web UI on port {self.ui_port} is the status of "
                               f"{state.get('url')}, not of this cluster's {self.url}")
        return state

    def worker_addresses(self) -> set[str]:
        """``host:port`` of every worker this cluster started, from the workers' own logs."""
        names = (f.stem for f in self.root.glob("*.out") if f.stem != "master")
        return {a for a in (self._logged(n, self.WORKER_ADDRESS) for n in names) if a}

    def alive_workers(self, state: dict) -> int:
        """The workers in ``state`` that are ALIVE and this cluster's own."""
        ours = self.worker_addresses()
        return sum(1 for w in state.get("workers", [])
                   if w.get("state") == "ALIVE" and f"{w.get('host')}:{w.get('port')}" in ours)

    def _wait(self, ok, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"a cluster process exited ({p.args[1]}): "
                                       f"{self.log_tail()}")
            if ok(self.state()):
                return
            time.sleep(0.5)
        raise TimeoutError(f"timed out waiting for {what}: {self.log_tail()}")

    def log_tail(self) -> str:
        tails = []
        for f in sorted(self.root.glob("*.out")):
            tails.append(f"--- {f.name}\n" + f.read_text(errors="replace")[-1500:])
        return "\n".join(tails)

    def worker_pids(self) -> list[int]:
        return [p.pid for p in self.procs[1:] if p.poll() is None]

    def executor_pids(self) -> list[int]:
        """Executor JVMs now running (children of the workers)."""
        return [c for w in self.worker_pids() for c in children(w)
                if "CoarseGrainedExecutorBackend" in cmdline(c)]

    def python_worker_pids(self) -> list[int]:
        """Python worker processes of the executors (pyspark.daemon and its forks)."""
        return [d for e in self.executor_pids() for d in descendants(e)
                if "python" in cmdline(d).split(" ")[0]]

    def wait_idle(self, timeout: float = 60) -> None:
        """Until no application runs (its executors have exited)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            s = self.state()
            if s is not None and not s.get("activeapps") and not self.executor_pids():
                return
            time.sleep(0.5)

    def stop(self) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 30
        for p in reversed(self.procs):
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(p.pid, signal.SIGKILL)  # whatever of its group is left
            except ProcessLookupError:
                pass
            p.wait()
        self.procs.clear()


def submit_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a ``spark-submit`` child: this one, without the test session's own
    gateway and submit arguments, this venv's ``bin`` first on ``PATH`` and its python for the
    workers (unless set), then ``extra``."""
    env = dict(os.environ)
    env.pop("PYSPARK_GATEWAY_PORT", None)
    env.pop("PYSPARK_SUBMIT_ARGS", None)
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.update(extra or {})
    return env


def submit_command(script: str | Path, *args: str, master: str,
                   conf: dict[str, str] | None = None, submit_args: list[str] | None = None,
                   env: dict[str, str] | None = None) -> tuple[list[str], dict[str, str]]:
    """The installed pyspark's ``spark-submit`` command line for ``script`` and its
    environment: the driver on loopback for a cluster, the plain-Python run's
    ``NUMBA_DISABLE_JIT`` passed on to the executors."""
    cmd = [str(VENV_BIN / "spark-submit"), "--master", master]
    if master.startswith("spark://"):  # the driver on loopback, as the cluster is
        conf = {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
                **(conf or {})}
    for k, v in (conf or {}).items():
        cmd += ["--conf", f"{k}={v}"]
    cmd += [*(submit_args or []), str(script), *map(str, args)]
    full_env = submit_env(env)
    if "NUMBA_DISABLE_JIT" in full_env:  # the plain-Python run reaches the executors too
        jit = full_env["NUMBA_DISABLE_JIT"]
        cmd[3:3] = ["--conf", f"spark.executorEnv.NUMBA_DISABLE_JIT={jit}"]
    return cmd, full_env


def spark_submit(script: str | Path, *args: str, master: str, conf: dict[str, str] | None = None,
                 submit_args: list[str] | None = None, env: dict[str, str] | None = None,
                 timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess:
    """Run ``script`` through the installed pyspark's real ``spark-submit``."""
    cmd, full_env = submit_command(script, *args, master=master, conf=conf,
                                   submit_args=submit_args, env=env)
    done = subprocess.run(cmd, env=full_env, capture_output=True, text=True, timeout=timeout,
                          cwd=REPO)
    if check and done.returncode != 0:
        raise AssertionError(f"spark-submit failed ({done.returncode}):\n{done.stdout[-3000:]}\n"
                             f"{done.stderr[-6000:]}")
    return done


# --- for the fault tests (tests/test_cluster_faults.py) -------------------------------------------

import contextlib as _contextlib  # noqa: E402


def spark_submit_background(script: str | Path, *args: str, master: str,
                            conf: dict[str, str] | None = None,
                            submit_args: list[str] | None = None,
                            env: dict[str, str] | None = None,
                            output: str | Path) -> subprocess.Popen:
    """Start ``script`` through the real ``spark-submit`` as :func:`spark_submit` does, but in
    the background (a new session, so :func:`stop_submit` can end its whole group by the pid
    returned here); stdout and stderr go to ``output``."""
    cmd, full_env = submit_command(script, *args, master=master, conf=conf,
                                   submit_args=submit_args, env=env)
    with open(output, "wb") as log:
        return subprocess.Popen(cmd, env=full_env, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, cwd=REPO, start_new_session=True)


def stop_submit(proc: subprocess.Popen, timeout: float = 30) -> None:
    """End a :func:`spark_submit_background` process group (by its pid) if it still runs."""
    if proc.poll() is None:
        with _contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with _contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def add_worker_on_host(cluster: StandaloneCluster, name: str, host: str) -> subprocess.Popen:
    """One more worker, registered under another loopback address (``127.0.0.2``): Spark
    launches a speculative copy of a task only on a host other than the one running it, so
    speculation needs two hosts. Stop it with :func:`remove_worker`."""
    (cluster.root / name).mkdir(parents=True, exist_ok=True)
    before = cluster.alive_workers(cluster.state() or {})
    proc = cluster._spawn(name, [
        "org.apache.spark.deploy.worker.Worker", "--host", host,
        "--cores", str(cluster.cores), "--memory", cluster.memory, "--webui-port", "0",
        "--work-dir", str(cluster.root / name), cluster.url])
    cluster._wait(lambda s: s is not None and cluster.alive_workers(s) > before, 120,
                  f"worker {name} on {host} to register")
    return proc


def remove_worker(cluster: StandaloneCluster, proc: subprocess.Popen) -> None:
    """Stop a worker started by :func:`add_worker_on_host` (its process group, by its pid) and
    forget it; the master then counts it dead."""
    if proc.poll() is None:
        with _contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with _contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if proc in cluster.procs:
        cluster.procs.remove(proc)


def main(argv: list[str]) -> int:
    """Start a cluster of two workers under ``argv[0]``; print its master URL, web UI port,
    the worker addresses from the workers' logs and those the master lists, as one JSON line;
    stop it when stdin closes."""
    cluster = StandaloneCluster(Path(argv[0]), workers=2)
    try:
        cluster.start()
        state = cluster.state() or {}
        print(json.dumps({"url": cluster.url, "ui_port": cluster.ui_port,
                          "state_url": state.get("url"),
                          "own_workers": sorted(cluster.worker_addresses()),
                          "listed_workers": sorted(f"{w['host']}:{w['port']}"
                                                   for w in state.get("workers", []))}),
              flush=True)
        sys.stdin.read()
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

