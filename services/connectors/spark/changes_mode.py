"""Changes modes: every change of a Delta Lake or Iceberg table, version by version.

``mode=delta-changes`` reads a Delta table's change data feed (``readChangeFeed``)
one commit version at a time; ``mode=iceberg-changes`` reads an Iceberg table one
snapshot at a time: the rows each ``append`` snapshot added (incremental append
scan), or with ``changelog=true`` Iceberg's changelog (inserts, deletes and
updates, carry-over rows removed, updates paired by ``key.columns``). Both give
every change row the columns ``_change_type`` (``insert``, ``delete``,
``update_preimage``, ``update_postimage``), ``_commit_version`` (Delta version or
Iceberg snapshot id) and ``_commit_timestamp``.

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

import datetime
import logging
import math
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from eos.api import (
    OffsetStorageReader,
    RecordBlock,
    SourceRecord,
    TransactionContext,
    WorkerResources,
)
from services.connectors.spark.arrow_stream import RowStream, open_arrow_stream
from services.connectors.spark.config import SparkSourceSettings
from services.connectors.spark.lakehouse import require
from services.connectors.spark.mapping import VALUE_COLUMN, Encoder, RowHeader
from services.connectors.spark.session import task_session

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

log = logging.getLogger(__name__)

CHANGE_TYPE = "_change_type"
COMMIT_VERSION = "_commit_version"
COMMIT_TIMESTAMP = "_commit_timestamp"
METADATA = (CHANGE_TYPE, COMMIT_VERSION, COMMIT_TIMESTAMP)
RANK = {"update_preimage": 0, "delete": 1, "update_postimage": 2, "insert": 3}
"""Order of the change types within a version (a key's old row before its new one)."""
_ICEBERG_TYPES = {
    "INSERT": "insert",
    "DELETE": "delete",
    "UPDATE_BEFORE": "update_preimage",
    "UPDATE_AFTER": "update_postimage",
}
CHANGE = "__eos_change"
"""Hidden column: the change type (kept whatever ``change.metadata`` says)."""
HIDDEN_METADATA = {name: f"__eos{name}" for name in METADATA}
"""Hidden columns carrying the metadata headers as bytes (``change.metadata=headers``)."""


class ChangesUnavailable(RuntimeError):
    """The changes a task must read next cannot be read (change feed off, versions
    vacuumed, snapshots expired); the message says which and how to go on."""


def is_path(table: str) -> bool:
    return "/" in table


@dataclass(frozen=True)
class Position:
    version: int
    row: int = 0
    done: bool = False


def _skip_instructions(connector: str, partition: dict[str, Any], what: str) -> str:
    quoted = str(partition).replace("'", '"')
    return (
        f"To go on without them: PUT /connectors/{connector}/stop, then either "
        f"DELETE /connectors/{connector}/offsets (start again from {what}) or "
        f'PATCH /connectors/{connector}/offsets with {{"offsets": [{{"partition": {quoted}, '
        f'"offset": {{"version": <a version that can still be read>, "row": 0}}}}]}}, '
        f"then PUT /connectors/{connector}/resume"
    )


class ChangeFeed:
    """One table's versions and their change rows (every method blocks)."""

    kind = ""
    setting = ""  # the setting that says where to start

    def __init__(self, table: str, settings: SparkSourceSettings, connector: str) -> None:
        self.table = table
        self.settings = settings
        self.connector = connector
        self.partition: dict[str, Any] = {self.kind: table}

    def unavailable(self, what: str, version: int) -> ChangesUnavailable:
        return ChangesUnavailable(
            f"{self.kind} table {self.table}: {what}. "
            + _skip_instructions(self.connector, self.partition, self.setting)
        )

    def start(self, session: SparkSession, position: Position | None) -> Position | None:
        """Check the table; resolve ``latest`` into a position when there is none."""
        raise NotImplementedError

    def pending(self, session: SparkSession, position: Position | None) -> list[int]:
        """The versions to read next, in order (the one of ``position`` first unless done)."""
        raise NotImplementedError

    def changes(self, session: SparkSession, version: int) -> DataFrame:
        """The change rows of ``version``, with the :data:`METADATA` columns."""
        raise NotImplementedError

    def explain(self, exc: Exception, version: int) -> ChangesUnavailable | None:
        return None


_DELTA_CDF_OFF = ("DELTA_MISSING_CHANGE_DATA", "change data was not recorded")
_DELTA_GONE = (
    "FileNotFoundException",
    "FILE_NOT_EXIST",
    "DELTA_CHANGE_DATA_FILE_NOT_FOUND",
    "VersionNotFound",
    "DELTA_VERSIONS_NOT_CONTIGUOUS",
    "DELTA_CANNOT_TIME_TRAVEL",
    "Cannot time travel",
)


class DeltaFeed(ChangeFeed):
    kind = "delta"
    setting = "starting.version"

    def _ident(self) -> str:
        if is_path(self.table):
            return "delta.`" + self.table.replace("`", "``") + "`"
        return self.table

    def _versions(self, session: SparkSession) -> tuple[int, int]:
        from pyspark.sql import functions as F

        row = (
            session.sql(f"DESCRIBE HISTORY {self._ident()}")
            .agg(F.min("version").alias("lo"), F.max("version").alias("hi"))
            .collect()[0]
        )
        return int(row["lo"]), int(row["hi"])

    def _check_feed_on(self, session: SparkSession) -> None:
        properties = {
            r["key"]: r["value"]
            for r in session.sql(f"SHOW TBLPROPERTIES {self._ident()}").collect()
        }
        if str(properties.get("delta.enableChangeDataFeed", "false")).lower() != "true":
            raise ChangesUnavailable(
                f"delta table {self.table} does not have the change data feed enabled: run "
                f"ALTER TABLE {self._ident()} SET TBLPROPERTIES "
                "(delta.enableChangeDataFeed = true); changes are recorded from the version "
                "that sets it on, so set starting.version to that version (or `latest`)"
            )

    def start(self, session: SparkSession, position: Position | None) -> Position | None:
        from pyspark.errors import AnalysisException

        try:
            self._check_feed_on(session)
            _, latest = self._versions(session)
        except AnalysisException as exc:
            raise ChangesUnavailable(
                f"delta table {self.table} cannot be read ({exc.getMessage()}): check "
                "`table` / `path` / `tables` and that it is a Delta table"
            ) from exc
        if position is None and self.settings.starting.lower() == "latest":
            return Position(latest, 0, done=True)
        return position

    def pending(self, session: SparkSession, position: Position | None) -> list[int]:
        oldest, latest = self._versions(session)
        if position is None:
            start = self.settings.starting.lower()
            first = oldest if start == "earliest" else int(start)
        else:
            first = position.version + 1 if position.done else position.version
        if first < oldest and first <= latest:
            raise self.unavailable(
                f"version {first} is no longer in the table's history (the oldest version "
                f"left is {oldest}: older log entries were cleaned up)",
                first,
            )
        return list(range(first, latest + 1))

    def changes(self, session: SparkSession, version: int) -> DataFrame:
        reader = (
            session.read.format("delta")
            .option("readChangeFeed", "true")
            .option("startingVersion", version)
            .option("endingVersion", version)
        )
        df = reader.load(self.table) if is_path(self.table) else reader.table(self.table)
        # The feed has the table's schema of today; a version's rows get the columns the
        # table had at that version (a column added later is not in older rows).
        then = session.read.format("delta").option("versionAsOf", version)
        table = then.load(self.table) if is_path(self.table) else then.table(self.table)
        columns = [c for c in table.columns if c in df.columns and c not in METADATA]
        return df.select(*(_q(c) for c in columns), *METADATA)

    def explain(self, exc: Exception, version: int) -> ChangesUnavailable | None:
        text = str(exc)
        if any(marker in text for marker in _DELTA_CDF_OFF):
            return self.unavailable(
                f"the change data feed was not enabled at version {version} (changes of a "
                "version are recorded only while delta.enableChangeDataFeed is true)",
                version,
            )
        if any(marker in text for marker in _DELTA_GONE):
            return self.unavailable(
                f"the changes of version {version} are gone: their files were removed by "
                "VACUUM (or the log was cleaned up) before they were read",
                version,
            )
        return None


@dataclass(frozen=True)
class _Snapshot:
    id: int
    parent: int | None
    operation: str
    committed_at: datetime.datetime


class IcebergFeed(ChangeFeed):
    kind = "iceberg"
    setting = "start.snapshot.id"

    def __init__(self, table: str, settings: SparkSourceSettings, connector: str) -> None:
        super().__init__(table, settings, connector)
        self._snapshots: dict[int, _Snapshot] = {}

    def _metadata(self, name: str) -> str:
        return f"{self.table}#{name}" if is_path(self.table) else f"{self.table}.{name}"

    def _chain(self, session: SparkSession) -> list[int]:
        """The current snapshot's ancestors, oldest first (expired ones are gone)."""
        rows = (
            session.read.format("iceberg")
            .load(self._metadata("snapshots"))
            .select("snapshot_id", "parent_id", "operation", "committed_at")
            .collect()
        )
        self._snapshots = {
            int(r["snapshot_id"]): _Snapshot(
                int(r["snapshot_id"]),
                None if r["parent_id"] is None else int(r["parent_id"]),
                str(r["operation"]),
                r["committed_at"],
            )
            for r in rows
        }
        history = (
            session.read.format("iceberg")
            .load(self._metadata("history"))
            .filter("is_current_ancestor")
            .orderBy("made_current_at")
            .select("snapshot_id")
            .collect()
        )
        chain: list[int] = []
        for r in history:
            snapshot = int(r["snapshot_id"])
            if snapshot in self._snapshots and snapshot not in chain:
                chain.append(snapshot)
        return chain

    def start(self, session: SparkSession, position: Position | None) -> Position | None:
        try:
            chain = self._chain(session)
        except Exception as exc:
            raise ChangesUnavailable(
                f"iceberg table {self.table} cannot be read ({exc}): check `table` / `path` / "
                "`tables`, the catalog settings of the worker (spark.sql.catalog.*, "
                "spark.lakehouse.iceberg.warehouse) and that it is an Iceberg table"
            ) from exc
        if position is None and self.settings.starting.lower() == "latest":
            return Position(chain[-1], 0, done=True) if chain else Position(0, 0, done=True)
        return position

    def pending(self, session: SparkSession, position: Position | None) -> list[int]:
        chain = self._chain(session)
        if position is None:
            start = self.settings.starting.lower()
            if start == "earliest":
                return chain
            first = int(start)
            if first not in chain:
                raise self.unavailable(
                    f"start.snapshot.id={first} is not a snapshot of the table's current "
                    "history (expired, or never one of its snapshots)",
                    first,
                )
            return chain[chain.index(first) :]
        if position.version == 0 and position.done:  # `latest` on a table without snapshots
            return chain
        if position.version not in chain:
            raise self.unavailable(
                f"snapshot {position.version}, where this connector's offset points, has "
                "expired (expire_snapshots) or is no longer an ancestor of the current "
                "snapshot (rollback), so the changes after it cannot be read",
                position.version,
            )
        at = chain.index(position.version)
        return chain[at + 1 :] if position.done else chain[at:]

    def changes(self, session: SparkSession, version: int) -> DataFrame:
        from pyspark.sql import functions as F

        snapshot = self._snapshots[version]
        stamp = F.lit(snapshot.committed_at).cast("timestamp")
        if self.settings.changelog:
            df = self._changelog(session, snapshot)
            change = F.col(CHANGE_TYPE)
            for iceberg, ours in _ICEBERG_TYPES.items():
                change = F.when(F.col(CHANGE_TYPE) == iceberg, F.lit(ours)).otherwise(change)
            iceberg_columns = ("_change_type", "_change_ordinal", "_commit_snapshot_id")
            data = [c for c in df.columns if c not in iceberg_columns]
            return df.select(
                *data,
                change.alias(CHANGE_TYPE),
                F.lit(version).cast("long").alias(COMMIT_VERSION),
                stamp.alias(COMMIT_TIMESTAMP),
            )
        reader = session.read.format("iceberg")
        if snapshot.operation != "append":
            reader = reader.option("versionAsOf", version)
            df = reader.load(self.table).limit(0)  # appends only: nothing to read
        elif snapshot.parent is None:
            df = reader.option("versionAsOf", version).load(self.table)
        else:
            reader = reader.option("start-snapshot-id", snapshot.parent)
            df = reader.option("end-snapshot-id", version).load(self.table)
        return df.select(
            "*",
            F.lit("insert").alias(CHANGE_TYPE),
            F.lit(version).cast("long").alias(COMMIT_VERSION),
            stamp.alias(COMMIT_TIMESTAMP),
        )

    def _changelog(self, session: SparkSession, snapshot: _Snapshot) -> DataFrame:
        parts = self.table.split(".")
        catalog, name = (parts[0], ".".join(parts[1:])) if len(parts) > 2 else ("", self.table)
        if not catalog:
            catalog = session.catalog.currentCatalog()
        view = f"eos_changes_{uuid.uuid4().hex[:12]}"
        options = [f"'end-snapshot-id', '{snapshot.id}'"]
        if snapshot.parent is not None:
            options.append(f"'start-snapshot-id', '{snapshot.parent}'")
        keys = self.settings.key_columns
        updates = ""
        if keys:
            columns = ", ".join("'" + k.replace("'", "''") + "'" for k in keys)
            updates = f", compute_updates => true, identifier_columns => array({columns})"
        session.sql(
            f"CALL {catalog}.system.create_changelog_view(table => '{name}', "
            f"options => map({', '.join(options)}), changelog_view => '{view}'{updates})"
        )
        return session.table(view)

    def explain(self, exc: Exception, version: int) -> ChangesUnavailable | None:
        text = str(exc)
        if "Cannot find snapshot" in text or "expired" in text.lower():
            return self.unavailable(f"snapshot {version} has expired", version)
        if re.search(r"delete files|merge-on-read|position delete", text, re.IGNORECASE):
            return ChangesUnavailable(
                f"iceberg table {self.table}: snapshot {version} has delete files, which "
                f"Iceberg's changelog cannot read ({text[:300]}): write the table with "
                "'write.delete.mode', 'write.update.mode' and 'write.merge.mode' = "
                "'copy-on-write'"
            )
        return None


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
        keys = [rank, *(_sort_key(F.col(_q(f.name)), f.dataType) for f in data)]
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
            df = df.select(*(F.col(_q(f.name)) for f in data), *hidden, rank.alias("__eos_rank"))
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


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


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
