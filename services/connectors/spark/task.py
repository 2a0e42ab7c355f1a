"""SparkSourceTask: one task of :class:`~services.connectors.spark.SparkSource`.

Every Spark call runs in the worker's bounded thread pool
(``context.resources.run_blocking``), never on the event loop. The task holds at
most ``max.buffered.rows`` rows in Python (see
:class:`~services.connectors.spark.files_mode.FilesReader` for how files mode reads
ahead in background stages started with ``context.start_soon``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

import anyio

from eos.api import RecordBlock, SourceRecord, SourceTask, SourceTaskContext
from services.connectors.spark.changes_mode import ChangesReader
from services.connectors.spark.config import SparkSourceSettings
from services.connectors.spark.files_mode import FilesReader
from services.connectors.spark.jdbc_mode import JdbcReader
from services.connectors.spark.jdbc_settings import JdbcSettings
from services.connectors.spark.table_mode import TableReader

IDLE_SECONDS = 0.1
"""How long :meth:`SparkSourceTask.poll` waits at most before returning empty-handed."""


class SparkSourceTask(SourceTask):
    def __init__(self) -> None:
        self._settings: SparkSourceSettings | None = None
        self._context: SourceTaskContext | None = None
        self._files: FilesReader | None = None
        self._jdbc: JdbcReader | None = None
        self._table: TableReader | None = None
        self._changes: ChangesReader | None = None
        self._next_check = 0.0
        self._caught_up = False

    def version(self) -> str:
        return "1.0.0"

    @property
    def idle(self) -> bool:
        """Nothing left to read until new files or rows appear (as of the last poll)."""
        if self._files is not None:
            return self._files.idle
        if self._jdbc is not None:
            return self._jdbc.idle
        return self._caught_up

    async def start(self, config: Mapping[str, str], context: SourceTaskContext) -> None:
        self._settings = settings = SparkSourceSettings.parse(config)
        self._context = context
        if settings.table_format:
            self._changes = ChangesReader(
                settings, context.resources, context.connector, context.transaction_context
            )
            await self._changes.start(context.offset_reader)
        elif settings.mode == "files":
            self._files = FilesReader(
                settings, context.resources, context.start_soon, context.count
            )
            await self._files.start()
        elif settings.mode == "jdbc":
            jdbc = JdbcSettings.parse(config)
            self._jdbc = JdbcReader(settings, jdbc, context.resources, context.start_soon)
            await self._jdbc.start()
        else:
            self._table = TableReader(settings, context.resources)
            await self._table.start(context.offset_reader)

    async def poll(self) -> Sequence[SourceRecord | RecordBlock] | None:
        assert self._settings is not None, "start() first"
        assert self._context is not None, "start() first"
        now = time.monotonic()
        records: list[SourceRecord | RecordBlock] = []
        if self._files is not None:
            if now >= self._next_check:
                self._next_check = now + self._settings.poll_interval
                await self._files.refresh(self._context.offset_reader)
            wait = min(IDLE_SECONDS, self._next_check - time.monotonic())
            return await self._files.next_records(max(0.0, wait)) or None
        if self._jdbc is not None:
            await self._jdbc.refresh(self._context.offset_reader)
            return await self._jdbc.next_records(IDLE_SECONDS) or None
        if self._changes is not None and now >= self._next_check:
            records = await self._changes.poll()
            self._caught_up = not records and self._changes.caught_up
            if self._caught_up:  # wait for new versions
                self._next_check = now + self._settings.poll_interval
        if self._table is not None and now >= self._next_check:
            records = await self._table.next_records()
            rows = sum(len(r) if isinstance(r, RecordBlock) else 1 for r in records)
            self._caught_up = rows < self._settings.rows_per_poll
            if self._caught_up:  # wait for new rows
                self._next_check = now + self._settings.poll_interval
        if records:
            return records
        await anyio.sleep(max(0.0, min(IDLE_SECONDS, self._next_check - time.monotonic())))
        return None

    async def stop(self) -> None:
        if self._files is not None:
            await self._files.stop()
        if self._jdbc is not None:
            await self._jdbc.stop()
        if self._table is not None:
            await self._table.stop()
        if self._changes is not None:
            await self._changes.stop()
