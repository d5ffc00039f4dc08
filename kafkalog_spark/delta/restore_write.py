"""Writing restored partitions (Delta layer): a table's rows, grouped back into their batches,
encoded as v2 batches with the recorded header fields, and cut into segments — or, for a Spark
restore in offset ranges, into one range's piece file (:mod:`.restore_spark`).

Each segment is streamed to ``<base>.log.tmp`` and renamed to ``<base>.log`` when whole, so a run
killed anywhere leaves whole segments and the next run continues from the log end offset;
:func:`open_partition` first removes what a killed run left unfinished (segments and pieces).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pyarrow as pa

from ..codec import layout as L
from ..codec.files import naming as N
from ..codec.files import properties as M
from ..codec.records.encode import BatchSpec, encode_batches
from ..codec.records.scan import EntryTable
from ..errors import Location, LogDirError
from ..log.discovery import discover
from ..log.partition_state import segment_next_offset
from ..storage import storage_for
from ..storage.atomic import write_checkpoint_file
from .restore_read import Tp

Step = Callable[[str], None]
PIECE_SUFFIX = ".piece.tmp"  # an offset range's batches, before they are joined


@dataclass
class PartitionRestore:
    """What restore did (or would do) to one partition."""

    topic: str
    partition: int
    start: int  # the partition's log end offset before the run (0: new)
    end: int = 0  # after
    batches: int = 0
    records: int = 0
    bytes: int = 0
    segments: list[int] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"topic": self.topic, "partition": self.partition, "from_offset": self.start,
                "log_end_offset": self.end, "batches": self.batches, "records": self.records,
                "bytes": self.bytes, "segments": self.segments}


def log_end(pdir: Path) -> int:
    """The log end offset of an existing partition dir (0 when new)."""
    if not storage_for(pdir).is_dir(pdir):
        return 0
    segs = discover([pdir]).partitions[0].segments
    return segment_next_offset(segs[-1]) if segs else 0


def encoded_batches(rows: pa.Table, where: str) -> Iterator[tuple[int, int, memoryview]]:
    """``(base offset, last offset, bytes)`` of each batch of ``rows`` (whole batches, in
    offset order), encoded from the recorded header fields (module docstring)."""
    base = rows["batchBaseOffset"].to_numpy()
    starts = np.flatnonzero(np.diff(base, prepend=base[0] - 1) != 0)
    bounds = np.append(starts, rows.num_rows).tolist()
    firsts = rows.take(pa.array(starts)).to_pydict()  # each batch's header fields, once
    codecs = [L.CODEC_IDS.get(c) for c in firsts["compression"]]
    ts_ms = rows["timestamp"].cast(pa.int64()).fill_null(-1000).to_numpy() // 1000
    off = rows["offset"].to_numpy()
    keys, values, headers = rows["key"], rows["value"], rows["headers"]
    if headers.null_count:  # v0/v1 records have none
        headers = pa.array([h or [] for h in headers.to_pylist()], headers.type)
    specs, lasts = [], []
    for i, a in enumerate(bounds[:-1]):
        b0, last = firsts["batchBaseOffset"][i], firsts["batchLastOffset"][i]
        if codecs[i] is None:
            raise LogDirError(f"unknown compression {firsts['compression'][i]!r} in the table",
                              Location(where, None, b0))
        ts_type = max(int(firsts["timestampType"][i]), 0)
        seq = firsts["sequence"][i]
        base_seq = -1 if seq is None or seq < 0 else (seq - (int(off[a]) - b0)) % (L.INT32_MAX + 1)
        specs.append(BatchSpec(
            base_offset=b0, partition_leader_epoch=firsts["leaderEpoch"][i], codec=codecs[i],
            timestamp_type=ts_type,
            log_append_time=int(ts_ms[a]) if ts_type == L.LOG_APPEND_TIME else None,
            producer_id=firsts["producerId"][i], producer_epoch=firsts["producerEpoch"][i],
            base_sequence=base_seq, is_transactional=bool(firsts["isTransactional"][i]),
            is_control=bool(firsts["isControl"][i]), last_offset_delta=last - b0))
        lasts.append(last)
    encoded = encode_batches(keys, values, ts_ms, off, specs=specs, counts=np.diff(bounds),
                             headers=headers)
    for i, (spec, last) in enumerate(zip(specs, lasts)):
        yield spec.base_offset, last, encoded.batch(i)


class Plan:
    """A dry run's sink: counts what would be written."""

    def __init__(self, tp: Tp, start: int) -> None:
        self.result = PartitionRestore(tp[0], tp[1], start, start)

    def take(self, rows: pa.Table) -> None:
        self.result.records += rows.num_rows
        self.result.batches += len(np.unique(rows["batchBaseOffset"].to_numpy()))
        self.result.end = int(rows["batchLastOffset"][-1].as_py()) + 1


class Writer:
    """A partition's sink: its batches encoded and handed to ``out`` — its segments
    (:meth:`segments`), or one offset range's piece of a partition restored in ranges."""

    def __init__(self, pdir: Path, tp: Tp, start: int, out: SegmentWriter | PieceWriter
                 ) -> None:
        self.pdir, self.tp, self.out = pdir, tp, out
        self.result = PartitionRestore(tp[0], tp[1], start, start)

    @classmethod
    def segments(cls, dest: Path, tp: Tp, segment_bytes: int, step: Step | None) -> Writer:
        """The sink of a whole partition: into its segments, from its log end (a killed run's
        unfinished files removed first)."""
        pdir = open_partition(dest, tp)
        return cls(pdir, tp, log_end(pdir), SegmentWriter(pdir, segment_bytes, step))

    def take(self, rows: pa.Table) -> None:
        out, start = self.result, self.result.start
        if int(rows["batchBaseOffset"][0].as_py()) < start:
            raise LogDirError(f"{self.pdir} ends at offset {start}, inside a batch of the table "
                              f"(base offset {rows['batchBaseOffset'][0].as_py()})",
                              Location(str(self.pdir), None, start))
        out.records += rows.num_rows
        for b0, last, data in encoded_batches(rows, str(self.pdir)):
            self.out.add(b0, last, data)
            out.batches += 1
            out.bytes += len(data)
            out.end = last + 1

    def close(self, topic_id: str, step: Step | None) -> PartitionRestore:
        """The segments made whole, then ``partition.metadata``."""
        self.result.segments = self.out.close()
        write_metadata(self.pdir, topic_id, step)
        return self.result


def partition_dir(dest: Path, tp: Tp) -> Path:
    """Where ``tp``'s partition dir is in the log dir ``dest``."""
    return dest / N.partition_dir_name(*tp)


def open_partition(dest: Path, tp: Tp) -> Path:
    """The partition dir of ``tp`` in ``dest``, made, without a killed run's unfinished files
    (segments and range pieces being written)."""
    pdir = partition_dir(dest, tp)
    storage_for(pdir).make_dirs(pdir, exist_ok=True)
    remove_unfinished(pdir)
    return pdir


def remove_unfinished(pdir: Path) -> None:
    fs = storage_for(pdir)
    for name in fs.listdir(pdir):
        if name.endswith((f".{N.LOG}.tmp", PIECE_SUFFIX)):
            fs.remove(pdir / name)


def write_metadata(pdir: Path, topic_id: str, step: Step | None) -> None:
    meta = pdir / N.PARTITION_METADATA
    if not storage_for(meta).exists(meta):
        if step is not None:
            step(f"write {meta}")
        write_checkpoint_file(meta, M.format_partition_metadata(topic_id))


class PieceWriter:
    """One offset range's batches, in one file (not a segment: joined into segments later;
    not made durable — a killed run's pieces are removed and written again)."""

    def __init__(self, path: Path) -> None:
        self.file = storage_for(path).open_write(path)

    def add(self, base: int, last: int, data: bytes | memoryview) -> None:
        self.file.write(data)

    def close(self) -> list[int]:
        self.file.close()
        return []


class SegmentWriter:
    """Batches into segment files: ``<base>.log.tmp`` streamed, renamed whole."""

    def __init__(self, pdir: Path, segment_bytes: int, step: Step | None) -> None:
        self.pdir, self.limit, self.step = pdir, segment_bytes, step
        self.fs = storage_for(pdir)
        self.file = None
        self.base = self.size = 0
        self.written: list[int] = []

    def add(self, base: int, last: int, data: bytes | memoryview) -> None:
        self._open_for(base, last, len(data))
        self.file.write(data)
        self.size += len(data)

    def copy(self, src: BinaryIO, found: EntryTable) -> None:
        """The batches ``found`` in the file ``src`` (consecutive, in offset order), copied by
        the kernel in runs that stay in one segment: a range's piece joined."""
        base, last, size = (a.tolist() for a in (found.offset, found.last_offset,
                                                 found.entry_size))
        i, at = 0, int(found.position[0]) if len(found) else 0
        while i < len(size):
            self._open_for(base[i], last[i], size[i])
            run, j = size[i], i + 1
            while j < len(size) and self._fits(run + size[j], last[j]):
                run, j = run + size[j], j + 1
            self.file.flush()
            copy_range(src, self.file, at, run)
            self.size += run
            at, i = at + run, j

    def _fits(self, more: int, last: int) -> bool:
        """Whether ``more`` bytes ending at offset ``last`` go into the open segment."""
        return self.size + more <= self.limit and last - self.base <= L.INT32_MAX

    def _open_for(self, base: int, last: int, size: int) -> None:
        """A segment open for a batch: the open one, unless the batch does not fit it."""
        if self.file is not None and not self._fits(size, last):
            self._finish()
        if self.file is None:
            self.base, self.size = base, 0
            tmp = self.pdir / f"{N.segment_file_name(base, N.LOG)}.tmp"
            if self.step is not None:
                self.step(f"write {tmp}")
            self.file = self.fs.open_write(tmp)

    def _finish(self) -> None:
        self.fs.close_durably(self.file)
        self.file = None
        final = self.pdir / N.segment_file_name(self.base, N.LOG)
        if self.step is not None:
            self.step(f"rename {final.name}.tmp -> {final.name}")
        self.fs.rename(final.with_name(final.name + ".tmp"), final)
        self.fs.fsync_dir(self.pdir)
        self.written.append(self.base)

    def close(self) -> list[int]:
        if self.file is not None:
            self._finish()
        return self.written


def copy_range(src: BinaryIO, dst: BinaryIO, offset: int, count: int) -> None:
    """``count`` bytes of ``src`` from ``offset`` appended to ``dst`` at its position: in the
    kernel where it can (``copy_file_range``), else through a buffer."""
    done = 0
    while done < count:
        try:
            n = os.copy_file_range(src.fileno(), dst.fileno(), count - done, offset + done)
        except OSError:  # another file system, an old kernel: copy through a buffer
            src.seek(offset + done)
            n = dst.write(src.read(min(count - done, 8 << 20)))
        if n == 0:
            raise LogDirError(f"{getattr(src, 'name', src)} ends before byte {offset + count}",
                              Location(str(getattr(src, 'name', '')), offset + done))
        done += n
