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

from eos.api import OffsetStorageReader, SourcePartition, SourceRecord, WorkerResources
from services.connectors.spark.arrow_stream import open_arrow_stream
from services.connectors.spark.config import SparkSourceSettings
from services.connectors.spark.mapping import (
    TIMESTAMP_COLUMN,
    RecordMapper,
    converter,
    json_projection,
)
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


def _drain(df: DataFrame) -> list[dict[str, Any]]:
    stream = open_arrow_stream(df)
    rows: list[dict[str, Any]] = []
    try:
        while chunk := stream.next_rows(1 << 20):
            rows.extend(chunk)
    finally:
        stream.close()
    return rows


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

    async def next_records(self) -> list[SourceRecord]:
        return await self._resources.run_blocking(self.read_batch)

    def read_batch(self) -> list[SourceRecord]:
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
        batch, timestamp_source = json_projection(
            df.filter(above).orderBy(F.col(column).asc()).limit(limit), s.timestamp_column
        )
        # the column's values as JSON: what offsets hold and literals are cast back from
        to_json = converter(batch.schema[column].dataType)
        rows = _drain(batch)
        if rows and not s.incrementing_unique and len(rows) == limit:
            tied = rows[-1][column]
            before = [r for r in rows if r[column] != tied]
            if before:
                rows = before  # the run of equal values goes whole into the next batch
            else:
                tied_json = tied if to_json is None else to_json(tied)
                equal = df.filter(F.col(column) == literal(tied_json))
                rows = _drain(json_projection(equal, s.timestamp_column)[0])
                log.warning(
                    "%d rows share %s=%r, more than batch.rows; read in one batch",
                    len(rows),
                    column,
                    tied_json,
                )
        if not rows:
            return []
        mapper = RecordMapper(
            batch.schema,
            topic=s.topic,
            topic_column=s.topic_column,
            key_columns=s.key_columns,
            timestamp_column=timestamp_source,
            hidden=(TIMESTAMP_COLUMN,),
        )
        records = []
        for row in rows:
            raw = row[column]
            value = raw if to_json is None else to_json(raw)
            records.append(mapper.record(row, self._partition, {"value": value}, (self._lineage,)))
        self._last = records[-1].source_offset["value"] if records[-1].source_offset else None
        return records

    async def stop(self) -> None:
        return None
