"""The readable remote segments of one partition (tier layer), whatever the tier's layout, and
what was left out and why.

Which segments exist comes from ``__remote_log_metadata`` when its records of the partition are
at hand: the segments whose latest state is COPY_SEGMENT_FINISHED, unless the partition's remote
data was deleted (:mod:`.metadata`); each must be in the tier with the size recorded. Otherwise
the tier's folder of the partition is listed (copy states then unknown: said in the notes).
The partition's folder is chosen by topic id (``partition.metadata``): a folder of an earlier
topic of the same name is not read.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import Location, RemoteTierError
from . import aiven as aiven_layout
from . import local_tiered_storage as lts
from .metadata import RemoteLogMetadata
from .tier import AIVEN, RemoteSegment, RemoteTier

SOURCE_METADATA = "__remote_log_metadata"
SOURCE_LISTING = "tier listing"


@dataclass(frozen=True)
class TierSegments:
    """One partition's remote segments (readable, in start-offset order), where the list came
    from, and one line per segment or folder left out."""

    segments: tuple[RemoteSegment, ...]
    source: str
    topic_id: str | None
    not_read: tuple[str, ...] = ()


def tier_segments(tier: RemoteTier, topic: str, partition: int, topic_id: str | None,
                  metadata: RemoteLogMetadata | None) -> TierSegments:
    """The remote segments of ``topic``-``partition`` (module docstring).

    Parameters
    ----------
    tier : RemoteTier
        Where to look.
    topic_id : str, optional
        From the partition dir's ``partition.metadata``; without it the tier must hold one
        folder of the partition.
    metadata : dict, optional
        The replayed ``__remote_log_metadata`` (``None``: not at hand).

    Raises
    ------
    RemoteTierError
        Several folders of the partition and no topic id to choose; a copied segment missing
        from the tier or of another size.
    """
    aiven = tier.layout == AIVEN
    folders = (aiven_layout.partition_folders(tier, topic, partition) if aiven
               else lts.partition_folders(tier, topic, partition))
    if topic_id is None and len(folders) > 1:
        raise RemoteTierError(
            f"{topic}-{partition} has {len(folders)} folders in the tier (topic ids "
            f"{', '.join(sorted(folders))}) and its partition dir no partition.metadata to "
            "choose one", Location(str(tier.root)))
    if topic_id is None and folders:
        topic_id = next(iter(folders))
    not_read = [f"{folders[t]}: topic id {t}, not this topic's ({topic_id})"
                for t in sorted(folders) if t != topic_id]
    folder = folders.get(topic_id) if topic_id is not None else None
    plog = None if metadata is None or topic_id is None else metadata.get((topic_id, partition))
    if plog is None:
        if folder is None:
            return TierSegments((), SOURCE_LISTING, topic_id, tuple(not_read))
        listing = (aiven_layout.listed_segments(tier, folder) if aiven
                   else lts.listed_segments(folder))
        not_read += [f"{line} (incomplete copy)" for line in listing.incomplete]
        return TierSegments(listing.segments, SOURCE_LISTING, topic_id, tuple(not_read))
    metas = sorted(plog.segments.values(), key=lambda m: (m.start_offset, m.segment_id))
    if plog.deleted:
        not_read += [f"{_name(m)}: the partition's remote data is deleted "
                     f"({plog.delete_state_name})" for m in metas]
        return TierSegments((), SOURCE_METADATA, topic_id, tuple(not_read))
    not_read += [f"{_name(m)}: {m.state_name}" for m in metas if not m.copied]
    copied = [m for m in metas if m.copied]
    found = (aiven_layout.metadata_segments(tier, folder, copied) if aiven
             else lts.metadata_segments(folder, copied))
    return TierSegments(tuple(found), SOURCE_METADATA, topic_id, tuple(not_read))


def _name(m) -> str:
    return f"{m.start_offset:020d}-{m.segment_id} (offsets {m.start_offset}..{m.end_offset})"
