"""Table mode: the rows of a table, path or query, in ``incrementing.column`` order.

Source partition ``{"table": name}``, ``{"path": path, "format": format}`` or
``{"query": sql}``; offset ``{"value": <last emitted value of the column>}`` in
the column's JSON form (see :mod:`.mapping`; numbers stay numbers). Every poll
reads the next ``batch.rows`` rows above that value, in column order, through a
fresh child session so that the table is listed anew and appended rows are seen.
Rows whose column is null are never read.

Exactly once needs the column to be unique and strictly increasing — a new row
always gets a value above every value present — which the user declares with
``incrementing.column.unique=true``. Without that declaration a poll never ends
between two rows of equal value (it keeps a trailing run of equal values for the
next poll, or reads the whole run if it fills a batch), but a row that appears
later with a value at or below one already emitted is never read.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from eos.api import (
    OffsetStorageReader,
    RecordBlock,
    SourcePartition,
    SourceRecord,
    WorkerResources,
)
from services.connectors.spark.arrow_stream import open_arrow_stream
from services.connectors.spark.config import SparkSourceSettings
from services.connectors.spark.mapping import Chunk, Encoder, json_ready
from services.connectors.spark.session import task_session

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

log = logging.getLogger(__name__)

TABLE_HEADER = "eos.spark.table"


def source_partition(settings: SparkSourceSettings) -> dict[str, Any]:
    if settings.table:
        return {"table": settings.table}
    if settings.path:
        return {"path": settings.path, "format": settings.format}
    return {"query": settings.query}


INCREMENTING = "__eos_incrementing"
"""Hidden column: the incrementing column's value in its JSON form (the offset)."""


def _drain(encoder: Encoder) -> Chunk:
    """Every row of ``encoder.frame`` (a bounded read: at most ``batch.rows``, or a
    run of equal values)."""
    stream = open_arrow_stream(encoder.frame)
    try:
        return encoder.read(stream, 1 << 62)
    finally:
        stream.close()


class TableReader:
    """Reads the next rows above the last emitted value (its methods block except
    :meth:`start` and :meth:`next_records`)."""

    def __init__(self, settings: SparkSourceSettings, resources: WorkerResources) -> None:
        self._settings = settings
        self._resources = resources
        self._partition: SourcePartition = source_partition(settings)
        self._lineage = (TABLE_HEADER, str(next(iter(self._partition.values()))).encode())
        self._last: Any = None

    async def start(self, offsets: OffsetStorageReader) -> None:
        await self._resources.run_blocking(self._session)  # fails early if Spark cannot start
        committed = await offsets.offset(self._partition)
        if committed is not None:
            self._last = committed.get("value")

    def _session(self) -> SparkSession:
        rows = max(1, self._settings.max_buffered_rows // 2)
        return task_session(self._resources, arrow_batch_rows=rows)

    def _source(self, session: SparkSession) -> DataFrame:
        s = self._settings
        if s.table:
            return session.table(s.table)
        if s.query:
            return session.sql(s.query)
        reader = session.read.format(s.format).options(**s.options)
        if s.schema:
            reader = reader.schema(s.schema)
        return reader.load(s.path)

    async def next_records(self) -> list[SourceRecord | RecordBlock]:
        return await self._resources.run_blocking(self.read_batch)

    def read_batch(self) -> list[SourceRecord | RecordBlock]:
        """The next batch of records (blocking); empty if there are no new rows."""
        from pyspark.sql import functions as F

        s = self._settings
        column = s.incrementing_column
        df = self._source(self._session())
        if column not in df.columns:
            raise ValueError(
                f"setting 'incrementing.column' names column {column!r}, which the data does "
                f"not have (columns: {', '.join(df.columns)})"
            )
        data_type = df.schema[column].dataType

        def literal(value: Any) -> Column:
            return F.lit(value).cast(data_type)

        above = F.col(column).isNotNull()
        if self._last is not None:
            above = above & (F.col(column) > literal(self._last))
        limit = s.rows_per_poll
        offset_column = json_ready(F.col(column), data_type, text=True).alias(INCREMENTING)

        def encoder_of(selected: DataFrame) -> Encoder:
            with_offset = selected.select("*", offset_column)
            return Encoder(with_offset, s, keep=(INCREMENTING,), where=str(self._partition))

        encoder = encoder_of(df.filter(above).orderBy(F.col(column).asc()).limit(limit))
        chunk = _drain(encoder)
        values = chunk.column(INCREMENTING)
        if values and not s.incrementing_unique and len(values) == limit:
            tied = values[-1]
            count = len(values)
            while count and values[count - 1] == tied:
                count -= 1
            if count:
                values = values[:count]  # the run of equal values goes whole into the next batch
            else:
                encoder = encoder_of(df.filter(F.col(column) == literal(tied)))
                chunk = _drain(encoder)
                values = chunk.column(INCREMENTING)
                log.warning(
                    "%d rows share %s=%r, more than batch.rows; read in one batch",
                    len(values),
                    column,
                    tied,
                )
        if not values:
            return []
        # Only the last record carries the offset: a poll is committed whole.
        records = encoder.records(
            chunk,
            topic=s.topic,
            partition=self._partition,
            offset={"value": values[-1]},
            headers=(self._lineage,) if s.lineage_headers else (),
        )
        self._last = values[-1]
        return records

    async def stop(self) -> None:
        return None
