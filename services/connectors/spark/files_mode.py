"""Files mode: every row of every file under ``path``, each exactly once.

Source partition ``{"file": <path as Spark lists it>}``; offset
``{"row": <index of the next row to read>, "done": <bool>, "size": <bytes>,
"mtime": <epoch ms>}``. ``done`` is true on the offset of a file's last row, so a
restarted task skips finished files without opening them; ``size`` and ``mtime``
record the file as it was read, so a file that changes afterwards is noticed.

**Row order.** A row's index is its position in the file, computed by Spark the
same way on every read:

- Parquet: Spark's ``_metadata.row_index`` (the row's position in the file, from
  the row-group metadata), whatever the split of the file into input partitions;
- csv, json, orc: the file is read as ONE input partition (the task's own
  session sets ``spark.sql.files.maxPartitionBytes`` huge and
  ``spark.sql.files.minPartitionNum=1``), which a single reader scans from the
  first byte to the last, so ``monotonically_increasing_id()`` (partition 0's
  record counter) is the row's position in the file. The reader checks the
  one-partition condition and fails loudly if it does not hold.

The rows at or after the resume index are range-partitioned on that index into
pieces of about ``max.buffered.rows`` rows and sorted within each piece, then
streamed piece by piece (:mod:`.arrow_stream`), so they reach Python in index
order with flat memory however large the file, and a resumed task skips exactly
the rows whose offsets were committed.

**Assignment.** Files are found at run time, so each task lists ``path`` itself
every ``poll.interval.ms`` and keeps the files with
``zlib.crc32(path) % task.count == task.index`` (:func:`owner_of`): each file
belongs to exactly one task. A file whose size or modification time differs from
what was recorded when it was read is reported (a warning, counted in
:attr:`FilesReader.changed_files`) and never re-read.
"""

from __future__ import annotations

import datetime
import logging
import math
import zlib
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from eos.api import OffsetStorageReader, SourceRecord, WorkerResources
from services.connectors.spark.arrow_stream import RowStream, open_arrow_stream
from services.connectors.spark.config import SparkSourceSettings
from services.connectors.spark.mapping import TIMESTAMP_COLUMN, RecordMapper, json_projection
from services.connectors.spark.session import task_session

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

ROW_COLUMN = "__eos_row_index"
FILE_HEADER = "eos.spark.file"
ROW_HEADER = "eos.spark.row"
LISTING_OPTIONS = (
    "pathGlobFilter",
    "recursiveFileLookup",
    "modifiedBefore",
    "modifiedAfter",
    "ignoreMissingFiles",
)


def owner_of(path: str, tasks: int) -> int:
    """The task (of ``tasks``) that reads the file at ``path``."""
    return zlib.crc32(path.encode()) % tasks


@dataclass(frozen=True)
class FileInfo:
    path: str
    size: int
    mtime: int  # epoch milliseconds

    def partition(self) -> dict[str, Any]:
        return {"file": self.path}

    def changed_since(self, offset: dict[str, Any]) -> bool:
        return (offset.get("size"), offset.get("mtime")) not in (
            (None, None),
            (self.size, self.mtime),
        )


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def _millis(value: Any) -> int:
    if isinstance(value, datetime.datetime):
        aware = value if value.tzinfo else value.astimezone()
        return (aware - _EPOCH) // datetime.timedelta(milliseconds=1)
    return int(value)


def list_files(session: SparkSession, settings: SparkSourceSettings) -> list[FileInfo]:
    """Every data file under ``settings.path`` as Spark's file source lists it (blocking);
    an empty list if the path does not exist (yet)."""
    from pyspark.errors import AnalysisException

    options = {k: v for k, v in settings.options.items() if k in LISTING_OPTIONS}
    try:
        df = session.read.format("binaryFile").options(**options).load(settings.path)
        rows = df.select("path", "length", "modificationTime").collect()
    except AnalysisException as exc:
        if "PATH_NOT_FOUND" in str(exc) or "Path does not exist" in str(exc):
            log.warning("path %s does not exist (yet); no files to read", settings.path)
            return []
        raise
    files = [FileInfo(r["path"], int(r["length"]), _millis(r["modificationTime"])) for r in rows]
    return sorted(files, key=lambda f: f.path)


def _indexed(session: SparkSession, settings: SparkSourceSettings, path: str) -> DataFrame:
    from pyspark.sql import functions as F

    reader = session.read.format(settings.format).options(**settings.options)
    if settings.schema:
        reader = reader.schema(settings.schema)
    df = reader.load(path)
    if settings.format == "parquet":
        return df.select("*", F.col("_metadata.row_index").alias(ROW_COLUMN))
    partitions = df.rdd.getNumPartitions()
    if partitions != 1:
        raise RuntimeError(
            f"{path} was split into {partitions} input partitions; rows of a "
            f"{settings.format} file are numbered by reading it as one partition"
        )
    return df.select("*", F.monotonically_increasing_id().alias(ROW_COLUMN))


class FileCursor:
    """The rows of one file from ``start`` on, in index order, as records (blocking)."""

    def __init__(
        self,
        file: FileInfo,
        start: int,
        end: int,
        stream: RowStream | None,
        mapper: RecordMapper | None,
    ) -> None:
        self.file = file
        self.next_row = start
        self.end = end
        self._stream = stream
        self._mapper = mapper
        self._partition = file.partition()
        self._path_header = (FILE_HEADER, file.path.encode())

    @property
    def exhausted(self) -> bool:
        return self._stream is None

    def next_records(self, limit: int) -> list[SourceRecord]:
        if self._stream is None or self._mapper is None:
            return []
        rows = self._stream.next_rows(limit)
        if not rows:
            self.close()
            if self.next_row != self.end:
                log.warning(
                    "file %s ended at row %d, expected %d: it changed while being read",
                    self.file.path,
                    self.next_row,
                    self.end,
                )
            return []
        records = []
        for row in rows:
            index = row[ROW_COLUMN]
            if index != self.next_row:
                self.close()
                raise RuntimeError(
                    f"rows of {self.file.path} arrived out of order: row {index} where "
                    f"{self.next_row} was due"
                )
            self.next_row = index + 1
            offset = {
                "row": self.next_row,
                "done": self.next_row >= self.end,
                "size": self.file.size,
                "mtime": self.file.mtime,
            }
            headers = (self._path_header, (ROW_HEADER, str(index).encode()))
            records.append(self._mapper.record(row, self._partition, offset, headers))
        if self.next_row >= self.end:
            self.close()
        return records

    def close(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            stream.close()


def open_file(
    session: SparkSession, settings: SparkSourceSettings, file: FileInfo, start: int
) -> FileCursor:
    """A cursor over ``file`` from row ``start`` (blocking: counts the remaining rows
    and starts Spark's stream)."""
    from pyspark.sql import functions as F

    df = _indexed(session, settings, file.path)
    remaining = df.filter(F.col(ROW_COLUMN) >= start)
    count = remaining.count()
    if count == 0:
        return FileCursor(file, start, start, None, None)
    pieces = math.ceil(count / settings.max_buffered_rows)
    if pieces == 1:
        ordered = remaining.coalesce(1).sortWithinPartitions(ROW_COLUMN)
    else:
        ordered = remaining.repartitionByRange(pieces, ROW_COLUMN).sortWithinPartitions(ROW_COLUMN)
    projected, timestamp_source = json_projection(ordered, settings.timestamp_column)
    mapper = RecordMapper(
        projected.schema,
        topic=settings.topic,
        topic_column=settings.topic_column,
        key_columns=settings.key_columns,
        timestamp_column=timestamp_source,
        hidden=(ROW_COLUMN, TIMESTAMP_COLUMN),
    )
    return FileCursor(file, start, start + count, open_arrow_stream(projected), mapper)


@dataclass
class _Known:
    file: FileInfo
    reported: bool = False


class FilesReader:
    """One task's share of the files, read one file at a time."""

    def __init__(self, settings: SparkSourceSettings, resources: WorkerResources) -> None:
        self._settings = settings
        self._resources = resources
        self._session: SparkSession | None = None
        self._known: dict[str, _Known] = {}
        self._queue: deque[tuple[FileInfo, int]] = deque()
        self._cursor: FileCursor | None = None
        self.changed_files = 0
        """Files found changed after (or while) they were read; each counted once."""

    def _spark(self) -> SparkSession:
        assert self._session is not None, "start() first"
        return self._session

    async def start(self) -> None:
        arrow_rows = max(1, self._settings.max_buffered_rows // 2)
        self._session = await self._resources.run_blocking(self._make_session, arrow_rows)

    def _make_session(self, arrow_rows: int) -> SparkSession:
        single = self._settings.format != "parquet"
        return task_session(self._resources, arrow_batch_rows=arrow_rows, single_split=single)

    @property
    def idle(self) -> bool:
        """Nothing to read until the next listing."""
        return self._cursor is None and not self._queue

    async def refresh(self, offsets: OffsetStorageReader) -> None:
        """List the files, queue this task's new ones (resuming from ``offsets``, an
        :class:`~eos.api.OffsetStorageReader`) and report changed ones."""
        settings = self._settings
        listed = await self._resources.run_blocking(list_files, self._spark(), settings)
        mine = [f for f in listed if owner_of(f.path, settings.task_count) == settings.task_index]
        new: list[FileInfo] = []
        for file in mine:
            known = self._known.get(file.path)
            if known is None:
                new.append(file)
            elif known.file != file and not known.reported:
                known.reported = True
                self._report_changed(file, "after it was listed")
        if not new:
            return
        committed = await offsets.offsets([f.partition() for f in new])
        for file, offset in zip(new, committed, strict=True):
            entry = self._known[file.path] = _Known(file)
            if offset is None:
                self._queue.append((file, 0))
            elif file.changed_since(offset):
                entry.reported = True
                self._report_changed(file, "after rows of it were delivered")
            elif not offset.get("done"):
                self._queue.append((file, int(offset.get("row", 0))))

    def _report_changed(self, file: FileInfo, when: str) -> None:
        self.changed_files += 1
        log.warning(
            "file %s changed %s (now %d bytes, modified %d); it is not read again",
            file.path,
            when,
            file.size,
            file.mtime,
        )

    async def next_records(self) -> list[SourceRecord]:
        """The next records of the current (or next queued) file; empty when idle."""
        if self._cursor is None:
            if not self._queue:
                return []
            file, start = self._queue.popleft()
            self._cursor = await self._resources.run_blocking(
                open_file, self._spark(), self._settings, file, start
            )
        cursor = self._cursor
        records = await self._resources.run_blocking(
            cursor.next_records, self._settings.rows_per_poll
        )
        if cursor.exhausted:
            self._cursor = None
        return records

    async def stop(self) -> None:
        cursor, self._cursor = self._cursor, None
        if cursor is not None:
            await self._resources.run_blocking(cursor.close)
