"""FileCursor (files mode) on scripted streams: order checks, the sorted re-read, offsets."""

from __future__ import annotations

from collections import deque
from typing import Any

import pytest

from eos.api import RecordBlock, SourceRecord
from eos.runtime.task.producers.base import expand_blocks
from services.connectors.spark.arrow_stream import Columns
from services.connectors.spark.config import SparkSourceSettings
from services.connectors.spark.files_mode import ROW_COLUMN, FileCursor, FileInfo
from services.connectors.spark.mapping import KEY_COLUMN, VALUE_COLUMN, Encoder

FILE = FileInfo("file:/data/a.parquet", 1000, 17)
SETTINGS = SparkSourceSettings.parse({"path": "/data", "topic": "t"})


class ScriptedStream:
    """Hands over the given row indexes, one list per call (as encoded rows)."""

    def __init__(self, *chunks: list[int]) -> None:
        self.chunks = deque(chunks)
        self.closed = False

    def next_columns(self, limit: int) -> Columns:
        rows = self.chunks.popleft() if self.chunks else []
        assert len(rows) <= limit
        return {
            ROW_COLUMN: rows,
            VALUE_COLUMN: [b'{"n":%d}' % i for i in rows],
            KEY_COLUMN: [b"%d" % i for i in rows],
        }

    def next_rows(self, limit: int) -> list[dict[str, Any]]:
        raise AssertionError("encoded rows are read as columns")

    def prefetch(self) -> bool:
        return bool(self.chunks)

    def close(self) -> None:
        self.closed = True


def records_of(cursor: FileCursor, limit: int) -> list[SourceRecord]:
    """The cursor's next chunk (one block, as Spark encoded it) as records."""
    chunk = cursor.next_records(limit)
    assert all(isinstance(block, RecordBlock) for block in chunk)
    return expand_blocks(chunk)


def _spark_encoder(lineage: bool = True) -> Encoder:
    encoder = Encoder.__new__(Encoder)  # as built for a frame Spark encodes
    encoder.mapper = None
    encoder.lineage = lineage
    return encoder


def test_rows_in_order_become_records_with_the_offset_on_the_last() -> None:
    stream = ScriptedStream([5, 6, 7], [8, 9])
    cursor = FileCursor(FILE, 5, stream, _spark_encoder(), SETTINGS)
    first = records_of(cursor, 3)
    assert [r.value for r in first] == [b'{"n":5}', b'{"n":6}', b'{"n":7}']
    assert all(r.encoded and r.topic == "t" for r in first)
    assert [r.source_offset for r in first[:-1]] == [None, None]
    assert first[-1].source_offset == {"row": 8, "done": False, "size": 1000, "mtime": 17}
    assert dict(first[0].headers) == {
        "eos.spark.file": b"file:/data/a.parquet",
        "eos.spark.row": b"5",
    }
    last = records_of(cursor, 3)
    assert last[-1].source_offset == {"row": 10, "done": True, "size": 1000, "mtime": 17}
    assert cursor.exhausted
    assert stream.closed


def test_rows_carry_no_lineage_headers_unless_asked() -> None:
    cursor = FileCursor(FILE, 5, ScriptedStream([5, 6]), _spark_encoder(lineage=False), SETTINGS)
    records = records_of(cursor, 2)
    assert [r.headers for r in records] == [(), ()]
    assert SETTINGS.lineage_headers is False  # the default
    assert SparkSourceSettings.parse(
        {"path": "/data", "topic": "t", "lineage.headers": "true"}
    ).lineage_headers


def test_rows_out_of_order_are_read_again_sorted_from_the_first_missing_row() -> None:
    scan = ScriptedStream([0, 1, 2], [5, 6])  # rows 3 and 4 come later: not in index order
    sorted_reads: list[int] = []

    def resort(row: int) -> ScriptedStream:
        sorted_reads.append(row)
        return ScriptedStream([3, 4, 5, 6], [7])

    cursor = FileCursor(FILE, 0, scan, _spark_encoder(), SETTINGS, resort)
    assert [r.key for r in records_of(cursor, 5)] == [b"0", b"1", b"2"]
    records = records_of(cursor, 5)  # rows 5, 6 are not delivered from the scan
    assert sorted_reads == [3]
    assert scan.closed
    assert [r.key for r in records] == [b"3", b"4", b"5", b"6"]
    assert [r.key for r in records_of(cursor, 5)] == [b"7"]


def test_rows_out_of_order_without_a_sorted_read_fail_naming_the_row() -> None:
    cursor = FileCursor(FILE, 0, ScriptedStream([0, 2]), _spark_encoder(), SETTINGS)
    with pytest.raises(RuntimeError, match=r"row 2 where 1 was due"):
        records_of(cursor, 5)
    assert cursor.exhausted


def test_an_empty_rest_of_a_file_gives_no_records() -> None:
    cursor = FileCursor(FILE, 10, ScriptedStream(), _spark_encoder(), SETTINGS)
    cursor.prefetch()
    assert cursor.exhausted
    assert records_of(cursor, 5) == []
