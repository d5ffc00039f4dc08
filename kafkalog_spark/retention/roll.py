"""Rolling the log before retention deletes every segment (retention layer): ``UnifiedLog.roll``
offline.

When every segment, the active one too, is past retention (``UnifiedLog.deletableSegments``
takes the active segment once the high watermark reaches the log end), Kafka's
``deleteSegments`` first rolls a new empty segment at the log end offset — a log always has a
segment — and the roll takes a producer snapshot there (``ProducerStateManager.takeSnapshot``,
none when one exists at that offset). :func:`roll_empty_segment` writes the same files: the
snapshot, the empty ``.index`` and ``.timeindex`` (a broker trims them to nothing on a clean
stop), then the empty ``.log``, last, as it is what makes the segment.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..codec.files import naming as N
from ..codec.files.snapshot import ProducerStateTracker, read_snapshot
from ..errors import KafkaLogError
from ..log.model import PartitionDir
from ..storage import mapped_file, storage_for
from ..storage.atomic import atomic_write_bytes

Step = Callable[[str], None]


def producer_state_at_end(part: PartitionDir) -> bytes:
    """The producer snapshot at the log end of ``part``: the newest readable snapshot at one of
    its segments' base offsets, and the batches of the segments from there replayed."""
    bases = [s.base_offset for s in part.segments]
    start, tracker = None, ProducerStateTracker()
    for path in sorted(part.snapshots, reverse=True):
        offset = N.offset_from_file_name(path.name)
        if offset not in bases:
            continue
        try:
            tracker.load_snapshot(read_snapshot(storage_for(path).read_bytes(path),
                                                file=str(path)))
        except KafkaLogError:
            continue  # a broker's load skips a corrupt snapshot for an older one too
        start = offset
        break
    for seg in part.segments:
        if start is None or seg.base_offset >= start:
            with mapped_file(seg.log) as buf:
                tracker.apply(buf, file=str(seg.log))
    return tracker.snapshot(order="java_hashmap").to_bytes()  # as the broker's roll writes it


def roll_empty_segment(part: PartitionDir, base_offset: int, step: Step | None = None) -> None:
    """Write an empty segment at ``base_offset`` (the log end offset) and the producer snapshot
    there, each file atomically; a file already there (a killed run's) is kept."""
    pdir = Path(part.path)
    fs = storage_for(pdir)
    snapshot = pdir / N.segment_file_name(base_offset, N.SNAPSHOT)
    if not fs.exists(snapshot):
        if step is not None:
            step(f"write {snapshot.name}")
        atomic_write_bytes(snapshot, producer_state_at_end(part))
    for kind in (N.INDEX, N.TIME_INDEX, N.LOG):
        path = pdir / N.segment_file_name(base_offset, kind)
        if not fs.exists(path):
            if step is not None:
                step(f"write {path.name}")
            atomic_write_bytes(path, b"")
