"""Changes modes: every change of a Delta Lake or Iceberg table, version by version.

``mode=delta-changes`` reads a Delta table's change data feed (``readChangeFeed``)
one commit version at a time; ``mode=iceberg-changes`` reads an Iceberg table one
snapshot at a time: the rows each ``append`` snapshot added (incremental append
scan), or with ``changelog=true`` Iceberg's changelog (inserts, deletes and
updates, carry-over rows removed, updates paired by ``key.columns``). Both give
every change row the columns of :mod:`.changes_feed`; the Delta and Iceberg
specifics live in :mod:`.delta_changes` and :mod:`.iceberg_changes`, the reading
(order, resuming, transactions) here.

Source partition ``{"delta": <table>}`` or ``{"iceberg": <table>}`` (name or path as
configured); offset ``{"version": <version or snapshot id>, "row": <rows of it
delivered>, "done": <bool>}``.

**Row order.** Within a version the rows are sorted by change type
(``update_preimage``, ``delete``, ``update_postimage``, ``insert``) and then by
every data column: a total order up to rows that are identical in every column
(which are interchangeable), so a version read again yields the same sequence and
a task resumed at row ``n`` of a version skips exactly the rows delivered before
the crash. Rows reach Python range partition by range partition (about
``max.buffered.rows`` each), in order, as in files mode.

**Transactions.** With ``transaction.boundary=connector`` a version is one Kafka
transaction, or one per ``transaction.max.rows`` rows if it has more, so a
read_committed consumer sees each table commit whole.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from eos.api import (
    OffsetStorageReader,
    RecordBlock,
    SourceRecord,
    TransactionContext,
    WorkerResources,
)
from services.connectors.spark.arrow_stream import RowStream, open_arrow_stream
from services.connectors.spark.changes_feed import (
    CHANGE_TYPE,
    COMMIT_TIMESTAMP,
    COMMIT_VERSION,
    METADATA,
    ChangeFeed,
    Position,
    quoted,
)
from services.connectors.spark.changes_feed import ChangesUnavailable as ChangesUnavailable
from services.connectors.spark.config import SparkSourceSettings
from services.connectors.spark.delta_changes import DeltaFeed
from services.connectors.spark.iceberg_changes import IcebergFeed
from services.connectors.spark.lakehouse import require
from services.connectors.spark.mapping import VALUE_COLUMN, Encoder, RowHeader
from services.connectors.spark.session import task_session

if TYPE_CHECKING:
    from pyspark.sql import Column, SparkSession

RANK = {"update_preimage": 0, "delete": 1, "update_postimage": 2, "insert": 3}
"""Order of the change types within a version (a key's old row before its new one)."""
CHANGE = "__eos_change"
"""Hidden column: the change type (kept whatever ``change.metadata`` says)."""
HIDDEN_METADATA = {name: f"__eos{name}" for name in METADATA}
"""Hidden columns carrying the metadata headers as bytes (``change.metadata=headers``)."""


def _sort_key(column: Column, data_type: Any) -> Column:
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    def orderable(t: Any) -> bool:
        if isinstance(t, T.MapType | T.VariantType):
            return False
        if isinstance(t, T.ArrayType):
            return orderable(t.elementType)
        if isinstance(t, T.StructType):
            return all(orderable(f.dataType) for f in t.fields)
        return True

    return column if orderable(data_type) else F.to_json(column)


class VersionCursor:
    """The rows of one version from a row on, in order, as records (blocking)."""

    def __init__(
        self,
        feed: ChangeFeed,
        session: SparkSession,
        version: int,
        start: int,
    ) -> None:
        from pyspark.sql import functions as F

        settings = feed.settings
        self.feed, self.version, self.next_row = feed, version, start
        df = feed.changes(session, version)
        missing = [c for c in METADATA if c not in df.columns]
        if missing:
            raise RuntimeError(f"{feed.table}: change rows lack {missing}")
        change = F.col(CHANGE_TYPE)
        if not settings.preimages:
            df = df.filter(change != "update_preimage")
        data = [f for f in df.schema.fields if f.name not in METADATA]
        rank = F.lit(len(RANK))
        for name, n in RANK.items():
            rank = F.when(change == name, F.lit(n)).otherwise(rank)
        keys = [rank, *(_sort_key(F.col(quoted(f.name)), f.dataType) for f in data)]
        hidden: list[Column] = [change.alias(CHANGE)]
        keep = [CHANGE]
        if not settings.metadata_in_value:
            timestamp = F.date_format(F.col(COMMIT_TIMESTAMP), "yyyy-MM-dd'T'HH:mm:ss.SSSSSSxxx")
            texts = {
                CHANGE_TYPE: change,
                COMMIT_VERSION: F.col(COMMIT_VERSION).cast("string"),
                COMMIT_TIMESTAMP: timestamp,
            }
            hidden += [texts[n].cast("binary").alias(HIDDEN_METADATA[n]) for n in METADATA]
            keep += list(HIDDEN_METADATA.values())
            df = df.select(
                *(F.col(quoted(f.name)) for f in data), *hidden, rank.alias("__eos_rank")
            )
        else:
            df = df.select("*", *hidden, rank.alias("__eos_rank"))
        keep.append("__eos_rank")
        rows = df.count()
        pieces = max(1, math.ceil(rows / settings.max_buffered_rows))
        ordered = df.repartitionByRange(pieces, *keys).sortWithinPartitions(*keys)
        self.encoder = Encoder(ordered, settings, keep=keep, where=f"{feed.table}@{version}")
        frame = self.encoder.frame
        if settings.tombstones and self.encoder.mapper is None:
            frame = frame.withColumn(
                VALUE_COLUMN, F.when(F.col(CHANGE) != "delete", F.col(VALUE_COLUMN))
            )
        self.rows = rows
        self._stream: RowStream | None = open_arrow_stream(frame)
        self._skip(start)

    def _skip(self, rows: int) -> None:
        while rows > 0 and self._stream is not None:
            chunk = self.encoder.read(self._stream, min(rows, 100_000))
            got = len(chunk.column(CHANGE))
            if not got:
                break
            rows -= got
        if rows > 0:
            raise RuntimeError(
                f"{self.feed.table} version {self.version} has fewer rows than the offset says "
                f"({self.next_row}); was the table's history rewritten?"
            )

    @property
    def exhausted(self) -> bool:
        return self._stream is None

    def next_records(self, limit: int) -> tuple[list[SourceRecord | RecordBlock], Position]:
        """Up to ``limit`` records and the position after them."""
        stream = self._stream
        if stream is None:
            return [], Position(self.version, self.next_row, done=True)
        chunk = self.encoder.read(stream, limit)
        changes = chunk.column(CHANGE)
        if not changes:
            self.close()
            return [], Position(self.version, self.next_row, done=True)
        first = self.next_row
        self.next_row = end = first + len(changes)
        done = not stream.prefetch()
        position = Position(self.version, end, done)
        headers: list[RowHeader] = []
        if not self.feed.settings.metadata_in_value:
            headers = [(n, chunk.column(HIDDEN_METADATA[n])) for n in METADATA]
        records = self.encoder.records(
            chunk,
            topic=self.feed.settings.topic,
            partition=self.feed.partition,
            offset={"version": self.version, "row": end, "done": done},
            headers=(),
            row_headers=headers,
        )
        if self.feed.settings.tombstones and self.encoder.mapper is not None:
            records = _tombstones(records, changes)
        if done:
            self.close()
        return records, position

    def close(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            stream.close()


def _tombstones(
    records: list[SourceRecord | RecordBlock], changes: Sequence[str]
) -> list[SourceRecord | RecordBlock]:
    out: list[SourceRecord | RecordBlock] = []
    for record, change in zip(records, changes, strict=True):
        if isinstance(record, SourceRecord) and change == "delete":
            record = replace(record, value=None)
        out.append(record)
    return out


def feed_of(table: str, settings: SparkSourceSettings, connector: str) -> ChangeFeed:
    cls = DeltaFeed if settings.table_format == "delta" else IcebergFeed
    return cls(table, settings, connector)


class TableChanges:
    """One table's changes for one task: where it stands, the open version."""

    def __init__(self, feed: ChangeFeed) -> None:
        self.feed = feed
        self.position: Position | None = None
        self.cursor: VersionCursor | None = None
        self.rows_in_transaction = 0

    def advance(self, session: SparkSession) -> bool:
        """Open the next version with rows to read; False if there is none yet."""
        while self.cursor is None:
            versions = self.feed.pending(session, self.position)
            if not versions:
                return False
            version = versions[0]
            start = self.position.row if self.position and self.position.version == version else 0
            try:
                cursor = VersionCursor(self.feed, session, version, start)
                empty = not cursor.rows or start >= cursor.rows
            except Exception as exc:
                raise (self.feed.explain(exc, version) or exc) from exc
            if empty:
                cursor.close()
                self.position = Position(version, start, done=True)
                continue
            self.cursor = cursor
        return True

    def read(self, limit: int) -> list[SourceRecord | RecordBlock]:
        cursor = self.cursor
        assert cursor is not None
        try:
            records, self.position = cursor.next_records(limit)
        except Exception as exc:
            raise (self.feed.explain(exc, cursor.version) or exc) from exc
        if cursor.exhausted:
            self.cursor = None
        return records


class ChangesReader:
    """A task's tables, read in turn (methods block except :meth:`start`, :meth:`poll`)."""

    def __init__(
        self,
        settings: SparkSourceSettings,
        resources: WorkerResources,
        connector: str,
        transactions: TransactionContext | None,
    ) -> None:
        self._settings = settings
        self._resources = resources
        self._transactions = transactions
        self._tables = [TableChanges(feed_of(t, settings, connector)) for t in settings.tables]
        self._turn = 0
        self._session: SparkSession | None = None

    async def start(self, offsets: OffsetStorageReader) -> None:
        require(self._settings.table_format, self._resources.settings)
        self._session = await self._resources.run_blocking(self._make_session)
        committed = await offsets.offsets([t.feed.partition for t in self._tables])
        for table, offset in zip(self._tables, committed, strict=True):
            if offset is not None:
                table.position = Position(
                    int(offset["version"]), int(offset.get("row", 0)), bool(offset.get("done"))
                )
            table.position = await self._resources.run_blocking(
                table.feed.start, self._session, table.position
            )

    def _make_session(self) -> SparkSession:
        rows = max(1, self._settings.max_buffered_rows // 4)
        return task_session(self._resources, arrow_batch_rows=rows)

    async def poll(self) -> list[SourceRecord | RecordBlock]:
        return await self._resources.run_blocking(self.read_batch)

    def read_batch(self) -> list[SourceRecord | RecordBlock]:
        """The next records of the next table that has any (blocking); empty if none."""
        assert self._session is not None, "start() first"
        for _ in range(len(self._tables)):
            table = self._tables[self._turn]
            if table.cursor is None and not table.advance(self._session):
                self._turn = (self._turn + 1) % len(self._tables)
                continue
            return self._read(table)
        return []

    def _read(self, table: TableChanges) -> list[SourceRecord | RecordBlock]:
        limit = self._settings.rows_per_poll
        if self._transactions is not None:
            limit = min(limit, self._settings.transaction_max_rows - table.rows_in_transaction)
        records = table.read(max(1, limit))
        if table.cursor is None:  # version done: the next poll may serve another table
            self._turn = (self._turn + 1) % len(self._tables)
        if not records or self._transactions is None:
            return records
        table.rows_in_transaction += sum(
            len(r) if isinstance(r, RecordBlock) else 1 for r in records
        )
        assert table.position is not None
        full = table.rows_in_transaction >= self._settings.transaction_max_rows
        if table.position.done or full:
            self._transactions.commit_transaction(records[-1])
            table.rows_in_transaction = 0
        return records

    @property
    def caught_up(self) -> bool:
        return all(t.cursor is None for t in self._tables)

    async def stop(self) -> None:
        for table in self._tables:
            if table.cursor is not None:
                await self._resources.run_blocking(table.cursor.close)
                table.cursor = None
