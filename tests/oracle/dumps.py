"""``kafka-dump-log`` and ``kafkalog dump`` side by side (test harness): Kafka's
``kafka.tools.DumpLogSegments`` run from the broker's jars and ``kafkalog dump`` run with the same
flags over the same files, their outputs cut into one section per file so that a difference is
named by file.

DumpLogSegments prints ``Dumping <file>`` and the file's dump on stdout, ``Ignoring unknown file
<file>`` on stderr, and after the last file, on stderr, its findings per file: index entries that
do not match the log (``Mismatches in :<file>``), time index errors (``Found timestamp mismatch
in :<file>``, ``Found out of order timestamp in :<file>``, ``The following indexed offsets are not
found in the log.``) and, with deep iteration, ``Non-consecutive offsets in <file>``.

Both run in a UTF-8 locale (the JVM told to print UTF-8, as ``kafka-dump-log.sh`` does in one).
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

DUMP_MAIN = "kafka.tools.DumpLogSegments"
# The tool's stderr is compared byte for byte: no launcher note of JVM options taken from the
# environment (``./dev test`` sets JAVA_TOOL_OPTIONS; the tool's flags are on its command line)
_JVM_ENV_OPTIONS = ("JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "_JAVA_OPTIONS")
_ENV = {**{k: v for k, v in os.environ.items() if k not in _JVM_ENV_OPTIONS},
        "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
_UTF8_JVM = ("-Dfile.encoding=UTF-8", "-Dstdout.encoding=UTF-8", "-Dstderr.encoding=UTF-8",
             "-Dsun.stdout.encoding=UTF-8", "-Dsun.stderr.encoding=UTF-8")


@dataclass(frozen=True)
class DumpRun:
    """One tool's run over a list of files."""

    stdout: str
    stderr: str
    returncode: int


def kafka_dump(jars: Path, log4j: Path, files: list[str], flags: list[str]) -> DumpRun:
    done = subprocess.run(
        ["java", "-Xmx512m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", *_UTF8_JVM,
         f"-Dlog4j2.configurationFile=file:{log4j}", "-cp", f"{jars}/*", DUMP_MAIN,
         "--files", ",".join(files), *flags],
        capture_output=True, env=_ENV, timeout=600)
    return DumpRun(done.stdout.decode("utf-8", "surrogateescape"),
                   done.stderr.decode("utf-8", "surrogateescape"), done.returncode)


def our_dump(files: list[str], flags: list[str]) -> DumpRun:
    """``kafkalog dump`` run in this process (``kafkalog_spark.cli.main``, what the script
    runs; a process per run would import and compile the package again)."""
    import contextlib
    import io

    from kafkalog_spark.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(["dump", "--files", ",".join(files), *flags])
        except SystemExit as e:  # the command's own exit code (the script exits with it)
            code = e.code
    return DumpRun(out.getvalue(), err.getvalue(), code)


_FINDING = re.compile(r"^(?:Mismatches in :|Found timestamp mismatch in :|"
                      r"Found out of order timestamp in :|Non-consecutive offsets in )(.*)$")


def stdout_sections(text: str) -> dict[str, list[str]]:
    """``file -> lines`` of stdout, each file's section from its ``Dumping`` line on (a file
    named twice gets both sections)."""
    out: dict[str, list[str]] = {}
    current = None
    for line in text.split("\n"):
        if line.startswith("Dumping "):
            current = line[len("Dumping "):]
            out.setdefault(current, [])
        if current is not None:
            out[current].append(line)
    return out


def stderr_sections(text: str) -> dict[str, list[str]]:
    """``file -> lines`` of stderr: ``Ignoring unknown file`` lines and the findings blocks
    (a block's indented lines go to its file; the shallow-offset block, which names no file,
    goes to ``""``); anything else (an exception) to ``"<other>"``."""
    out: dict[str, list[str]] = {}
    current = "<other>"
    for line in text.split("\n"):
        found = _FINDING.match(line)
        if line.startswith("Ignoring unknown file "):
            out.setdefault(line[len("Ignoring unknown file "):], []).append(line)
            continue
        if found:
            current = found.group(1)
        elif line == "The following indexed offsets are not found in the log.":
            current = ""
        elif not line.startswith(("  ", "Indexed offset: ")) and line:
            current = "<other>"
        if line:
            out.setdefault(current, []).append(line)
    return out


# one command-line argument may hold at most 128 KiB (Linux MAX_ARG_STRLEN): --files is split
_FILES_ARG_MAX = 100_000


def chunks(files: list[str]) -> list[list[str]]:
    """``files`` in runs whose comma-joined length fits one argument."""
    out: list[list[str]] = [[]]
    size = 0
    for f in files:
        if out[-1] and size + len(f) + 1 > _FILES_ARG_MAX:
            out.append([])
            size = 0
        out[-1].append(f)
        size += len(f) + 1
    return out


def first_difference(kafka: list[str], ours: list[str]) -> str:
    for i, (k, o) in enumerate(zip(kafka, ours)):
        if k != o:
            return f"line {i + 1}: Kafka {k[:300]!r} | ours {o[:300]!r}"
    if len(kafka) != len(ours):
        extra = kafka[len(ours)] if len(kafka) > len(ours) else ours[len(kafka)]
        who = "Kafka" if len(kafka) > len(ours) else "ours"
        return f"line {min(len(kafka), len(ours)) + 1}: only {who} has {extra[:300]!r}"
    return ""


def differences(kafka: DumpRun, ours: DumpRun, keep=lambda name: True) -> list[str]:
    """Per file whose name ``keep`` accepts: the first line that differs on stdout and on
    stderr; and the exit codes, the order of the stdout sections and the order of the stderr
    findings blocks."""
    found = []
    if kafka.returncode != ours.returncode:
        found.append(f"exit code: Kafka {kafka.returncode}, ours {ours.returncode}")
    for stream, split in (("stdout", stdout_sections), ("stderr", stderr_sections)):
        k, o = split(getattr(kafka, stream)), split(getattr(ours, stream))
        for name in sorted(set(k) | set(o)):
            if name not in ("", "<other>") and not keep(name):
                continue
            diff = first_difference(k.get(name, []), o.get(name, []))
            if diff:
                found.append(f"{stream} {name or '(no file)'}: {diff}")
        order_k = [n for n in k if n in o and (n in ("", "<other>") or keep(n))]
        order_o = [n for n in o if n in k and (n in ("", "<other>") or keep(n))]
        if order_k != order_o:
            first = next(i for i, (a, b) in enumerate(zip(order_k, order_o)) if a != b)
            found.append(f"{stream}: sections in another order from #{first + 1}: Kafka "
                         f"{order_k[first:first + 3]} ours {order_o[first:first + 3]}")
    return found


def crashed(run: DumpRun) -> bool:
    """Whether DumpLogSegments stopped on an uncaught exception (it prints the stack trace
    and exits 1, dumping none of the files after that one)."""
    return "Exception in thread \"main\"" in run.stderr


@dataclass
class Compared:
    """Both tools over the same files: ``runs`` are ``(files, kafka, ours)`` over the files
    Kafka dumps without throwing; ``crashes`` the same for each file it throws on, run
    alone."""

    runs: list[tuple[list[str], DumpRun, DumpRun]]
    crashes: list[tuple[str, DumpRun, DumpRun]]

    def differences(self, keep=lambda name: True) -> list[str]:
        """The runs' differences, and for each file Kafka throws on: what differs from
        "the same stdout up to the throw, then one error line naming the file and exit 2"
        (we print a one-line error where Kafka prints a stack trace)."""
        found = [d for _, k, o in self.runs for d in differences(k, o, keep)]
        for name, kafka, ours in self.crashes:
            if not keep(name):
                continue
            diff = first_difference(kafka.stdout.split("\n"), ours.stdout.split("\n"))
            if diff:
                found.append(f"stdout {name}: {diff}")
            lines = ours.stderr.splitlines()
            if ours.returncode != 2 or len(lines) != 1 or name not in lines[0]:
                found.append(f"stderr {name}: Kafka throws {kafka.stderr.splitlines()[0]!r}; "
                             f"ours exits {ours.returncode} with {ours.stderr[-300:]!r}")
        return found


def compare_over(jars: Path, log4j: Path, files: list[str], flags: list[str]) -> Compared:
    """Run both tools over ``files`` (in as few runs as one argument and Kafka's exceptions
    allow: a run that throws is cut at the file it threw on, which is then run alone)."""
    out = Compared([], [])
    for chunk in chunks(files):
        todo = chunk
        while todo:
            kafka = kafka_dump(jars, log4j, todo, flags)
            if not crashed(kafka):
                out.runs.append((todo, kafka, our_dump(todo, flags)))
                break
            dumped = [s for s in stdout_sections(kafka.stdout)]
            at = todo.index(dumped[-1])
            if at:
                head = todo[:at]
                out.runs.append((head, kafka_dump(jars, log4j, head, flags),
                                 our_dump(head, flags)))
            bad = [todo[at]]
            out.crashes.append((todo[at], kafka_dump(jars, log4j, bad, flags),
                                our_dump(bad, flags)))
            todo = todo[at + 1:]
    return out


_OFFSET_NAMED = (".log", ".index", ".timeindex", ".txnindex")


def kafka_throws_on(path: Path) -> str | None:
    """Why DumpLogSegments would stop with an exception on ``path`` (``None``: it dumps or
    ignores it): a name without a ``.`` (it takes the suffix from the last dot); a segment or
    index file whose name does not start with an offset (it parses the part before the first
    dot as a long); an index without its ``.log`` (it opens the log to check entries)."""
    name = path.name
    if "." not in name:
        return "no '.' in the file name (String.substring(-1))"
    if name.endswith(_OFFSET_NAMED):
        head = name.split(".")[0]
        if not (head.lstrip("-").isdigit()):
            return f"{head!r} is not an offset (NumberFormatException)"
        if name.endswith((".index", ".timeindex")) and not (path.parent / f"{head}.log").exists():
            return "its .log is missing (NoSuchFileException)"
    return None
