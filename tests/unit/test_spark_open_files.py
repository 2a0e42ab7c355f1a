"""FilesReader (files mode) with fakes for Spark: ``max.open.files`` files are streamed at
once, and every row of every file is delivered once, with its own file's offsets."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import anyio
import pytest

from eos.api import RecordBlock, SourcePartition
from eos.runtime.task.producers.base import expand_blocks
from services.connectors.spark import files_mode
from services.connectors.spark.arrow_stream import Columns
from services.connectors.spark.config import SparkSourceSettings
from services.connectors.spark.files_mode import ROW_COLUMN, FileCursor, FileInfo, FilesReader
from services.connectors.spark.mapping import KEY_COLUMN, VALUE_COLUMN, Encoder

FILES = [FileInfo(f"file:/data/{name}.parquet", 100, 1) for name in "ab"]
ROWS = 30


class MeetingStream:
    """A file's rows, 10 per call; the first call waits until every file's stream has
    been read once (a barrier): only streams read side by side get past it."""

    def __init__(self, barrier: threading.Barrier) -> None:
        self.barrier = barrier
        self.next = 0

    def next_columns(self, limit: int) -> Columns:
        if self.next == 0:
            self.barrier.wait()
        rows = list(range(self.next, min(ROWS, self.next + min(limit, 10))))
        self.next += len(rows)
        return {ROW_COLUMN: rows, VALUE_COLUMN: [b"%d" % i for i in rows], KEY_COLUMN: rows}

    def next_rows(self, limit: int) -> list[dict[str, Any]]:
        raise AssertionError("encoded rows are read as columns")

    def prefetch(self) -> bool:
        return self.next < ROWS

    def close(self) -> None:
        pass


class Resources:
    settings: dict[str, str] = {}

    async def run_blocking(self, func: Callable[..., Any], *args: Any) -> Any:
        return await anyio.to_thread.run_sync(func, *args)


class NoOffsets:
    async def offsets(self, partitions: Sequence[SourcePartition]) -> list[None]:
        return [None] * len(partitions)


class SessionlessReader(FilesReader):
    def _make_session(self, arrow_rows: int) -> Any:
        return object()


@pytest.fixture
def fake_spark(monkeypatch: pytest.MonkeyPatch) -> threading.Barrier:
    barrier = threading.Barrier(len(FILES), timeout=10)
    encoder = Encoder.__new__(Encoder)  # as built for a frame Spark encodes
    encoder.mapper, encoder.lineage = None, False

    def open_file(session: Any, settings: SparkSourceSettings, file: FileInfo, start: int) -> Any:
        return FileCursor(file, start, MeetingStream(barrier), encoder, settings)

    monkeypatch.setattr(files_mode, "list_files", lambda session, settings: FILES)
    monkeypatch.setattr(files_mode, "open_file", open_file)
    return barrier


async def test_two_files_are_streamed_side_by_side(fake_spark: threading.Barrier) -> None:
    settings = SparkSourceSettings.parse({"path": "/data", "topic": "t", "max.open.files": "2"})
    delivered: list[Any] = []
    async with anyio.create_task_group() as tg:
        reader = SessionlessReader(settings, Resources(), tg.start_soon, lambda event: None)  # type: ignore[arg-type]
        await reader.start()
        await reader.refresh(NoOffsets())  # type: ignore[arg-type]
        with anyio.fail_after(10):
            while len([r for r in delivered if r.source_offset is not None]) < 6:
                chunk = await reader.next_records(1.0)
                assert all(isinstance(item, RecordBlock) for item in chunk)
                delivered += expand_blocks(chunk)
        await reader.stop()
        tg.cancel_scope.cancel()
    assert not fake_spark.broken  # both files were read at the same time
    for file in FILES:
        rows = [r for r in delivered if r.source_partition == file.partition()]
        assert [r.value for r in rows] == [b"%d" % i for i in range(ROWS)]  # each row once
        offsets = [r.source_offset for r in rows if r.source_offset is not None]
        assert [o["row"] for o in offsets] == [10, 20, 30]
        assert [o["done"] for o in offsets] == [False, False, True]
    assert reader.idle


def test_python_holds_at_most_the_buffer_with_more_files_open() -> None:
    for files in (1, 2, 4):
        settings = SparkSourceSettings.parse(
            {"path": "/d", "topic": "t", "max.open.files": str(files), "max.buffered.rows": "1200"}
        )
        held = 2 * (files + 1) * settings.file_batch_rows  # batches and chunks, see docs
        assert held <= 1200
    assert SparkSourceSettings.parse({"path": "/d", "topic": "t"}).max_open_files == 2
