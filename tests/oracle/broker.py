"""A real Apache Kafka broker for the oracle tests (test harness, not the package): one KRaft
node in combined mode (broker + controller) on loopback, run from the Maven jars of
``maven_jars.ARTIFACT_SETS["kafka"]``, its log dir in a folder of the test's.

    broker = KafkaBroker(tmp_path / "kafka", maven_jars.fetch("kafka"))
    broker.start()                      # format (first start only), start, wait until it answers
    broker.create_topic("orders", 3, {"cleanup.policy": "compact"})
    ...                                 # produce / consume at broker.bootstrap
    broker.stop()                       # SIGTERM, wait: a clean shutdown; files complete on disk
    kl.read_log(broker.log_dir)

``kill()`` is a crash (SIGKILL), ``restart()`` starts again on the same dirs and ports. The
broker's own log (Log4j2: WARN and up, the log cleaner at INFO) is ``broker.log_text()``.

Ports: two processes may start brokers at once (``./dev test`` runs two pytest passes side by
side), so a port picked free can be taken before the JVM binds it. The controller quorum is
static (``controller.quorum.voters``, formatted without ``--standalone``), so the ports live
only in ``server.properties``: when the broker cannot bind, new ports are picked and the start
is retried, without formatting again (``servers.ManagedServer.start_on_free_ports``). The broker
counts as started only when its own JVM holds the listening socket of its port (another run's
broker, also node 1, answering there does not count: ``servers.listens``).
"""

from __future__ import annotations

import atexit
import os
import signal
import socket
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

from kafkalog_spark.codec.files.properties import random_uuid
from servers import ManagedServer, PortInUse, ServerProcess, free_port

from .logdirs import read_checkpoint

NODE_ID = 1
# a single node: internal topics with one replica and one partition (their defaults of 50
# partitions would make the first consumer group and transaction wait for 50 logs)
_BROKER_SETTINGS = {
    "process.roles": "broker,controller",
    "node.id": str(NODE_ID),
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
    "num.partitions": "1",
    "auto.create.topics.enable": "false",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "share.coordinator.state.topic.num.partitions": "1",
    "group.initial.rebalance.delay.ms": "0",
    # a broker restarted after kill() is let in once its old registration expires (9 s)
    "broker.heartbeat.interval.ms": "1000",
    "broker.session.timeout.ms": "4000",
    "num.network.threads": "2",
    "num.io.threads": "2",
    "background.threads": "2",
    # retention and the cleaner run promptly (defaults: 30 s before the first run, then every
    # 5 min / 15 s backoff), so tests wait seconds, not minutes
    "log.initial.task.delay.ms": "0",
    "log.retention.check.interval.ms": "1000",
    "log.cleaner.enable": "true",
    "log.cleaner.backoff.ms": "100",
    "log.cleaner.threads": "1",
    "log.cleaner.min.compaction.lag.ms": "0",
    "log.cleaner.dedupe.buffer.size": str(16 << 20),
}

# Log4j2: WARN and up into broker.log, and the INFO lines of the log cleaner, the log loader and
# the log (recovery, producer state, retention). Kafka 4.1's storage code is Java
# (org.apache.kafka.storage.internals.log): the cleaner's thread logs "cleaned log ..." as
# LogCleaner$CleanerThread and its rounds ("Beginning cleaning of log ...") as Cleaner; the loader
# logs "[LogLoader partition=t-0, dir=...] Recovering unflushed segment ..." and the like
_LOG4J2 = """\
status = error
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log}
appender.file.append = true
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.file.ref = FILE
logger.cleaner.name = org.apache.kafka.storage.internals.log.LogCleaner
logger.cleaner.level = INFO
logger.cleanerthread.name = org.apache.kafka.storage.internals.log.LogCleaner$CleanerThread
logger.cleanerthread.level = INFO
logger.cleanerround.name = org.apache.kafka.storage.internals.log.Cleaner
logger.cleanerround.level = INFO
logger.loader.name = org.apache.kafka.storage.internals.log.LogLoader
logger.loader.level = INFO
logger.unified.name = org.apache.kafka.storage.internals.log.UnifiedLog
logger.unified.level = INFO
"""

CLEAN_SHUTDOWN = ".kafka_cleanshutdown"
CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"
_BIND_FAILED = ("Address already in use", "BindException")


class BrokerError(RuntimeError):
    """The broker did not come up or go down as asked; the message carries its log's tail."""


class BrokerPortInUse(BrokerError, PortInUse):
    """The broker exited because one of its ports was taken first."""


class KafkaBroker:
    """One KRaft broker+controller under ``root``; see the module docstring."""

    def __init__(self, root: Path, jars: Path, *, heap: str = "512m",
                 config: Mapping[str, str] | None = None, port: int | None = None) -> None:
        """``port``: the listener port to try first (default: a free one; a port that turns
        out taken is replaced, as any other)."""
        self.root = Path(root)
        self.jars = Path(jars)
        self.heap = heap
        self.extra_config = dict(config or {})
        self.log_dir = self.root / "kafka-logs"
        self.config_path = self.root / "server.properties"
        self.log_path = self.root / "broker.log"
        self.log4j_path = self.root / "log4j2.properties"
        self.port: int | None = port
        self.controller_port: int | None = None
        while port is not None and self.controller_port in (None, port):
            self.controller_port = free_port()
        self._server: ServerProcess | None = None
        self.starts = 0  # JVM launches, bind retries included
        self._exit_hook = False

    # --- lifecycle ---------------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        assert self.port is not None, "broker not started"
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        proc = self._server.proc if self._server else None
        return proc.pid if proc is not None and proc.poll() is None else None

    def is_running(self) -> bool:
        return self.pid is not None

    def start(self, timeout: float = 90.0, attempts: int = 5) -> None:
        """Format the log dir (first start only), start the broker and wait until it answers
        a metadata request; a start that fails to bind its ports is retried on new ones."""
        if self.is_running():
            return
        self.root.mkdir(parents=True, exist_ok=True)
        self.log4j_path.write_text(_LOG4J2.format(log=self.log_path))
        keep = self.port is not None  # the given port, or the last start's, is tried first

        def launch() -> None:
            nonlocal keep
            if not keep:
                self._pick_ports()
            keep = False
            self._write_config()
            if not (self.log_dir / "meta.properties").exists():
                self._format()
            self._launch(timeout)

        ManagedServer.start_on_free_ports(launch, attempts)

    def stop(self, timeout: float = 60.0) -> int:
        """A clean shutdown: SIGTERM to the broker's pid and wait for it to exit; returns its
        exit code (the JVM's 143 after its shutdown hook). Raises when it does not exit in
        ``timeout`` seconds (then it is killed) or exits without writing the clean-shutdown
        marker (``.kafka_cleanshutdown``) into its log dir."""
        was_running = self.is_running()
        code = self._signal(signal.SIGTERM, timeout)
        if was_running and not (self.log_dir / CLEAN_SHUTDOWN).exists():
            raise BrokerError(f"broker exited {code} without {CLEAN_SHUTDOWN}:\n"
                              f"{self.log_text()[-3000:]}")
        return code

    def kill(self) -> int:
        """A crash: SIGKILL, no shutdown work (segments and indexes as the page cache had
        them, no clean-shutdown marker)."""
        return self._signal(signal.SIGKILL, 30.0)

    def restart(self, timeout: float = 90.0) -> None:
        """Stop cleanly if running, then start again on the same dirs (and ports, unless one
        was taken meanwhile)."""
        if self.is_running():
            self.stop()
        self.start(timeout)

    def _signal(self, sig: int, timeout: float) -> int:
        server, self._server = self._server, None
        proc = server.proc if server else None
        if proc is None or proc.poll() is not None:
            return proc.returncode if proc is not None else 0
        os.kill(proc.pid, sig)
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
            raise BrokerError(f"broker pid {proc.pid} did not exit {timeout}s after "
                                   f"signal {sig}; killed") from None

    # --- helpers for tests ---------------------------------------------------------------------

    def log_text(self) -> str:
        """The broker's own log (all starts appended)."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def cleaner_checkpoint(self) -> dict[tuple[str, int], int]:
        """``cleaner-offset-checkpoint``: the offset up to which each compacted partition has
        been cleaned."""
        return read_checkpoint(self.log_dir / CLEANER_CHECKPOINT)

    def wait_for_cleaner(self, targets: Mapping[tuple[str, int], int], *, quiet: float = 2.0,
                         timeout: float = 90.0) -> None:
        """Wait until the cleaner has cleaned each ``(topic, partition)`` up to at least its
        target offset and then written no log line for ``quiet`` seconds (a second pass, e.g.
        removing tombstones past their delete horizon, follows the first at once)."""
        deadline = time.monotonic() + timeout
        while any(self.cleaner_checkpoint().get(tp, -1) < off for tp, off in targets.items()):
            if time.monotonic() > deadline:
                raise BrokerError(f"cleaner did not reach {dict(targets)} in {timeout}s: "
                                  f"{self.cleaner_checkpoint()}\n{self.log_text()[-3000:]}")
            time.sleep(0.2)
        last, since = self.log_text(), time.monotonic()
        while time.monotonic() - since < quiet and time.monotonic() < deadline:
            time.sleep(0.2)
            now = self.log_text()
            if now != last:
                last, since = now, time.monotonic()

    def admin(self, timeout_ms: int = 30000):
        from kafka.admin import KafkaAdminClient

        return KafkaAdminClient(bootstrap_servers=self.bootstrap, client_id="oracle-admin",
                                request_timeout_ms=timeout_ms, bootstrap_timeout_ms=timeout_ms)

    def create_topic(self, name: str, partitions: int = 1,
                     configs: Mapping[str, str] | None = None) -> None:
        """Create ``name`` with one replica and wait until every partition has a leader."""
        from kafka.admin import NewTopic

        admin = self.admin()
        try:
            admin.create_topics([NewTopic(name, partitions, 1,
                                          topic_configs=dict(configs or {}))])
            deadline = time.monotonic() + 30
            while not self._has_leaders(admin, name, partitions):
                if time.monotonic() > deadline:
                    raise BrokerError(f"topic {name}: partitions without a leader after 30 s")
                time.sleep(0.1)
        finally:
            admin.close()

    @staticmethod
    def _has_leaders(admin, name: str, partitions: int) -> bool:
        [topic] = admin.describe_topics([name])
        parts = topic.get("partitions") or []
        return topic.get("error_code") == 0 and len(parts) == partitions and \
            all(p.get("leader_id", -1) >= 0 for p in parts)

    def java(self, main_class: str, *args: str, classpath: str | None = None,
             timeout: float = 120.0, stdin: str | None = None) -> subprocess.CompletedProcess:
        """Run a Java main of the Kafka jars (``classpath``: more entries first), quietly."""
        cp = f"{classpath}{os.pathsep}" if classpath else ""
        cmd = ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1",
               f"-Dlog4j2.configurationFile=file:{self.tools_log4j()}",
               "-cp", f"{cp}{self.jars}/*", main_class, *args]
        done = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(f"{main_class} {' '.join(args)} exited {done.returncode}:\n"
                               f"{(done.stdout + done.stderr)[-3000:]}")
        return done

    # --- internals ---------------------------------------------------------------------------

    def _pick_ports(self) -> None:
        self.port = free_port()
        self.controller_port = free_port()
        while self.controller_port == self.port:
            self.controller_port = free_port()

    def _write_config(self) -> None:
        settings = {
            **_BROKER_SETTINGS,
            "controller.quorum.voters": f"{NODE_ID}@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},"
                         f"CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(self.log_dir),
            **self.extra_config,
        }
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))

    def tools_log4j(self) -> Path:
        path = self.root / "tools-log4j2.properties"
        if not path.exists():
            path.write_text("status = error\nappender.err.type = Console\n"
                            "appender.err.name = STDERR\nappender.err.target = SYSTEM_ERR\n"
                            "appender.err.layout.type = PatternLayout\n"
                            "appender.err.layout.pattern = %p %m (%c)%n\n"
                            "rootLogger.level = WARN\nrootLogger.appenderRef.err.ref = STDERR\n")
        return path

    def _format(self) -> None:
        self.java("kafka.tools.StorageTool", "format", "-t", random_uuid(),
                  "-c", str(self.config_path))

    def _launch(self, timeout: float) -> None:
        self.starts += 1
        # C1 only and the serial collector: a start ~2x quicker on a busy 2-core machine; the
        # broker's load in tests is tiny
        cmd = ["java", f"-Xmx{self.heap}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
               f"-Dlog4j2.configurationFile=file:{self.log4j_path}",
               "-cp", f"{self.jars}/*", "kafka.Kafka", str(self.config_path)]
        server = ServerProcess("kafka broker", self.root / "broker.out")
        mark = len(self.log_text())
        try:
            server.start(cmd, self._answers, timeout, port=self.port)
        except RuntimeError as e:
            # the JVM logs its BindException into broker.log, not to its stdout
            tail = self.log_text()[mark:][-3000:]
            taken = isinstance(e, PortInUse) or any(s in tail for s in _BIND_FAILED)
            raise (BrokerPortInUse if taken else BrokerError)(f"{e}\nbroker.log:\n{tail}") \
                from None
        self._server = server
        if not self._exit_hook:
            # a test process that dies without its teardown must not leave a JVM behind
            atexit.register(self._at_exit)
            self._exit_hook = True

    def _at_exit(self) -> None:
        if self.is_running():
            self.kill()

    def _answers(self) -> bool:
        """Whether the broker serves metadata with itself registered (a TCP connect first:
        a kafka-python client per poll would be slow while nothing listens)."""
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
        except OSError:
            return False
        from kafka.errors import KafkaError

        try:
            # short: whatever listens may not be our broker (the port was taken), and the
            # start loop checks between probes whether the broker exited
            admin = self.admin(timeout_ms=2000)
        except (KafkaError, OSError):
            return False
        try:
            return any(b.get("broker_id") == NODE_ID and not b.get("is_fenced")
                       for b in admin.describe_cluster()["brokers"])
        except (KafkaError, OSError, KeyError):
            return False
        finally:
            admin.close()
