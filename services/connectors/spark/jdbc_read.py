"""One read of ``mode=jdbc``: the new rows of one table (or query), planned, split into
Spark partitions, streamed to Python in cursor order, with offsets.

**Planning** (:func:`open_read`, blocking): the source's columns and primary key are
read over the task's own connection (:mod:`.jdbc_database`); the cursor columns are
checked (they exist, they are of a kind that orders the same way in the database and
in Spark); one probe (:func:`~.jdbc_sql.probe_sql`) counts the rows after the
position and finds the least and greatest value of the cursor's first column (and,
in the timestamp modes, the database's clock). Nothing after the position: no Spark
job at all, which keeps an idle table cheap.

**The read.** Rows after the position (and, in the timestamp modes, older than the
clock minus ``timestamp.delay.interval.ms``) are read by Spark's JDBC reader in
``ceil(rows / max.buffered.rows)`` partitions, each a range of the cursor's first
column (SQL predicates: every row in exactly one, in column order), each sorted by the
whole cursor in Spark, and streamed partition by partition (:mod:`.arrow_stream`): the
rows reach Python in cursor order. A partition that fails (an executor lost) is
recomputed by Spark before Python sees any of it, so nothing is delivered twice.

**Offsets.** Only a chunk's last record carries one: the cursor of that row
(``{"incrementing": 42}``, ``{"timestamp": "2024-02-29T12:00:00.000000"}``, or both),
so a restarted task reads exactly the rows after it. In ``jdbc.mode=timestamp`` the
cursor is not unique: a chunk never ends inside a run of equal timestamps (the run is
held back and delivered with the next chunk), so a position never splits one.
``jdbc.mode=bulk`` reads the whole table, sorted by its key (the primary key or
``key.columns``, in Spark's order): offset ``{"snapshot": <epoch ms the snapshot
started>, "key": [<key of the last row>], "done": <bool>}``; a restarted task goes on
after that key, in Spark (so the database's collation never decides the order).
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from eos.api import RecordBlock, SourceRecord
from services.connectors.spark.arrow_stream import RowStream, open_arrow_stream
from services.connectors.spark.config import SparkSourceSettings
from services.connectors.spark.jdbc_database import (
    ColumnInfo,
    Database,
    Table,
    connection_options,
)
from services.connectors.spark.jdbc_settings import JdbcSettings
from services.connectors.spark.jdbc_sql import (
    CursorColumn,
    after,
    before,
    boundaries,
    conjunction,
    delay_limit,
    now_expression,
    probe_sql,
    query_source,
    quote,
    sort_key,
    stripes,
)
from services.connectors.spark.mapping import Chunk, Encoder, json_ready

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql import types as T

log = logging.getLogger(__name__)

TABLE_HEADER = "eos.spark.table"
HIDDEN = "__eos_cursor_"
"""Hidden columns: the cursor's values of each row, in their offset (JSON) form."""
_TEXT_TYPES = (2, 3)  # java.sql.Types NUMERIC, DECIMAL
_TIME_TYPES = (92, 2013)  # TIME, TIME_WITH_TIMEZONE


@dataclass
class Source:
    """A table (or the query) of one task, and how far it has been read."""

    table: Table | None
    query: str
    topic: str
    position: dict[str, Any] | None = None
    next_check: float = 0.0
    caught_up: bool = False
    cursor: list[CursorColumn] = field(default_factory=list)
    """The cursor columns as last planned (an idle source is probed without planning)."""
    sql: str = ""

    @property
    def name(self) -> str:
        return self.table.qualified if self.table is not None else self.query

    @property
    def partition(self) -> dict[str, Any]:
        return {"table": self.name} if self.table is not None else {"query": self.query}


def positions(mode: str, offset: dict[str, Any] | None) -> list[Any] | None:
    """The cursor values of an offset (None: read from the start)."""
    if offset is None:
        return None
    if mode == "incrementing":
        return [offset["incrementing"]]
    if mode == "timestamp":
        return [offset["timestamp"]]
    if mode == "timestamp+incrementing":
        return [offset["timestamp"], offset["incrementing"]]
    return None


def offset_of(mode: str, values: Sequence[Any]) -> dict[str, Any]:
    if mode == "incrementing":
        return {"incrementing": int(values[0])}
    if mode == "timestamp":
        return {"timestamp": values[0]}
    return {"timestamp": values[0], "incrementing": int(values[1])}


def kind_of(data_type: T.DataType) -> str | None:
    """The cursor kind (:data:`~.jdbc_sql.KINDS`) of a Spark type, None if it cannot be one."""
    from pyspark.sql import types as T

    if isinstance(data_type, T.ByteType | T.ShortType | T.IntegerType | T.LongType):
        return "integer"
    if isinstance(data_type, T.DecimalType) and data_type.scale == 0:
        return "integer"
    if isinstance(data_type, T.TimestampNTZType):
        return "timestamp"
    if isinstance(data_type, T.TimestampType):
        return "timestamptz"
    return None


def custom_schema(columns: Sequence[ColumnInfo]) -> str:
    """Spark's ``customSchema`` for the columns Spark would map unfaithfully: numerics
    without a precision of at most 38 (Spark would round them to decimal(38,18)) and
    times of day (Spark would make them timestamps on 1970-01-01) are read as their text."""
    text = [
        c.name
        for c in columns
        if (c.jdbc_type in _TEXT_TYPES and not 0 < c.precision <= 38) or c.jdbc_type in _TIME_TYPES
    ]
    return ", ".join(f"`{name.replace('`', '``')}` STRING" for name in text)


class PlanError(ValueError):
    """The source cannot be read as configured; the message names the setting."""


class Plan:
    """What a read of one source needs (blocking to build: metadata over the connection)."""

    def __init__(
        self, db: Database, source: Source, settings: SparkSourceSettings, jdbc: JdbcSettings
    ) -> None:
        self.db, self.source, self.settings, self.jdbc = db, source, settings, jdbc
        table = source.table
        self.sql = table.sql(db.quote_string) if table is not None else query_source(source.query)
        self.columns = db.columns(self.sql)
        names = [c.name for c in self.columns]
        primary = db.primary_key(table) if table is not None else []
        self.keys = tuple(settings.key_columns) or tuple(primary)
        self.cursor_names = self._cursor_names(primary, names)
        for column in (*self.keys, *self.cursor_names):
            if column not in names:
                setting = "key.columns" if column in self.keys else self._setting_of(column)
                raise PlanError(
                    f"setting {setting!r} names column {column!r}, which {source.name} does not "
                    f"have (columns: {', '.join(names)})"
                )
        self.schema = custom_schema(self.columns)

    def _setting_of(self, column: str) -> str:
        if column == self.jdbc.timestamp_column:
            return "timestamp.column.name"
        return "incrementing.column.name"

    def _cursor_names(self, primary: Sequence[str], names: Sequence[str]) -> list[str]:
        jdbc, where = self.jdbc, self.source.name
        if jdbc.mode == "bulk":
            if not self.keys:
                raise PlanError(
                    f"{where} has no primary key, and jdbc.mode=bulk reads a snapshot in key "
                    "order (so that a restarted task goes on after the last key delivered): "
                    "add a primary key or set key.columns to columns that identify a row"
                )
            return list(self.keys)
        cursor = [jdbc.timestamp_column] if jdbc.uses_timestamp else []
        if jdbc.uses_incrementing:
            increment = jdbc.incrementing_column
            if not increment and len(primary) == 1:
                increment = primary[0]
            if not increment:
                raise PlanError(
                    f"jdbc.mode={jdbc.mode} needs incrementing.column.name for {where}: its "
                    "primary key is not one column (name a strictly increasing integer column)"
                )
            cursor.append(increment)
        return cursor

    def cursor(self, df: DataFrame) -> list[CursorColumn]:
        """The cursor columns with their kinds (from Spark's schema of the source)."""
        out = []
        for name in self.cursor_names:
            kind = kind_of(df.schema[name].dataType)
            setting = self._setting_of(name)
            wanted = "integer" if setting == "incrementing.column.name" else "timestamp"
            if self.jdbc.mode != "bulk" and (kind is None or not kind.startswith(wanted)):
                raise PlanError(
                    f"setting {setting!r} names column {name!r} of {self.source.name}, of type "
                    f"{df.schema[name].dataType.simpleString()}: it must be "
                    f"{'an integer' if wanted == 'integer' else 'a timestamp'} column"
                )
            mysql = any(n in self.db.product.lower() for n in ("mysql", "mariadb"))
            if kind == "timestamptz" and mysql and self.jdbc.mode != "bulk":
                raise PlanError(
                    f"setting 'timestamp.column.name' names a TIMESTAMP column of "
                    f"{self.source.name}: on {self.db.product} use a DATETIME(6) column"
                )
            out.append(CursorColumn(name, kind or "", self._quoted(name)))
        return out

    def _quoted(self, name: str) -> str:
        return quote([name], self.db.quote_string)

    def frame(self, session: SparkSession, predicates: Sequence[str]) -> DataFrame:
        """The source as Spark reads it: one partition per predicate (one in all without)."""
        options = connection_options(self.jdbc, self.settings.options)
        if self.schema:
            options["customSchema"] = self.schema
        if predicates and any(predicates):
            url = options.pop("url")
            return session.read.jdbc(url, self.sql, predicates=list(predicates), properties=options)
        return session.read.format("jdbc").options(**options, dbtable=self.sql).load()


def _quoted_spark(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def chunk_rows(chunk: Chunk) -> int:
    if chunk.rows is not None:
        return len(chunk.rows)
    assert chunk.columns is not None
    return len(next(iter(chunk.columns.values()), []))


def split_chunk(chunk: Chunk, at: int) -> tuple[Chunk, Chunk]:
    if chunk.rows is not None:
        return Chunk(rows=chunk.rows[:at]), Chunk(rows=chunk.rows[at:])
    assert chunk.columns is not None
    head = {k: v[:at] for k, v in chunk.columns.items()}
    tail = {k: v[at:] for k, v in chunk.columns.items()}
    return Chunk(columns=head), Chunk(columns=tail)


def join_chunks(first: Chunk | None, second: Chunk) -> Chunk:
    if first is None:
        return second
    if first.rows is not None and second.rows is not None:
        return Chunk(rows=first.rows + second.rows)
    assert first.columns is not None
    assert second.columns is not None
    return Chunk(columns={k: v + second.columns[k] for k, v in first.columns.items()})


class ReadCursor:
    """The rows of one read in cursor order, as records with offsets (blocking)."""

    def __init__(
        self,
        source: Source,
        encoder: Encoder,
        stream: RowStream,
        cursor: Sequence[CursorColumn],
        mode: str,
        snapshot: int = 0,
    ) -> None:
        self.source = source
        self._encoder = encoder
        self._stream: RowStream | None = stream
        self._kinds = [c.kind for c in cursor]
        self._mode = mode
        self._snapshot = snapshot
        self._held: Chunk | None = None
        self._last: tuple[Any, ...] | None = None
        self._ties = mode == "timestamp"
        self._lineage = (TABLE_HEADER, source.name.encode())
        self.rows = 0

    @property
    def exhausted(self) -> bool:
        return self._stream is None

    def prefetch(self) -> None:
        """Wait until Spark has the first rows ready (so the first chunk is quick)."""
        if self._stream is not None and not self._stream.prefetch():
            self.close()

    def _values(self, chunk: Chunk, row: int) -> list[Any]:
        return [chunk.column(f"{HIDDEN}{i}")[row] for i in range(len(self._kinds))]

    def _key(self, values: Sequence[Any]) -> tuple[Any, ...]:
        if self._mode == "bulk":
            return tuple(json.dumps(v) for v in values)
        return tuple(sort_key(v, k) for v, k in zip(values, self._kinds, strict=True))

    def next_records(self, limit: int) -> list[SourceRecord | RecordBlock]:
        """Up to ``limit`` records (more when a run of equal timestamps is held back)."""
        stream = self._stream
        if stream is None:
            return []
        fresh = self._encoder.read(stream, limit)
        more = chunk_rows(fresh) > 0 and stream.prefetch()
        chunk, self._held = join_chunks(self._held, fresh), None
        count = chunk_rows(chunk)
        if count and self._ties and more:
            column = chunk.column(f"{HIDDEN}0")
            cut = count - 1
            while cut > 0 and column[cut - 1] == column[count - 1]:
                cut -= 1
            chunk, self._held = split_chunk(chunk, cut)
            count = cut
        if not more and self._held is None:
            self.close()
        if not count:
            return []
        self._check_order(chunk, count)
        last = self._values(chunk, count - 1)
        if self._mode == "bulk":
            done = not more
            offset: dict[str, Any] = {"snapshot": self._snapshot, "key": last, "done": done}
        else:
            offset = offset_of(self._mode, last)
        self.rows += count
        records = self._encoder.records(
            chunk,
            topic=self.source.topic,
            partition=self.source.partition,
            offset=offset,
            headers=(self._lineage,) if self._encoder.lineage else (),
        )
        self.source.position = offset
        return records

    def _check_order(self, chunk: Chunk, count: int) -> None:
        first = self._key(self._values(chunk, 0))
        last = self._key(self._values(chunk, count - 1))
        if self._mode == "bulk":  # JSON text does not order like the key; Spark sorted it
            self._last = last
            return
        if (self._last is not None and first < self._last) or last < first:
            raise RuntimeError(
                f"rows of {self.source.name} arrived out of cursor order ({self._last} then "
                f"{first} .. {last}); nothing after them was delivered"
            )
        self._last = last

    def close(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            stream.close()


def _encoder(df: DataFrame, plan: Plan, cursor: Sequence[CursorColumn], source: Source) -> Encoder:
    hidden = [
        json_ready(df[_quoted_spark(c.name)], df.schema[c.name].dataType, text=True).alias(
            f"{HIDDEN}{i}"
        )
        for i, c in enumerate(cursor)
    ]
    settings = replace(plan.settings, key_columns=plan.keys, topic=source.topic)
    keep = [f"{HIDDEN}{i}" for i in range(len(cursor))]
    return Encoder(df.select("*", *hidden), settings, keep=keep, where=source.name)


def _pieces(rows: int, settings: SparkSourceSettings) -> int:
    return max(1, math.ceil(rows / settings.max_buffered_rows))


def open_read(
    session: SparkSession,
    db: Database,
    source: Source,
    settings: SparkSourceSettings,
    jdbc: JdbcSettings,
) -> ReadCursor | None:
    """A cursor over the rows of ``source`` after its position, or None if there are
    none yet (blocking: a probe; when it finds rows, metadata and Spark's planning)."""
    if jdbc.mode == "bulk":
        return _open_snapshot(session, Plan(db, source, settings, jdbc), source)
    fresh = None
    if not source.cursor:
        fresh = Plan(db, source, settings, jdbc)
        source.cursor, source.sql = fresh.cursor(fresh.frame(session, ["1=0"])), fresh.sql
    first = source.cursor[0]
    where = after(source.cursor, positions(jdbc.mode, source.position))
    now = now_expression(db.product, first.kind) if jdbc.uses_timestamp else None
    count, low, high, *clock = db.row(probe_sql(source.sql, first, where, now))
    if not count or int(count) == 0 or low is None or high is None:
        return None
    limit = None
    if jdbc.uses_timestamp and clock and clock[0] is not None:
        limit = delay_limit(clock[0], jdbc.delay_ms, first.kind)
        if not _below(low, limit, first.kind):
            return None  # every new row is younger than the delay: later
        if not _below(high, limit, first.kind):
            high = limit.strip("'")
    plan = fresh or Plan(db, source, settings, jdbc)  # anew: the table may have changed
    if fresh is None:
        source.cursor = plan.cursor(plan.frame(session, ["1=0"]))
    cursor = source.cursor
    where = conjunction(after(cursor, positions(jdbc.mode, source.position)), before(first, limit))
    points = boundaries(first.kind, low, high, _pieces(int(count), settings))
    predicates = [conjunction(where, stripe) for stripe in stripes(cursor[0], points)]
    df = plan.frame(session, predicates)
    ordered = df.sortWithinPartitions(*(_quoted_spark(c.name) for c in cursor))
    encoder = _encoder(ordered, plan, cursor, source)
    log.info(
        "reading %s: about %s rows after %s in %d partition(s)",
        source.name,
        count,
        source.position,
        len(predicates),
    )
    return ReadCursor(source, encoder, open_arrow_stream(encoder.frame), cursor, jdbc.mode)


def _below(low: str, limit: str, kind: str) -> bool:
    return bool(sort_key(low, kind) < sort_key(limit.strip("'"), kind))


def _after_key(df: DataFrame, keys: Sequence[str], values: Sequence[Any]) -> Column:
    """Spark's test for rows after ``values`` in key order (strings compared as bytes,
    which Spark's sort does too, and which keeps the test out of the database)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    def typed(name: str, value: Any) -> tuple[Column, Column]:
        data_type = df.schema[name].dataType
        column = df[_quoted_spark(name)]
        if isinstance(data_type, T.StringType):
            return column.cast("binary"), F.lit(value).cast("binary")
        return column, F.lit(value).cast(data_type)

    pairs = [typed(k, v) for k, v in zip(keys, values, strict=True)]
    test = pairs[-1][0] > pairs[-1][1]
    for column, value in reversed(pairs[:-1]):
        test = (column > value) | ((column == value) & test)
    return test


def _open_snapshot(session: SparkSession, plan: Plan, source: Source) -> ReadCursor | None:
    """A cursor over a (resumed or new) snapshot of the whole source, in key order."""
    offset = source.position
    resuming = offset is not None and not offset.get("done")
    snapshot = int(offset["snapshot"]) if resuming and offset else int(time.time() * 1000)
    cursor = plan.cursor(plan.frame(session, ["1=0"]))
    first = cursor[0]
    integer = len(cursor) == 1 and first.kind == "integer"
    if integer:  # split by ranges of the key (a key of another type may have no MIN/MAX)
        count, low, high = plan.db.row(probe_sql(plan.sql, first, "", None))
    else:
        (count,), low, high = plan.db.row(f"SELECT COUNT(*) FROM {plan.sql}"), None, None
    if not count or int(count) == 0:
        return None
    pieces = _pieces(int(count), plan.settings)
    points: list[str] = []
    if integer and low is not None and high is not None:
        points = boundaries("integer", low, high, pieces)
    df = plan.frame(session, stripes(first, points) if points else [])
    keys = [c.name for c in cursor]
    names = [_quoted_spark(k) for k in keys]
    if resuming and offset is not None:
        values = offset["key"]
        df = df.filter(_after_key(df, keys, values if isinstance(values, list) else [values]))
    if not points and pieces > 1:
        df = df.repartitionByRange(pieces, *names)  # Spark's order (a second pass to sample)
    encoder = _encoder(df.sortWithinPartitions(*names), plan, cursor, source)
    log.info("reading a snapshot of %s (%s rows) in %d partition(s)", source.name, count, pieces)
    return ReadCursor(
        source, encoder, open_arrow_stream(encoder.frame), cursor, "bulk", snapshot=snapshot
    )
