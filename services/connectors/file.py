"""FileSource: every line of the files matching a glob pattern, exactly once.

Each file is one source partition, ``{"file": "<absolute path>"}``; its offset is
``{"position": <byte offset just after the last emitted line>}``. A record's value
is the line as a string (``STRING`` schema) without its line ending (``\\n`` or
``\\r\\n``); the key is None. Only complete lines (ending in ``\\n``) are emitted: a
partial last line waits until it is finished.

The lines are handed over in blocks (:class:`~eos.api.RecordBlock`, ``encoded=False``):
one block per file read, its values the lines, its offset the position after its last
line. The converters encode a block's values a column at a time and the transforms work
on blocks where they can (row by row where not, naming the failing row), so the bytes
written, the transforms and ``errors.tolerance`` behave as for one record per line, for
less CPU per line. A block is never split between transactions: its offset commits with
all of its lines.

Files are found at run time, so they are assigned to tasks by a stable hash of the
absolute path: task ``i`` of ``n`` reads the files with
``zlib.crc32(path) % n == i`` (:func:`owner_of`), so every file belongs to exactly
one task. Every ``poll.interval.ms`` a task looks for new files and for files that
grew; a file with unread lines is read on, batch after batch, without waiting.
Listing and reading happen in the worker's thread pool
(``context.resources.run_blocking``), never on the event loop.

A task resumes each file from its committed offset. A file that became shorter than
that offset (truncated or replaced) is not re-read from the start, which could emit
lines twice: the task logs a warning and keeps its position, reading on once the
file grows past it. The files must be visible at the same paths on every worker
that may run the tasks (a shared file system, or a single worker); use an absolute
pattern, since a relative one is resolved against the worker's working directory.
"""

from __future__ import annotations

import codecs
import glob
import logging
import os
import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

import anyio

from eos.api import (
    NO_DEFAULT,
    ConfigDef,
    ConfigError,
    ExactlyOnceSupport,
    Importance,
    NonEmpty,
    Range,
    RecordBlock,
    SourceConnector,
    SourceRecord,
    SourceTask,
    SourceTaskContext,
    Type,
    config_class,
    definition_of,
    fill,
    setting,
)
from eos.api.schema import STRING_SCHEMA

log = logging.getLogger(__name__)

TASK_ID = "task.id"
TASK_COUNT = "task.count"
IDLE_SECONDS = 0.1
"""How long :meth:`FileSourceTask.poll` waits at most before returning empty-handed."""
CHUNK_BYTES = 64 * 1024
POLL_BYTES = 8 * 1024 * 1024
"""A poll stops reading once it holds this many bytes of lines, whatever ``batch.size``
allows: long lines do not make a poll (and its transaction) of gigabytes."""


class _LineEncoding:
    """An encoding in which a newline is the single byte ``\\n`` (utf-8, latin-1, …)."""

    allowed = "an encoding that writes a newline as the single byte 0x0A, e.g. utf-8"

    def __call__(self, key: str, value: Any) -> None:
        try:
            codecs.lookup(value)
            newline = "\n".encode(value)
        except (LookupError, UnicodeError):
            raise ConfigError(key, value, f"unknown encoding; expected {self.allowed}") from None
        if newline != b"\n":
            raise ConfigError(key, value, f"expected {self.allowed}")


@config_class
class Settings:
    topic: str = setting(
        "topic",
        Type.STRING,
        NO_DEFAULT,
        NonEmpty(),
        Importance.HIGH,
        "Topic to write to.",
    )
    pattern: str = setting(
        "path",
        Type.STRING,
        NO_DEFAULT,
        NonEmpty(),
        Importance.HIGH,
        "Glob pattern of the files to read, e.g. /data/*.log (** matches subdirectories).",
    )
    poll_interval: float = setting(
        "poll.interval.ms",
        Type.LONG,
        1000,
        Range(at_least=1),
        Importance.MEDIUM,
        "How often to look for new files and new lines.",
        convert=lambda ms: ms / 1000,
    )
    """Seconds."""
    batch_size: int = setting(
        "batch.size",
        Type.INT,
        50000,
        Range(at_least=1),
        Importance.LOW,
        "Most lines per poll, and at most 8 MiB of them (with transaction.boundary=poll, "
        "also per transaction: FileStreamSource's 2000 would commit a transaction every "
        "2000 lines, about half the rate on 100-byte lines).",
    )
    encoding: str = setting(
        "encoding",
        Type.STRING,
        "utf-8",
        _LineEncoding(),
        Importance.LOW,
        "Encoding of the files.",
    )

    @classmethod
    def parse(cls, config: Mapping[str, Any]) -> Settings:
        return fill(cls, CONFIG_DEF.parse(config))


CONFIG_DEF = definition_of(Settings)


def owner_of(path: str, tasks: int) -> int:
    """The task (of ``tasks``) that reads the file at absolute ``path``."""
    return zlib.crc32(os.fsencode(path)) % tasks


def list_files(pattern: str) -> dict[str, int]:
    """Absolute path → size of every regular file matching ``pattern`` (blocking)."""
    found: dict[str, int] = {}
    for match in sorted(glob.glob(pattern, recursive=True)):
        path = os.path.abspath(match)
        try:
            if os.path.isfile(path):
                found[path] = os.path.getsize(path)
        except OSError:  # vanished meanwhile
            continue
    return found


def read_lines(
    path: str, position: int, limit: int, encoding: str
) -> tuple[list[tuple[str, int]], bool]:
    """Up to ``limit`` complete lines of ``path`` from byte ``position`` (blocking).

    Returns ``(lines, at_end)``: each line without its ending, with the byte
    offset just after it; ``at_end`` is True when the file holds no further
    complete line (a partial last line stays unread).
    """
    texts, ends, at_end = read_block(path, position, limit, encoding)
    return list(zip(texts, ends, strict=True)), at_end


def read_block(
    path: str, position: int, limit: int, encoding: str, max_bytes: int = POLL_BYTES
) -> tuple[list[str], list[int], bool]:
    """:func:`read_lines` as two columns, ``(texts, ends, at_end)``: split, measured and
    decoded a chunk at a time (C loops; nothing built per line but its text and end).
    Reading stops once the lines hold ``max_bytes`` (a chunk more at most)."""
    texts: list[str] = []
    ends: list[int] = []
    whole = _decodes_whole(encoding)
    try:
        with open(path, "rb") as file:
            file.seek(position)
            rest, start = b"", position  # start: file offset of rest[0]
            while len(texts) < limit and start - position < max_bytes:
                data = file.read(CHUNK_BYTES)
                if not data:
                    return texts, ends, True
                if rest:
                    data = rest + data
                cut = data.rfind(b"\n") + 1
                if not cut:
                    rest = data
                    continue
                raws = data[:cut].split(b"\n")
                raws.pop()  # what follows the last newline: b""
                del raws[limit - len(texts) :]
                got = list(accumulate(map(_PLUS_ONE, map(len, raws)), initial=start))
                del got[0]
                rest, start = data[got[-1] - start :], got[-1]
                ends += got
                texts += _decode(raws, encoding, whole)
    except FileNotFoundError:
        return texts, ends, True
    return texts, ends, False


_PLUS_ONE = (1).__add__
_WHOLE = frozenset({"utf-8", "ascii", "iso8859-1"})


def _decodes_whole(encoding: str) -> bool:
    """Whether lines of ASCII bytes decode as one text split at newlines (the encodings
    where ASCII bytes are the same characters)."""
    return codecs.lookup(encoding).name in _WHOLE


def _decode(raws: list[bytes], encoding: str, whole: bool) -> list[str]:
    """Each line decoded (invalid bytes replaced), a trailing ``\\r`` dropped."""
    joined = b"\n".join(raws)
    if b"\r" in joined:
        raws = [raw.removesuffix(b"\r") for raw in raws]
        joined = b"\n".join(raws)
    if whole and joined.isascii():
        return joined.decode("ascii").split("\n")
    return [raw.decode(encoding, errors="replace") for raw in raws]


class FileSource(SourceConnector):
    """Lines of the files matching ``path``, spread over the tasks by path hash."""

    def __init__(self) -> None:
        self._config: dict[str, str] = {}

    def version(self) -> str:
        return "1.0.0"

    def config_def(self) -> ConfigDef:
        return CONFIG_DEF

    async def start(self, config: Mapping[str, str]) -> None:
        Settings.parse(config)
        self._config = dict(config)

    def task_class(self) -> type[SourceTask]:
        return FileSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        """Task ``i`` of ``n`` reads the files :func:`owner_of` gives it."""
        return [
            {**self._config, TASK_ID: str(i), TASK_COUNT: str(max_tasks)} for i in range(max_tasks)
        ]

    def exactly_once_support(self, config: Mapping[str, str]) -> ExactlyOnceSupport | None:
        return ExactlyOnceSupport.SUPPORTED


@dataclass
class _File:
    position: int
    pending: bool = True  # may hold unread complete lines
    truncated: bool = False  # warned that it shrank below position


class FileSourceTask(SourceTask):
    """Reads the files it owns; ``clock`` (monotonic seconds) paces the scans."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._settings: Settings | None = None
        self._context: SourceTaskContext | None = None
        self._task_id, self._task_count = 0, 1
        self._files: dict[str, _File] = {}
        self._next_scan = 0.0
        self._turn = 0  # rotates which file is read first

    def version(self) -> str:
        return "1.0.0"

    @property
    def positions(self) -> dict[str, int]:
        """Absolute path → byte position of every file this task has found."""
        return {path: f.position for path, f in self._files.items()}

    async def start(self, config: Mapping[str, str], context: SourceTaskContext) -> None:
        self._settings = Settings.parse(config)
        self._context = context
        try:
            self._task_id, self._task_count = int(config[TASK_ID]), int(config[TASK_COUNT])
        except (KeyError, ValueError):
            raise ConfigError(
                TASK_ID, config.get(TASK_ID), "not a task configuration of FileSource"
            ) from None
        self._files = {}
        self._next_scan = self._clock()

    async def poll(self) -> Sequence[SourceRecord | RecordBlock] | None:
        assert self._settings is not None, "start() first"
        if self._clock() >= self._next_scan:
            self._next_scan = self._clock() + self._settings.poll_interval
            await self._scan()
        blocks = await self._read()
        if blocks:
            return blocks
        await anyio.sleep(min(max(self._next_scan - self._clock(), 0.0), IDLE_SECONDS))
        return None

    async def _scan(self) -> None:
        """Find new files (resuming them from their offsets) and files that grew."""
        assert self._settings is not None
        assert self._context is not None
        sizes = await self._context.resources.run_blocking(list_files, self._settings.pattern)
        mine = {p: s for p, s in sizes.items() if owner_of(p, self._task_count) == self._task_id}
        new = [p for p in mine if p not in self._files]
        if new:
            offsets = await self._context.offset_reader.offsets([{"file": p} for p in new])
            for path, offset in zip(new, offsets, strict=True):
                self._files[path] = _File(_position(offset))
                log.info("file found: %s from byte %d", path, self._files[path].position)
        for path, size in mine.items():
            self._check_size(path, self._files[path], size)

    def _check_size(self, path: str, file: _File, size: int) -> None:
        if size < file.position:
            if not file.truncated:
                log.warning(
                    "file %s shrank to %d bytes, below the position %d already read; "
                    "keeping the position (nothing is re-read) until it grows past it",
                    path,
                    size,
                    file.position,
                )
            file.truncated, file.pending = True, False
        else:
            file.truncated = False
            file.pending = size > file.position

    async def _read(self) -> list[SourceRecord | RecordBlock]:
        """Up to ``batch.size`` lines, from the files that may have some, in turns: what
        :meth:`_hand_over` makes of each file read."""
        assert self._settings is not None
        assert self._context is not None
        settings, run_blocking = self._settings, self._context.resources.run_blocking
        pending = [p for p, f in self._files.items() if f.pending]
        if not pending:
            return []
        self._turn = (self._turn + 1) % len(pending)
        blocks: list[SourceRecord | RecordBlock] = []
        budget = settings.batch_size
        for path in pending[self._turn :] + pending[: self._turn]:
            if budget <= 0:
                break
            file = self._files[path]
            texts, ends, at_end = await run_blocking(
                read_block, path, file.position, budget, settings.encoding
            )
            file.pending = not at_end
            if not texts:
                continue
            blocks += self._hand_over(path, texts, ends, settings.topic)
            budget -= len(texts)
            file.position = ends[-1]
        return blocks

    def _hand_over(
        self, path: str, texts: list[str], ends: list[int], topic: str
    ) -> list[SourceRecord | RecordBlock]:
        """The lines ``texts`` read from ``path`` (line ``i`` ends at byte ``ends[i]``) as
        they are handed over: one block. (A subclass may hand them over otherwise, e.g.
        bench/line_records.py: a SourceRecord per line.)"""
        return [lines_block(path, texts, ends[-1], topic)]

    async def stop(self) -> None:
        self._files = {}


def lines_block(path: str, texts: list[str], end: int, topic: str) -> RecordBlock:
    """The lines ``texts`` of the file at ``path`` that end at byte ``end``, as one block
    (the source offset, ``{"position": end}``, is the block's: it commits with its last
    line)."""
    return RecordBlock(
        {"file": path}, {"position": end}, topic, texts,
        value_schema=STRING_SCHEMA, encoded=False,
    )  # fmt: skip


def _position(offset: Mapping[str, Any] | None) -> int:
    position = None if offset is None else offset.get("position")
    if isinstance(position, int) and not isinstance(position, bool) and position >= 0:
        return position
    return 0
