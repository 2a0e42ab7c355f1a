"""Column helpers for transforms that work on a :class:`~eos.api.RecordBlock` without
making a record per row: the rows a mask selects, per-row topics, header columns.

A block's columns may be Python sequences or ``pyarrow`` arrays (``encoded=False``
blocks); rows are selected with ``take`` where the column has it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from eos.api.records import RecordBlock
from eos.transforms.base import Mask


def take(column: Any, keep: Sequence[int]) -> Any:
    """The entries of ``column`` at ``keep`` (a pyarrow array stays one)."""
    if hasattr(column, "take") and not isinstance(column, list | tuple):
        return column.take(list(keep))
    return [column[i] for i in keep]


def drop_rows(block: RecordBlock, mask: Sequence[bool]) -> RecordBlock | None:
    """``block`` without the rows ``mask`` marks; None when no row is left."""
    keep = [i for i, dropped in enumerate(mask) if not dropped]
    if not keep:
        return None
    if len(keep) == len(mask):
        return block

    def column(c: Any) -> Any:
        return None if c is None else take(c, keep)

    kept = dataclasses.replace(
        block,
        values=take(block.values, keep),
        keys=column(block.keys),
        timestamps=column(block.timestamps),
        topics=column(block.topics),
        header_columns={name: take(c, keep) for name, c in block.header_columns.items()},
    )
    return kept if kept.topics is None else with_topics(kept, kept.topics)


def map_topics(block: RecordBlock, mask: Mask, rename: Callable[[str], str]) -> RecordBlock:
    """``block`` with ``rename`` applied to the topic of each row ``mask`` selects."""
    if block.topics is None and mask is None:
        return dataclasses.replace(block, topic=rename(block.topic))
    topics = block.topics if block.topics is not None else [block.topic] * len(block)
    if mask is None:
        renamed = [rename(t) for t in topics]
    else:
        renamed = [rename(t) if m else t for t, m in zip(topics, mask, strict=True)]
    return with_topics(block, renamed)


def with_topics(block: RecordBlock, topics: Sequence[str]) -> RecordBlock:
    """``block`` with one topic per row (a single ``topic`` when they are all one)."""
    first = topics[0] if topics else block.topic
    if all(t == first for t in topics):
        return dataclasses.replace(block, topic=first, topics=None)
    return dataclasses.replace(block, topics=list(topics))


def selected(mask: Mask, n: int) -> Sequence[bool]:
    """``mask`` as one bool per row."""
    return [True] * n if mask is None else mask
