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

The rows at or after the resume index reach Python in index order, piece by
piece (:mod:`.arrow_stream`), with flat memory however large the file, so a
resumed task skips exactly the rows whose offsets were committed. Parquet is
streamed in scan order (row groups in file order, rows in order within each), in
input partitions of about ``max.buffered.rows`` rows (``maxPartitionBytes`` set
from the file's bytes per row); the cursor checks every index, and should a scan
ever hand rows over out of order, it reopens the file sorted. Other formats are
range-partitioned on the index into pieces of about ``max.buffered.rows`` rows and
sorted within each piece.

**Assignment.** Files are found at run time, so each task lists ``path`` itself
every ``poll.interval.ms`` and keeps the files with
``zlib.crc32(path) % task.count == task.index`` (:func:`owner_of`): each file
belongs to exactly one task. A file whose size or modification time differs from
what was recorded when it was read is reported (a warning, and the task's
``eos_task_events_total{event="changed_files"}`` metric) and never re-read.
"""

from __future__ import annotations

import datetime
import logging
import math
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from eos.api import OffsetStorageReader, RecordBlock, SourceRecord, WorkerResources
from services.connectors.spark.arrow_stream import RowStream, open_arrow_stream
from services.connectors.spark.config import SparkSourceSettings
from services.connectors.spark.mapping import Encoder
from services.connectors.spark.session import task_session

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

ROW_COLUMN = "__eos_row_index"
CHANGED_FILES = "changed_files"
"""The event counted (``eos_task_events_total{event="changed_files"}``) per changed file."""
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


def _read(session: SparkSession, settings: SparkSourceSettings, path: str) -> DataFrame:
    reader = session.read.format(settings.format).options(**settings.options)
    if settings.schema:
        reader = reader.schema(settings.schema)
    return reader.load(path)


def _indexed(df: DataFrame, settings: SparkSourceSettings, path: str) -> DataFrame:
    from pyspark.sql import functions as F

    if settings.format == "parquet":
        return df.select("*", F.col("_metadata.row_index").alias(ROW_COLUMN))
    partitions = df.rdd.getNumPartitions()
    if partitions != 1:
        raise RuntimeError(
            f"{path} was split into {partitions} input partitions; rows of a "
            f"{settings.format} file are numbered by reading it as one partition"
        )
    return df.select("*", F.monotonically_increasing_id().alias(ROW_COLUMN))


def _sorted(df: DataFrame, count: int, piece_rows: int) -> DataFrame:
    """``df`` in row-index order, in partitions of about ``piece_rows`` rows."""
    pieces = math.ceil(count / piece_rows)
    if pieces <= 1:
        return df.coalesce(1).sortWithinPartitions(ROW_COLUMN)
    return df.repartitionByRange(pieces, ROW_COLUMN).sortWithinPartitions(ROW_COLUMN)


class FileCursor:
    """The rows of one file from ``start`` on, in index order, as records (blocking).

    ``resort`` (Parquet, read in scan order) reopens the file from a row in sorted
    order; it is used if the scan ever hands rows over out of order."""

    def __init__(
        self,
        file: FileInfo,
        start: int,
        stream: RowStream,
        encoder: Encoder,
        settings: SparkSourceSettings,
        resort: Callable[[int], RowStream] | None = None,
    ) -> None:
        self.file = file
        self.next_row = start
        self._stream: RowStream | None = stream
        self._encoder = encoder
        self._topic = settings.topic
        self._resort = resort
        self._partition = file.partition()
        self._path_header = (FILE_HEADER, file.path.encode())

    @property
    def exhausted(self) -> bool:
        return self._stream is None

    def prefetch(self) -> None:
        """Wait until Spark has the first rows ready (so the next call is fast)."""
        if self._stream is not None and not self._stream.prefetch():
            self.close()

    def next_records(self, limit: int) -> list[SourceRecord | RecordBlock]:
        """Up to ``limit`` records; the offset of the file's last row says ``done``."""
        stream = self._stream
        if stream is None:
            return []
        chunk = self._encoder.read(stream, limit)
        indexes = chunk.column(ROW_COLUMN)
        if not indexes:
            self.close()
            return []
        first = self.next_row
        if indexes != list(range(first, first + len(indexes))):
            due = next(i for n, i in enumerate(indexes) if i != first + n)
            if self._resort is not None:
                log.info("rows of %s arrived out of order; reading it sorted", self.file.path)
                stream.close()
                self._stream, self._resort = self._resort(first), None
                return self.next_records(limit)
            self.close()
            raise RuntimeError(
                f"rows of {self.file.path} arrived out of order: row {due} where "
                f"{first + indexes.index(due)} was due"
            )
        self.next_row = end = first + len(indexes)
        done = not stream.prefetch()  # rows after this chunk? (Spark is ahead anyway)
        # Only a chunk's last record carries the offset (the others advance none): the
        # runtime commits at poll boundaries, and SparkSource draws no others.
        offset = {"row": end, "done": done, "size": self.file.size, "mtime": self.file.mtime}
        records = self._encoder.records(
            chunk,
            topic=self._topic,
            partition=self._partition,
            offset=offset,
            **self._lineage(first, end),
        )
        if done:
            self.close()
        return records

    def _lineage(self, first: int, end: int) -> dict[str, Any]:
        """The file and row headers of rows ``first`` to ``end`` (``lineage.headers``)."""
        if not self._encoder.lineage:
            return {"headers": ()}
        rows = [b"%d" % i for i in range(first, end)]
        return {"headers": (self._path_header,), "row_header": (ROW_HEADER, rows)}

    def close(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            stream.close()


def parquet_row_groups(session: SparkSession, path: str) -> list[int] | None:
    """Rows per row group of the Parquet file at ``path`` (any Hadoop path), read from
    its footer by the Parquet library Spark ships; None if it cannot be read."""
    try:
        jvm: Any = session.sparkContext._jvm
        conf = session._jsparkSession.sessionState().newHadoopConf()
        hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
        source = jvm.org.apache.parquet.hadoop.util.HadoopInputFile.fromPath(hadoop_path, conf)
        reader = jvm.org.apache.parquet.hadoop.ParquetFileReader.open(source)
        try:
            blocks = reader.getFooter().getBlocks()
            return [int(blocks.get(i).getRowCount()) for i in range(blocks.size())]
        finally:
            reader.close()
    except Exception as exc:  # Py4J errors, unreadable footer: the sorted read handles it
        log.info("cannot read the Parquet footer of %s (%s); reading it sorted", path, exc)
        return None


def open_file(
    session: SparkSession, settings: SparkSourceSettings, file: FileInfo, start: int
) -> FileCursor:
    """A cursor over ``file`` from row ``start`` (blocking: plans and starts Spark's
    stream).

    Spark hands rows to Python one input partition at a time, and holds a whole
    partition in the driver while it does, so partitions must stay near
    ``max.buffered.rows`` rows. A Parquet file whose row groups (the smallest split
    Spark makes) all hold at most that many rows is streamed in scan order (row groups
    in file order, each in row order: row-index order) in partitions of about that
    many rows. Other files, other formats, and a scan that ever hands rows over out
    of order are range-partitioned on the row index into pieces of that size and
    sorted within each piece (a shuffle)."""
    from pyspark.sql import functions as F

    piece_rows = settings.max_buffered_rows
    groups = parquet_row_groups(session, file.path) if settings.format == "parquet" else None
    scan = groups is not None and max(groups, default=0) <= piece_rows
    if scan:
        assert groups is not None
        row_bytes = file.size / max(1, sum(groups))
        piece_bytes = max(1 << 20, int(row_bytes * piece_rows))
        session.conf.set("spark.sql.files.maxPartitionBytes", str(piece_bytes))
    indexed = _indexed(_read(session, settings, file.path), settings, file.path)
    encoder = Encoder(indexed, settings, keep=(ROW_COLUMN,), where=file.path)

    def resort(row: int) -> RowStream:
        rest = encoder.frame.filter(F.col(ROW_COLUMN) >= row)
        count = sum(groups) - row if groups is not None else rest.count()
        return open_arrow_stream(_sorted(rest, count, piece_rows))

    log.info(
        "reading %s from row %d %s",
        file.path,
        start,
        "in scan order" if scan else f"in sorted pieces of {piece_rows} rows",
    )
    if not scan:
        return FileCursor(file, start, resort(start), encoder, settings)
    rows = encoder.frame.filter(F.col(ROW_COLUMN) >= start)
    return FileCursor(file, start, open_arrow_stream(rows), encoder, settings, resort)


@dataclass
class _Known:
    file: FileInfo
    reported: bool = False


class FilesReader:
    """One task's share of the files, read ahead in background stages.

    ``refresh`` (called by ``poll``) queues new files. The *opener* opens the next
    queued file and waits for Spark's first Arrow batch of it while ``max.open.files``
    *readers* each stream a file, one chunk ahead of ``poll``: Spark prepares the next
    file while Python delivers these, and computes the open files' pieces side by side
    (one Spark job at a time per file; a task with most of the files still keeps
    ``local[N]``'s cores busy). Chunks of different files interleave; each carries its
    own file's offset. Python holds at most ``max.buffered.rows`` rows
    (:attr:`~.config.SparkSourceSettings.file_batch_rows`).
    """

    def __init__(
        self,
        settings: SparkSourceSettings,
        resources: WorkerResources,
        start_soon: Callable[..., None],
        count: Callable[[str], None],
    ) -> None:
        self._settings = settings
        self._resources = resources
        self._start_soon = start_soon
        self._count = count
        self._session: SparkSession | None = None
        self._known: dict[str, _Known] = {}
        # Each stream end is closed by its owner: the queue's send end and the chunks'
        # receive end by stop(), the others by the stage that uses them.
        self._queued_send, self._queued = anyio.create_memory_object_stream[tuple[FileInfo, int]](
            math.inf
        )
        # each reader has its own clone of the two ends between opener, readers and poll
        self._opened_send, self._opened = anyio.create_memory_object_stream[FileCursor]()
        self._chunks_send, self._chunks = anyio.create_memory_object_stream[
            list[SourceRecord | RecordBlock]
        ]()
        self._chunk_rows = min(settings.batch_rows, settings.file_batch_rows)
        self._files_in_flight = 0
        """Files queued and not yet delivered to the last row."""

    def _spark(self) -> SparkSession:
        assert self._session is not None, "start() first"
        return self._session

    async def start(self) -> None:
        arrow_rows = self._settings.file_batch_rows
        try:
            self._session = await self._resources.run_blocking(self._make_session, arrow_rows)
        except BaseException:
            for end in (self._queued_send, self._queued, self._opened_send, self._opened):
                end.close()
            self._chunks_send.close()
            self._chunks.close()
            raise
        self._start_soon(self._open_files)
        with self._opened, self._chunks_send:  # the readers' clones keep them open
            for _ in range(self._settings.max_open_files):
                self._start_soon(self._read_files, self._opened.clone(), self._chunks_send.clone())

    def _make_session(self, arrow_rows: int) -> SparkSession:
        single = self._settings.format != "parquet"
        return task_session(self._resources, arrow_batch_rows=arrow_rows, single_split=single)

    @property
    def idle(self) -> bool:
        """Nothing to read until the next listing."""
        return self._files_in_flight == 0

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
                self._queue(file, 0)
            elif file.changed_since(offset):
                entry.reported = True
                self._report_changed(file, "after rows of it were delivered")
            elif not offset.get("done"):
                self._queue(file, int(offset.get("row", 0)))

    def _queue(self, file: FileInfo, start: int) -> None:
        self._files_in_flight += 1
        self._queued_send.send_nowait((file, start))

    def _report_changed(self, file: FileInfo, when: str) -> None:
        self._count(CHANGED_FILES)
        log.warning(
            "file %s changed %s (now %d bytes, modified %d); it is not read again",
            file.path,
            when,
            file.size,
            file.mtime,
        )

    async def next_records(self, wait: float) -> list[SourceRecord | RecordBlock]:
        """The next chunk of records, or an empty list if none came within ``wait`` s."""
        try:
            return self._chunks.receive_nowait()
        except anyio.WouldBlock:
            pass
        with anyio.move_on_after(wait):
            return await self._chunks.receive()
        return []

    async def _open_files(self) -> None:
        """Stage 1: open each queued file and let Spark compute its first batch."""
        async with self._queued, self._opened_send:
            async for file, start in self._queued:
                cursor = await self._resources.run_blocking(
                    open_file, self._spark(), self._settings, file, start
                )
                try:
                    await self._resources.run_blocking(cursor.prefetch)
                    await self._opened_send.send(cursor)
                except anyio.BrokenResourceError:  # the reader stopped
                    await self._close(cursor)
                    return
                except BaseException:
                    await self._close(cursor)
                    raise

    async def _read_files(
        self,
        opened: MemoryObjectReceiveStream[FileCursor],
        chunks: MemoryObjectSendStream[list[SourceRecord | RecordBlock]],
    ) -> None:
        """Stage 2 (one of ``max.open.files``): stream each file it takes, one chunk
        ahead of ``poll``."""
        async with opened, chunks:
            async for cursor in opened:
                try:
                    while not cursor.exhausted:
                        records = await self._resources.run_blocking(
                            cursor.next_records, self._chunk_rows
                        )
                        if records:
                            await chunks.send(records)
                except anyio.BrokenResourceError:  # stop() was called
                    return
                finally:
                    await self._close(cursor)
                self._files_in_flight -= 1

    async def _close(self, cursor: FileCursor) -> None:
        with anyio.CancelScope(shield=True):
            await self._resources.run_blocking(cursor.close)

    async def stop(self) -> None:
        """Stop taking files and chunks; the stages end (closing their files) when
        they notice, or when the runtime cancels them after ``stop``."""
        self._queued_send.close()
        self._chunks.close()
