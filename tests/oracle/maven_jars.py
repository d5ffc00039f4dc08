"""Named sets of Maven jars for the oracle tests (test harness, not the package): each set is a
list of Maven coordinates fetched with ``mvn dependency:copy-dependencies`` (with everything
they need at run time) into a cache folder outside the repo, once.

    python tests/oracle/maven_jars.py kafka      # prints the folder holding the set's jars

The folder is ``$KAFKALOG_MAVEN_CACHE/<set>-<version>/`` (default cache
``~/.cache/kafkalog-maven``); a stamp file in it records the coordinates it was made from, so a
second call returns at once. A set is fetched into a temporary sibling folder and renamed into
place, so two processes fetching at once never see half a set (the second rename loses and its
copy is dropped). Maven's own download cache (``~/.m2/repository``) is used as usual.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

KAFKA_VERSION = "4.1.2"
LOG4J_VERSION = "2.25.4"
# the Spark-side sets match the installed pyspark 4.2.0 (pyproject pins pyspark<=4.2.0)
SPARK_VERSION = "4.2.0"
SPARK_MINOR = "4.2"
DELTA_VERSION = "4.4.0"
HADOOP_VERSION = "3.5.0"  # pyspark 4.2.0's hadoop-client-api/runtime
# a plugin version named in full, so the goal does not depend on the Maven install's default
COPY_GOAL = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies"
STAMP = ".kafkalog-jars-complete"


@dataclass(frozen=True)
class ArtifactSet:
    """Jars fetched together: ``version`` names the cache folder; ``coordinates`` are
    ``group:artifact:version[:type[:classifier]]``."""

    version: str
    coordinates: tuple[str, ...]

    def digest(self) -> str:
        return hashlib.sha256("\n".join(self.coordinates).encode()).hexdigest()[:16]


ARTIFACT_SETS: dict[str, ArtifactSet] = {
    # the broker (kafka.Kafka, kafka.tools.StorageTool) and the org.apache.kafka.tools CLIs.
    # Kafka 4 logs through Log4j2, but its 4.1 POMs name only slf4j-api 1.7.36 (no Log4j at
    # all): Log4j2's core and its SLF4J *1.x* binding are named here (a 2.x binding would
    # not be found by slf4j-api 1.7 and the broker would log nothing)
    "kafka": ArtifactSet(KAFKA_VERSION, (
        f"org.apache.kafka:kafka_2.13:{KAFKA_VERSION}",
        f"org.apache.kafka:kafka-tools:{KAFKA_VERSION}",
        f"org.apache.logging.log4j:log4j-core:{LOG4J_VERSION}",
        f"org.apache.logging.log4j:log4j-slf4j-impl:{LOG4J_VERSION}",
    )),
    # the broker with tiered storage: Kafka's test RemoteStorageManager (LocalTieredStorage) is
    # in kafka-storage's test jar (classifier "test", served by Maven Central), and it uses
    # org.apache.kafka.test.TestUtils from kafka-clients' test jar
    "kafka-tiered": ArtifactSet(KAFKA_VERSION, (
        f"org.apache.kafka:kafka_2.13:{KAFKA_VERSION}",
        f"org.apache.kafka:kafka-tools:{KAFKA_VERSION}",
        f"org.apache.kafka:kafka-storage:{KAFKA_VERSION}:jar:test",
        f"org.apache.kafka:kafka-clients:{KAFKA_VERSION}:jar:test",
        f"org.apache.logging.log4j:log4j-core:{LOG4J_VERSION}",
        f"org.apache.logging.log4j:log4j-slf4j-impl:{LOG4J_VERSION}",
    )),
    # delta-spark built for Spark 4.2 (pyspark 4.2.0). The pip package is delta_spark 4.4.1,
    # but Maven serves no 4.4.1 jar of delta-spark_4.2_2.13 (nor of delta-storage): 4.4.0 is
    # the newest; the Python API is a thin py4j layer over it. Brings delta-storage and
    # delta-kernel-*; what else it names, pyspark already ships (spark_jars.spark_jars())
    "delta": ArtifactSet(DELTA_VERSION, (
        f"io.delta:delta-spark_{SPARK_MINOR}_2.13:{DELTA_VERSION}",
    )),
    # Spark's own Kafka source, the version of the installed pyspark (brings kafka-clients
    # 3.9.2, spark-token-provider-kafka-0-10, commons-pool2)
    "spark-kafka": ArtifactSet(SPARK_VERSION, (
        f"org.apache.spark:spark-sql-kafka-0-10_2.13:{SPARK_VERSION}",
    )),
    # s3a://: hadoop-aws of pyspark's bundled Hadoop (hadoop-client-api/runtime 3.5.0 in
    # pyspark/jars); brings the AWS SDK v2 bundle (2.35.4, ~690 MB: fetched on the machine
    # that runs the tests into the cache outside the repo, never committed)
    "hadoop-aws": ArtifactSet(HADOOP_VERSION, (
        f"org.apache.hadoop:hadoop-aws:{HADOOP_VERSION}",
    )),
}


class MavenUnavailable(RuntimeError):
    """``mvn`` (or Java) is not installed: the sets cannot be fetched here."""


def cache_root() -> Path:
    env = os.environ.get("KAFKALOG_MAVEN_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "kafkalog-maven"


def set_folder(name: str) -> Path:
    return cache_root() / f"{name}-{_artifact_set(name).version}"


def _artifact_set(name: str) -> ArtifactSet:
    try:
        return ARTIFACT_SETS[name]
    except KeyError:
        raise KeyError(f"unknown artifact set {name!r}; known: {', '.join(sorted(ARTIFACT_SETS))}") \
            from None


def is_fetched(name: str) -> bool:
    stamp = set_folder(name) / STAMP
    return stamp.is_file() and stamp.read_text().strip() == _artifact_set(name).digest()


def fetch(name: str) -> Path:
    """The folder holding set ``name``'s jars, fetching them first if not yet cached.

    Raises ``MavenUnavailable`` when ``mvn`` or ``java`` is missing, ``RuntimeError`` with
    Maven's output when the fetch fails."""
    folder = set_folder(name)
    if is_fetched(name):
        return folder
    for tool in ("mvn", "java"):
        if shutil.which(tool) is None:
            raise MavenUnavailable(f"{tool!r} is not on PATH; cannot fetch the {name!r} jars")
    folder.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        _copy_dependencies(_artifact_set(name), work)
        if folder.exists() and not is_fetched(name):
            shutil.rmtree(folder)  # a stale set (other coordinates) or a leftover
        try:
            work.rename(folder)
        except OSError:
            if not is_fetched(name):  # another process did not win the race either
                raise
    finally:
        if work.exists():
            shutil.rmtree(work)
    return folder


def _copy_dependencies(aset: ArtifactSet, out: Path) -> None:
    """Write a pom naming ``aset``'s coordinates into ``out`` and copy their runtime
    dependency closure there; the stamp is written last."""
    pom = out / "pom.xml"
    pom.write_text(_pom(aset))
    cmd = ["mvn", "-B", "-q", "-f", str(pom), COPY_GOAL, f"-DoutputDirectory={out}",
           "-DincludeScope=runtime"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed (exit {done.returncode}):\n"
                           f"{(done.stdout + done.stderr)[-4000:]}")
    if not any(out.glob("*.jar")):
        raise RuntimeError(f"mvn copied no jar into {out}")
    (out / STAMP).write_text(aset.digest() + "\n")


def _pom(aset: ArtifactSet) -> str:
    deps = []
    for coord in aset.coordinates:
        group, artifact, version, *rest = coord.split(":")
        extra = f"<type>{escape(rest[0])}</type>" if rest else ""
        extra += f"<classifier>{escape(rest[1])}</classifier>" if len(rest) > 1 else ""
        deps.append(f"    <dependency><groupId>{escape(group)}</groupId>"
                    f"<artifactId>{escape(artifact)}</artifactId>"
                    f"<version>{escape(version)}</version>{extra}</dependency>")
    return ("<project xmlns=\"http://maven.apache.org/POM/4.0.0\">\n"
            "  <modelVersion>4.0.0</modelVersion>\n"
            "  <groupId>local.kafkalog</groupId><artifactId>oracle-jars</artifactId>"
            "<version>1</version><packaging>pom</packaging>\n"
            "  <dependencies>\n" + "\n".join(deps) + "\n  </dependencies>\n</project>\n")


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in ARTIFACT_SETS:
        print(f"usage: python {Path(__file__).name} SET   (SET: {', '.join(sorted(ARTIFACT_SETS))})",
              file=sys.stderr)
        return 2
    try:
        print(fetch(argv[0]))
    except (MavenUnavailable, RuntimeError) as e:
        print(f"Error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
