"""FileSource: complete lines only, in a block per file read, new lines and files, resuming,
file → task assignment (what a reader sees of its blocks: test_file_source_blocks.py)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import anyio
import pytest

from eos.api import ConfigError, ExactlyOnceSupport, RecordBlock, SourceTaskContext
from eos.api.schema import STRING_SCHEMA
from services.connectors.file import (
    FileSource,
    FileSourceTask,
    owner_of,
    read_block,
    read_lines,
)
from tests.unit.test_verifiable import InlineResources, MemoryOffsets


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def settings(tmp_path: Path, **overrides: str) -> dict[str, str]:
    return {"topic": "lines", "path": str(tmp_path / "*.log"), **overrides}


async def started_task(
    config: dict[str, str],
    offsets: MemoryOffsets | None = None,
    *,
    task: int = 0,
    tasks: int = 1,
    clock: Clock | None = None,
) -> FileSourceTask:
    connector = FileSource()
    await connector.start(config)
    source = FileSourceTask(clock=clock or Clock())
    context = SourceTaskContext(
        connector="files",
        task_id=task,
        offset_reader=offsets or MemoryOffsets(),
        resources=InlineResources(),
    )
    await source.start(connector.task_configs(tasks)[task], context)
    return source


async def poll(task: FileSourceTask) -> list[RecordBlock]:
    blocks = list(await task.poll() or [])
    assert all(isinstance(b, RecordBlock) for b in blocks)
    return blocks  # type: ignore[return-value]


def lines(blocks: Sequence[RecordBlock]) -> list[str]:
    return [line for block in blocks for line in block.values]


async def test_complete_lines_with_offsets(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_bytes(b"one\ntwo\r\nthree")
    (tmp_path / "other.txt").write_text("not matched\n")
    task = await started_task(settings(tmp_path))
    (block,) = await poll(task)
    assert list(block.values) == ["one", "two"]
    assert block.source_partition == {"file": str(log)}
    assert block.source_offset == {"position": 9}  # after the block's last line
    assert (block.topic, block.keys, block.value_schema) == ("lines", None, STRING_SCHEMA)
    assert not block.encoded  # the converters encode the lines
    rows = block.records()
    assert [(r.value, r.key, r.source_offset) for r in rows] == [
        ("one", None, None), ("two", None, {"position": 9})
    ]  # fmt: skip
    assert await task.poll() is None  # "three" has no newline yet


async def test_partial_line_waits_and_new_lines_come_on_the_interval(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_text("one\ntw")
    clock = Clock()
    task = await started_task(settings(tmp_path, **{"poll.interval.ms": "5000"}), clock=clock)
    assert lines(await poll(task)) == ["one"]
    with log.open("a") as f:
        f.write("o\nthree\n")
    assert await task.poll() is None  # not looked at before the interval passed
    clock.now += 5
    blocks = await poll(task)
    assert lines(blocks) == ["two", "three"]
    assert blocks[-1].source_offset == {"position": len(b"one\ntwo\nthree\n")}


async def test_new_files_are_found(tmp_path: Path) -> None:
    (tmp_path / "a.log").write_text("a1\n")
    clock = Clock()
    task = await started_task(settings(tmp_path), clock=clock)
    assert lines(await poll(task)) == ["a1"]
    (tmp_path / "b.log").write_text("b1\nb2\n")
    clock.now += 1
    assert lines(await poll(task)) == ["b1", "b2"]
    assert set(task.positions) == {str(tmp_path / "a.log"), str(tmp_path / "b.log")}


async def test_batch_size_and_turns_between_files(tmp_path: Path) -> None:
    for name in ("a", "b"):
        (tmp_path / f"{name}.log").write_text("".join(f"{name}{n}\n" for n in range(5)))
    task = await started_task(settings(tmp_path, **{"batch.size": "3"}))
    seen: list[str] = []
    for _ in range(4):  # backlog is read on without waiting for the interval
        blocks = await poll(task)
        assert 0 < len(lines(blocks)) <= 3  # batch.size lines at most, in blocks
        for block in blocks:  # one block per file read, its offset after its last line
            path = block.source_partition["file"]
            name, last = os.path.basename(path)[0], int(block.values[-1][1:])
            assert all(line.startswith(name) for line in block.values)
            assert block.source_offset == {"position": 3 * (last + 1)}
        seen += lines(blocks)
    assert sorted(seen) == sorted(f"{x}{n}" for x in "ab" for n in range(5))
    assert await task.poll() is None


async def test_resumes_from_offsets(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_text("one\ntwo\nthree\n")
    offsets = MemoryOffsets({json.dumps({"file": str(log)}): {"position": 4}})
    task = await started_task(settings(tmp_path), offsets)
    assert lines(await poll(task)) == ["two", "three"]


async def test_truncated_file_keeps_its_position(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = tmp_path / "a.log"
    log.write_text("one\ntwo\n")
    clock = Clock()
    task = await started_task(settings(tmp_path), clock=clock)
    assert lines(await poll(task)) == ["one", "two"]
    log.write_text("x\n")
    clock.now += 1
    assert await task.poll() is None
    assert "shrank" in caplog.text
    assert task.positions == {str(log): 8}
    with log.open("a") as f:
        f.write("0123456789\nmore\n")  # grows past the old position: reads on from there
    clock.now += 1
    assert lines(await poll(task)) == ["6789", "more"]


async def test_utf8_and_undecodable_bytes(tmp_path: Path) -> None:
    (tmp_path / "a.log").write_bytes("héllo\n".encode() + b"\xff\n")
    task = await started_task(settings(tmp_path))
    assert lines(await poll(task)) == ["héllo", "\ufffd"]


def test_read_lines_in_small_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("services.connectors.file.CHUNK_BYTES", 3)
    path = tmp_path / "f"
    path.write_bytes(b"alpha\nbe\n\ngamma-long-line\ntail")
    got, at_end = read_lines(str(path), 0, 100, "utf-8")
    assert got == [("alpha", 6), ("be", 9), ("", 10), ("gamma-long-line", 26)]
    assert at_end
    assert read_lines(str(path), 6, 2, "utf-8") == ([("be", 9), ("", 10)], False)
    assert read_lines(str(tmp_path / "gone"), 0, 5, "utf-8") == ([], True)


def test_a_poll_stops_at_its_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Long lines: the byte budget ends the read before batch.size lines (a chunk over at
    most), and the next read goes on from there."""
    monkeypatch.setattr("services.connectors.file.CHUNK_BYTES", 8)
    path = tmp_path / "f"
    path.write_bytes(b"".join(b"line-%02d\n" % n for n in range(10)))  # 8 bytes a line
    texts, ends, at_end = read_block(str(path), 0, 100, "utf-8", max_bytes=20)
    assert texts == ["line-00", "line-01", "line-02"]
    assert ends == [8, 16, 24]
    assert not at_end
    texts, ends, at_end = read_block(str(path), 24, 100, "utf-8", max_bytes=20)
    assert texts == ["line-03", "line-04", "line-05"]


async def test_files_are_split_between_tasks(tmp_path: Path) -> None:
    names = [f"f{n}.log" for n in range(30)]
    for name in names:
        (tmp_path / name).write_text(f"{name}\n")
    seen: list[str] = []
    for task in range(3):
        source = await started_task(settings(tmp_path), task=task, tasks=3)
        mine = lines(await poll(source))
        assert all(owner_of(str(tmp_path / n), 3) == task for n in mine)
        seen += mine
    assert sorted(seen) == sorted(names)  # every file once: disjoint and complete
    assert len({owner_of(str(tmp_path / n), 3) for n in names}) == 3


def test_owner_is_stable() -> None:
    assert owner_of("/data/a.log", 4) == owner_of("/data/a.log", 4)
    assert [owner_of("/data/a.log", 1), owner_of("/x", 1)] == [0, 0]


async def test_connector(tmp_path: Path) -> None:
    connector = FileSource()
    await connector.start(settings(tmp_path))
    configs = connector.task_configs(3)
    assert [(c["task.id"], c["task.count"]) for c in configs] == [
        ("0", "3"),
        ("1", "3"),
        ("2", "3"),
    ]
    assert connector.exactly_once_support(settings(tmp_path)) is ExactlyOnceSupport.SUPPORTED
    assert connector.validate(settings(tmp_path, encoding="utf-16"))["encoding"]
    assert connector.validate(settings(tmp_path, encoding="nope"))["encoding"]
    assert not any(connector.validate(settings(tmp_path, encoding="latin-1")).values())
    with pytest.raises(ConfigError):
        await connector.start({"topic": "t"})


async def test_poll_does_not_wait_long(tmp_path: Path) -> None:
    task = await started_task(settings(tmp_path, **{"poll.interval.ms": "60000"}))
    with anyio.fail_after(1):
        assert await task.poll() is None


@pytest.mark.parametrize("encoding", ["utf-8", "latin-1", "cp1252"])
def test_read_lines_crlf_and_non_ascii_in_small_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, encoding: str
) -> None:
    monkeypatch.setattr("services.connectors.file.CHUNK_BYTES", 4)
    path = tmp_path / "f"
    text = "ab\r\nçé\n\r\nplain\nx\ry\npartial"
    path.write_bytes(text.encode(encoding))
    got, at_end = read_lines(str(path), 0, 100, encoding)
    ends = [len(line.encode(encoding)) for line in text.split("\n")]
    offsets = [sum(ends[: i + 1]) + i + 1 for i in range(5)]
    assert got == list(zip(["ab", "çé", "", "plain", "x\ry"], offsets, strict=True))
    assert at_end
