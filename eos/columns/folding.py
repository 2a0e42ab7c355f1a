"""Runs of records handed over one by one, folded into typed blocks for the record path,
and the records each block stands for (:meth:`Folded.pop`: a block goes back to them).

A connector written against the per-record API hands over a :class:`SourceRecord` per
row. Consecutive records that share a topic and their schemas (the common case: one
table, one file) go through the transforms and the converters as one
``RecordBlock(encoded=False)`` (:func:`fold`): the bundled steps then work column by
column and the JSON converter writes a column at a time, as for the blocks a connector
hands over itself. The bytes, topics, keys, partitions (each row's from its key, the
records without a key sticking to one partition per segment and topic, as before) and
timestamps are those the records would get one by one.

A record folds when it is not encoded, has a value schema, no partition of its own, no
headers, and a key schema or no key. Nothing else changes for the record: its source
offset commits as polled (the send step takes offsets from the polled segment), and the
record path goes back to the records themselves (:attr:`Folded.runs`) wherever a run
cannot stay a block (a step that needs single rows, or a failing row: then the record is
named, skipped or dead-lettered alone, as without folding).
"""

from __future__ import annotations

from collections.abc import Sequence

from eos.api import RecordBlock, SourceRecord

Outgoing = SourceRecord | RecordBlock


FOLD_MIN = 16
"""Fewer records in a row than this stay records (a block would not pay for itself)."""


class Folded:
    """The folded blocks of one segment: a block (by identity) → the records in it."""

    __slots__ = ("runs",)

    def __init__(self) -> None:
        self.runs: dict[int, list[SourceRecord]] = {}

    def clear(self) -> None:
        self.runs = {}

    def pop(self, block: RecordBlock) -> list[SourceRecord] | None:
        """The records ``block`` was folded from (None: not a folded block)."""
        return self.runs.pop(id(block), None) if self.runs else None

    def keep(self, block: RecordBlock, records: list[SourceRecord]) -> None:
        """``block`` (the transforms' result) stands for ``records``."""
        self.runs[id(block)] = records

    def fold(self, items: Sequence[Outgoing]) -> list[Outgoing]:
        """``items`` with every run of :data:`FOLD_MIN` or more foldable records in a row
        (same topic, same schema objects) replaced by one typed block."""
        out: list[Outgoing] = []
        run: list[SourceRecord] = []
        topic: str | None = None
        key_schema = value_schema = None
        for item in items:
            if (
                type(item) is SourceRecord and not item.encoded and item.partition is None
                and not item.headers and item.value_schema is not None
                and (item.key is None or item.key_schema is not None)
            ):  # fmt: skip
                if (
                    item.topic == topic and item.value_schema is value_schema
                    and item.key_schema is key_schema
                ):  # fmt: skip
                    run.append(item)
                    continue
                self._flush(run, out)
                run = [item]
                topic, key_schema, value_schema = item.topic, item.key_schema, item.value_schema
                continue
            self._flush(run, out)
            run, topic = [], None
            out.append(item)
        self._flush(run, out)
        return out

    def _flush(self, run: list[SourceRecord], out: list[Outgoing]) -> None:
        if len(run) < FOLD_MIN:
            out += run
            return
        first = run[0]
        stamps = [r.timestamp for r in run]
        column: list[int | None] | None = None  # no timestamp at all: no column
        if stamps.count(None) != len(stamps):
            if not all(s is None or type(s) is int for s in stamps):
                out += run  # the producer names the record whose timestamp is wrong
                return
            column = stamps
        block = RecordBlock(
            first.source_partition, run[-1].source_offset, first.topic,
            [r.value for r in run],
            None if first.key_schema is None else [r.key for r in run],
            column,
            key_schema=first.key_schema, value_schema=first.value_schema, encoded=False,
        )  # fmt: skip
        self.runs[id(block)] = run
        out.append(block)
