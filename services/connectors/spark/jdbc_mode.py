"""``mode=jdbc``: the tables (or one query) of a database, through Spark's JDBC reader.

**Which task reads which table.** A table is a source partition ``{"table":
"<schema>.<table>"}`` (``{"table": "<table>"}`` where the database has no schemas) and
belongs to exactly one task:

- with ``table.whitelist``, the entries are dealt out in turn (entry ``i`` to task
  ``i % tasks``), and a table belongs to the task of the first entry that names it;
- without it, ``zlib.crc32(name) % tasks`` (:func:`owner_of`), as files mode does.

Each task lists the tables itself (``DatabaseMetaData.getTables``, within
``schema.pattern`` and ``table.types``, less ``table.blacklist``) at start and every
``table.poll.interval.ms``, so a table created while the connector runs is picked up
by its owner, and no other task ever reads it. A ``query`` is one source partition
``{"query": <sql>}``, read by one task.

**Reading**, in two background stages per task (started with ``context.start_soon``,
their blocking calls in the worker's thread pool), as files mode reads files: the
*opener* takes the source whose turn has come, asks :func:`~.jdbc_read.open_read` for
a read of its new rows and waits for Spark's first partition of it; the *streamer*
delivers the opened read one chunk of ``min(batch.rows, max.buffered.rows / 4)`` rows
ahead of ``poll``. So Spark reads the next table while Python delivers this one. A
source is never opened while it is being read (its position moves with the read); one
with nothing new is probed again after ``poll.interval.ms``, one that had rows at once
(a bulk snapshot after ``poll.interval.ms``).
"""

from __future__ import annotations

import json
import logging
import time
import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio

from eos.api import OffsetStorageReader, RecordBlock, SourceRecord, WorkerResources
from services.connectors.spark.config import SparkSourceSettings
from services.connectors.spark.jdbc_database import Database, Table
from services.connectors.spark.jdbc_read import ReadCursor, Source, open_read
from services.connectors.spark.jdbc_settings import JdbcSettings
from services.connectors.spark.session import task_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

IDLE_SECONDS = 0.1
"""Longest sleep of the reading stage while no source is due (so that it notices new ones)."""


def owner_of(name: str, tasks: int) -> int:
    """The task (of ``tasks``) that reads the table ``name`` when there is no whitelist."""
    return zlib.crc32(name.encode()) % tasks


def whitelist_owner(table: Table, whitelist: tuple[str, ...], tasks: int) -> int | None:
    """The task of the first ``table.whitelist`` entry naming ``table`` (None: not listed)."""
    for n, entry in enumerate(whitelist):
        if table.matches(entry):
            return n % tasks
    return None


def owned(tables: list[Table], jdbc: JdbcSettings, task_index: int, task_count: int) -> list[Table]:
    """The tables task ``task_index`` of ``task_count`` reads."""
    mine = []
    for table in tables:
        if any(table.matches(entry) for entry in jdbc.blacklist):
            continue
        if jdbc.whitelist:
            owner = whitelist_owner(table, jdbc.whitelist, task_count)
        else:
            owner = owner_of(table.qualified, task_count)
        if owner == task_index:
            mine.append(table)
    return mine


def topic_of(settings: SparkSourceSettings, jdbc: JdbcSettings, table: Table | None) -> str:
    """``topic`` if set, else ``topic.prefix`` + the table's name (a query: the prefix)."""
    if settings.topic:
        return settings.topic
    return jdbc.topic_prefix + (table.name if table is not None else "")


class JdbcReader:
    """One task's tables (or query), read in turn in a background stage."""

    def __init__(
        self,
        settings: SparkSourceSettings,
        jdbc: JdbcSettings,
        resources: WorkerResources,
        start_soon: Callable[..., None],
    ) -> None:
        self._settings = settings
        self._jdbc = jdbc
        self._resources = resources
        self._start_soon = start_soon
        self._session: SparkSession | None = None
        self._db: Database | None = None
        self._sources: dict[str, Source] = {}
        self._next_listing = 0.0
        self._busy: set[str] = set()
        """Sources being opened or read (by name)."""
        # Each stream end is closed by its owner: the chunks' receive end by stop(), the
        # others by the stage that uses them.
        self._opened_send, self._opened = anyio.create_memory_object_stream[ReadCursor]()
        self._chunks_send, self._chunks = anyio.create_memory_object_stream[
            list[SourceRecord | RecordBlock]
        ]()

    async def start(self) -> None:
        try:
            self._session = await self._resources.run_blocking(self._make_session)
            self._db = Database(self._session, self._jdbc, self._settings.options)
            await self._resources.run_blocking(self._db.check)
        except BaseException:
            for end in (self._opened_send, self._opened, self._chunks_send, self._chunks):
                end.close()
            raise
        self._start_soon(self._open_sources)
        self._start_soon(self._read_sources)

    def _make_session(self) -> SparkSession:
        rows = max(1, self._settings.max_buffered_rows // 4)
        return task_session(self._resources, arrow_batch_rows=rows)

    @property
    def idle(self) -> bool:
        """Listed at least once, nothing being read, every source found nothing new."""
        return (
            self._next_listing > 0
            and not self._busy
            and all(s.caught_up for s in self._sources.values())
        )

    async def refresh(self, offsets: OffsetStorageReader) -> None:
        """List the tables when due; new ones of this task join with their offsets."""
        now = time.monotonic()
        if now < self._next_listing:
            return
        self._next_listing = now + self._jdbc.table_poll_interval
        if self._jdbc.query:
            found = [Source(None, self._jdbc.query, topic_of(self._settings, self._jdbc, None))]
        else:
            tables = await self._resources.run_blocking(self._list)
            found = [Source(t, "", topic_of(self._settings, self._jdbc, t)) for t in tables]
        new = [s for s in found if s.name not in self._sources]
        if not new:
            return
        committed = await offsets.offsets([s.partition for s in new])
        for source, offset in zip(new, committed, strict=True):
            source.position = offset
            self._sources[source.name] = source
            log.info("reading %s from %s", source.name, json.dumps(offset))

    def _list(self) -> list[Table]:
        assert self._db is not None
        s, jdbc = self._settings, self._jdbc
        listed = self._db.tables(jdbc.schema_pattern, jdbc.table_types)
        mine = owned(listed, jdbc, s.task_index, s.task_count)
        if jdbc.whitelist:
            for n, entry in enumerate(jdbc.whitelist):
                seen = any(t.matches(entry) for t in listed)
                if n % s.task_count == s.task_index and not seen:
                    log.warning("table.whitelist names %s, which the database does not have", entry)
        return mine

    async def next_records(self, wait: float) -> list[SourceRecord | RecordBlock]:
        """The next chunk of records, or an empty list if none came within ``wait`` s
        (also once the stage has ended: its failure fails the task)."""
        try:
            return self._chunks.receive_nowait()
        except anyio.WouldBlock:
            pass
        except anyio.EndOfStream:
            await anyio.sleep(wait)
            return []
        with anyio.move_on_after(wait):
            try:
                return await self._chunks.receive()
            except anyio.EndOfStream:
                await anyio.sleep(wait)
        return []

    def _due(self) -> Source | None:
        """The source whose turn has come longest ago, of those not being read."""
        now = time.monotonic()
        waiting = [
            s for s in self._sources.values() if s.next_check <= now and s.name not in self._busy
        ]
        return min(waiting, key=lambda s: s.next_check, default=None)

    def _open(self, source: Source) -> ReadCursor | None:
        """A read of ``source``'s new rows whose first rows Spark has ready (blocking)."""
        assert self._session is not None
        assert self._db is not None
        cursor = open_read(self._session, self._db, source, self._settings, self._jdbc)
        if cursor is not None:
            cursor.prefetch()
        return cursor

    async def _open_sources(self) -> None:
        """Stage 1: open the next due source's read and let Spark compute its first
        partition, while stage 2 streams the current one (a source is never opened
        while it is being read: its position moves with the read)."""
        interval = self._settings.poll_interval
        async with self._opened_send:
            while True:
                source = self._due()
                if source is None:
                    await anyio.sleep(IDLE_SECONDS)
                    continue
                self._busy.add(source.name)
                try:
                    cursor = await self._resources.run_blocking(self._open, source)
                except BaseException:
                    self._busy.discard(source.name)
                    raise
                source.caught_up = cursor is None
                if cursor is None:
                    self._busy.discard(source.name)
                    source.next_check = time.monotonic() + interval
                    continue
                try:
                    await self._opened_send.send(cursor)
                except BaseException:  # the streamer stopped
                    await self._close(cursor)
                    raise

    async def _read_sources(self) -> None:
        """Stage 2: stream each opened read, one chunk ahead of ``poll``."""
        interval = self._settings.poll_interval
        async with self._opened, self._chunks_send:
            async for cursor in self._opened:
                source = cursor.source
                try:
                    await self._stream(cursor)
                except anyio.BrokenResourceError:  # stop() was called
                    return
                finally:
                    await self._close(cursor)
                    self._busy.discard(source.name)
                bulk = self._jdbc.mode == "bulk"  # a snapshot read: the next one later
                source.caught_up = bulk
                source.next_check = time.monotonic() + (interval if bulk else 0.0)

    async def _close(self, cursor: ReadCursor) -> None:
        with anyio.CancelScope(shield=True):
            await self._resources.run_blocking(cursor.close)

    async def _stream(self, cursor: ReadCursor) -> None:
        while not cursor.exhausted:
            records = await self._resources.run_blocking(
                cursor.next_records, self._settings.rows_per_poll
            )
            if records:
                await self._chunks_send.send(records)

    async def stop(self) -> None:
        """Stop taking chunks; the stage ends when it notices (or is cancelled)."""
        self._chunks.close()
        if self._db is not None:
            await self._resources.run_blocking(self._db.close)
