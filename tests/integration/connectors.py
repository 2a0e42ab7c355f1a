"""Connectors used only by tests (loaded by class path)."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

import anyio

from eos.api import (
    ConnectorTransactionBoundaries,
    ExactlyOnceSupport,
    RecordBlock,
    RecordMetadata,
    SourceConnector,
    SourceRecord,
    SourceTask,
    SourceTaskContext,
)


class OneTaskSource(SourceConnector):
    """An exactly-once capable connector with one task that gets the connector's config."""

    def exactly_once_support(self, config: Mapping[str, str]) -> ExactlyOnceSupport | None:
        return ExactlyOnceSupport.SUPPORTED

    async def start(self, config: Mapping[str, str]) -> None:
        self.config = dict(config)

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.config)]


class BoundarySource(OneTaskSource):
    """:class:`OneTaskSource` that defines its own transaction boundaries."""

    def can_define_transaction_boundaries(
        self, config: Mapping[str, str]
    ) -> ConnectorTransactionBoundaries:
        return ConnectorTransactionBoundaries.SUPPORTED


class BadRecordSource(OneTaskSource):
    """Batch 1: three good records. Batch 2: two good records, then one that the
    JSON converter cannot convert (an ``object()``)."""

    def task_class(self) -> type[SourceTask]:
        return BadRecordTask


class BadRecordTask(SourceTask):
    async def start(self, config: Mapping[str, str], context: SourceTaskContext) -> None:
        self.topic = config["topic"]
        self.batches = 0

    def _record(self, n: int, value: object) -> SourceRecord:
        return SourceRecord({"p": "only"}, {"n": n + 1}, self.topic, value)

    async def poll(self) -> Sequence[SourceRecord] | None:
        self.batches += 1
        if self.batches == 1:
            return [self._record(n, {"n": n}) for n in range(3)]
        if self.batches == 2:
            return [self._record(3, {"n": 3}), self._record(4, {"n": 4}), self._record(5, object())]
        return None

    async def stop(self) -> None:
        pass


class NeverCommitSource(BoundarySource):
    """Connector-defined boundaries that never ask for a commit: its transaction
    stays open until the broker times it out."""

    def task_class(self) -> type[SourceTask]:
        return NeverCommitTask


class NeverCommitTask(SourceTask):
    async def start(self, config: Mapping[str, str], context: SourceTaskContext) -> None:
        self.topic = config["topic"]
        self.n = 0

    async def poll(self) -> Sequence[SourceRecord] | None:
        await anyio.sleep(0.2)
        self.n += 1
        return [SourceRecord({"p": "only"}, {"n": self.n}, self.topic, {"n": self.n})]

    async def stop(self) -> None:
        pass


BACKGROUND_SOURCES: dict[str, int] = {}
"""The external system of :class:`BackgroundSource`, per topic: how many records it
holds (a test grows it between runs)."""

BACKGROUND_EVENTS: dict[str, list[str]] = {}
"""What the tasks of :class:`BackgroundSource` did, per topic, in order: "stopped" when
``stop()`` returned, and how their background coroutine ended ("background
cancelled", "background raised")."""


class BackgroundSource(BoundarySource):
    """One task whose records come from a background coroutine (``context.start_soon``):
    it puts the numbers from the committed offset up to ``BACKGROUND_SOURCES[topic]``
    into a memory stream that ``poll`` drains (at most 50 per batch), then waits to be
    cancelled.

    ``fail.after.handover=true``: once ``poll`` has handed every record to the runtime,
    the coroutine raises instead. ``close.on.exit=true``: the coroutine closes its end
    of the stream when it ends (the usual anyio idiom). ``commit.after=K`` (with
    ``transaction.boundary=connector``): the task asks to commit after its K-th record
    only, so the records after it stay in an open transaction."""

    def task_class(self) -> type[SourceTask]:
        return BackgroundTask


class BackgroundTask(SourceTask):
    PARTITION: Mapping[str, str] = {"reader": "background"}

    async def start(self, config: Mapping[str, str], context: SourceTaskContext) -> None:
        self.topic = config["topic"]
        self.fail = config.get("fail.after.handover") == "true"
        self.close_on_exit = config.get("close.on.exit") == "true"
        self.commit_after = int(config.get("commit.after", "0"))
        self.transactions = context.transaction_context
        self.events = BACKGROUND_EVENTS.setdefault(self.topic, [])
        self.total = BACKGROUND_SOURCES[self.topic]
        offset = await context.offset_reader.offset(self.PARTITION)
        self.returned = offset["n"] if offset else 0
        self.send, self.receive = anyio.create_memory_object_stream[int](max_buffer_size=20)
        self.handed_over = anyio.Event()
        context.start_soon(self._read_ahead, self.returned)

    async def _read_ahead(self, first: int) -> None:
        try:
            for n in range(first, self.total):
                await self.send.send(n)
            if self.fail:
                # poll() was called again after returning the last record: the runtime
                # has sent them all (into the open transaction).
                await self.handed_over.wait()
                await anyio.sleep(0.5)  # let the producer deliver them (linger.ms is 5)
                raise RuntimeError(f"background reader broke after {self.total} records")
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            self.events.append("background cancelled")
            raise
        except Exception:
            self.events.append("background raised")
            raise
        finally:
            if self.close_on_exit:
                self.send.close()

    async def poll(self) -> Sequence[SourceRecord] | None:
        if self.returned == self.total:
            self.handed_over.set()
        numbers: list[int] = []
        with anyio.move_on_after(0.2):
            numbers.append(await self.receive.receive())
        while numbers and len(numbers) < 50:
            try:
                numbers.append(self.receive.receive_nowait())
            except anyio.WouldBlock:
                break
        records = [
            SourceRecord(self.PARTITION, {"n": n + 1}, self.topic, {"n": n}) for n in numbers
        ]
        for record, n in zip(records, numbers, strict=True):
            if self.transactions is not None and n + 1 == self.commit_after:
                self.transactions.commit_transaction(record)
        self.returned += len(records)
        return records

    async def stop(self) -> None:
        await anyio.sleep(0.2)  # the background coroutine still runs while stop() works
        self.receive.close()
        self.send.close()
        self.events.append("stopped")


class EncodedSource(OneTaskSource):
    """One task returning ``encoded=True`` records: ``ENCODED_RECORDS`` (bytes the JSON
    converter would have changed), then, with ``bad=true``, one whose value is a str."""

    def task_class(self) -> type[SourceTask]:
        return EncodedTask


ENCODED_RECORDS: list[tuple[bytes | None, bytes | None]] = [
    (b"k0", b'{"already":"json"}'),
    (None, b"\x00\xff not json at all \xfe"),
    (b"\x01\x02", b""),
    (b"tombstone", None),
]


class EncodedTask(SourceTask):
    async def start(self, config: Mapping[str, str], context: SourceTaskContext) -> None:
        self.topic = config["topic"]
        self.bad = config.get("bad") == "true"
        self.polls = 0

    async def poll(self) -> Sequence[SourceRecord] | None:
        self.polls += 1
        if self.polls == 1:
            return [
                SourceRecord({"blob": "good"}, {"i": i + 1}, self.topic, value, key, encoded=True)
                for i, (key, value) in enumerate(ENCODED_RECORDS)
            ]
        if self.polls == 2 and self.bad:
            return [
                SourceRecord({"blob": "good"}, {"i": 5}, self.topic, b"fine", encoded=True),
                SourceRecord({"blob": "bad"}, {"i": 1}, self.topic, "a str", encoded=True),
            ]
        await anyio.sleep(0.1)
        return None

    async def stop(self) -> None:
        pass


# ------------------------------------------------------------------ record blocks


BLOCK_SOURCES: dict[str, int] = {}
"""The external system of :class:`BlockSource`, per topic: how many rows it holds (a
test grows it between runs)."""

BLOCK_COMMITS: dict[str, list[tuple[SourceRecord, RecordMetadata | None]]] = {}
"""What ``commit_record`` of :class:`BlockCommitSource` tasks received, per topic."""

BLOCK_PARTITION: Mapping[str, str] = {"table": "blocks"}
BLOCK_HEADERS: list[tuple[str, bytes]] = [("origin", b"block-test"), ("format", b"raw")]
"""The headers every row of a :class:`BlockSource` block has."""

BLOCK_BASE_TIMESTAMP = (int(time.time()) - 3600) * 1000
"""Row ``n`` has timestamp ``BLOCK_BASE_TIMESTAMP + n`` (an hour ago: clearly not the
producer's clock)."""


def block_key(n: int) -> bytes | None:
    """Every fourth row has no key."""
    return None if n % 4 == 0 else f"key-{n}".encode()


def block_value(n: int) -> bytes:
    return f"row-{n}".encode()


def block_header(n: int) -> bytes | None:
    """The ``row`` header column: left out of every third row."""
    return None if n % 3 == 0 else f"h{n}".encode()


def block_row_headers(n: int) -> list[tuple[str, bytes]]:
    """The headers row ``n`` should carry in Kafka."""
    column = block_header(n)
    return [*BLOCK_HEADERS, *([("row", column)] if column is not None else [])]


class BlockSource(BoundarySource):
    """One task returning :class:`RecordBlock` s of rows ``n`` = 0 ..
    ``BLOCK_SOURCES[topic]`` (key :func:`block_key`, value :func:`block_value`,
    timestamp ``BLOCK_BASE_TIMESTAMP + n``, headers ``BLOCK_HEADERS`` and the ``row``
    column :func:`block_header`); a block's offset is ``{"row": <rows done>}``.

    ``block.rows`` (20) rows a block, ``blocks.per.poll`` (2) blocks a poll.
    ``second.topic``: per-row topics, odd rows go there. ``leading.record=true``: each
    poll starts with a JSON ``SourceRecord`` ``{"poll": k}`` (no offset) for ``topic``.
    ``bad.kind`` (value, timestamp or key) with ``bad.row=R``: row R of the 4th block
    is of the wrong type. ``commit.blocks``: comma-separated block numbers (from 0)
    after which the task asks to commit (``transaction.boundary=connector``).
    ``trailing.empty.block=true``: once every row is out, one more poll returns a
    block of no rows with offset ``{"row": <rows>, "checked": True}``."""

    def task_class(self) -> type[SourceTask]:
        return BlockTask


class BlockTask(SourceTask):
    async def start(self, config: Mapping[str, str], context: SourceTaskContext) -> None:
        self.topic = config["topic"]
        self.second = config.get("second.topic")
        self.block_rows = int(config.get("block.rows", "20"))
        self.per_poll = int(config.get("blocks.per.poll", "2"))
        self.leading = config.get("leading.record") == "true"
        self.bad_kind = config.get("bad.kind")
        self.bad_row = int(config.get("bad.row", "0"))
        self.commit_blocks = {int(b) for b in config.get("commit.blocks", "").split(",") if b}
        self.trailing_empty = config.get("trailing.empty.block") == "true"
        self.transactions = context.transaction_context
        self.total = BLOCK_SOURCES[self.topic]
        offset = await context.offset_reader.offset(BLOCK_PARTITION)
        self.next = offset["row"] if offset else 0
        self.polls = 0

    def _block(self, start: int, end: int) -> RecordBlock:
        rows = range(start, end)
        keys: list[Any] = [block_key(n) for n in rows]
        values: list[Any] = [block_value(n) for n in rows]
        stamps: list[Any] = [BLOCK_BASE_TIMESTAMP + n for n in rows]
        if self.bad_kind is not None and start // self.block_rows == 3:
            column = {"value": values, "timestamp": stamps, "key": keys}[self.bad_kind]
            column[self.bad_row] = f"{self.bad_kind} as str"
        return RecordBlock(
            BLOCK_PARTITION,
            {"row": end},
            self.topic,
            values,
            keys=keys,
            timestamps=stamps,
            headers=BLOCK_HEADERS,
            header_columns={"row": [block_header(n) for n in rows]},
            topics=(
                [self.topic if n % 2 == 0 else self.second for n in rows]
                if self.second is not None
                else None
            ),
        )

    async def poll(self) -> Sequence[SourceRecord | RecordBlock] | None:
        if self.next >= self.total:
            if self.trailing_empty:
                self.trailing_empty = False
                checked = {"row": self.total, "checked": True}
                return [RecordBlock(BLOCK_PARTITION, checked, self.topic, [])]
            await anyio.sleep(0.05)
            return None
        batch: list[SourceRecord | RecordBlock] = []
        if self.leading:
            batch.append(SourceRecord(BLOCK_PARTITION, None, self.topic, {"poll": self.polls}))
        self.polls += 1
        for _ in range(self.per_poll):
            if self.next >= self.total:
                break
            end = min(self.next + self.block_rows, self.total)
            block = self._block(self.next, end)
            if self.transactions is not None and self.next // self.block_rows in self.commit_blocks:
                self.transactions.commit_transaction(block)
            batch.append(block)
            self.next = end
        return batch

    async def stop(self) -> None:
        pass


class BlockCommitSource(BlockSource):
    """:class:`BlockSource` whose task overrides ``commit_record`` (recorded in
    ``BLOCK_COMMITS[topic]``)."""

    def task_class(self) -> type[SourceTask]:
        return BlockCommitTask


class BlockCommitTask(BlockTask):
    async def commit_record(self, record: SourceRecord, metadata: RecordMetadata | None) -> None:
        BLOCK_COMMITS.setdefault(self.topic, []).append((record, metadata))


class FlakySource(SourceConnector):
    """``tasks.max`` tasks; task *i* fails at start while the file ``<fail.dir>/fail-<i>``
    exists, and otherwise writes one record a second to ``topic``."""

    async def start(self, config: Mapping[str, str]) -> None:
        self.config = dict(config)

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [{**self.config, "task": str(i)} for i in range(max_tasks)]

    def task_class(self) -> type[SourceTask]:
        return FlakyTask


class FlakyTask(SourceTask):
    async def start(self, config: Mapping[str, str], context: SourceTaskContext) -> None:
        from pathlib import Path

        self.task = config["task"]
        if (Path(config["fail.dir"]) / f"fail-{self.task}").exists():
            raise RuntimeError(f"task {self.task} told to fail")
        self.topic = config["topic"]
        offset = await context.offset_reader.offset({"task": self.task})
        self.n = int(offset["n"]) if offset else 0

    async def poll(self) -> Sequence[SourceRecord] | None:
        await anyio.sleep(0.2)
        self.n += 1
        return [SourceRecord({"task": self.task}, {"n": self.n}, self.topic, {"n": self.n})]

    async def stop(self) -> None:
        pass


class RefusingSource(OneTaskSource):
    """Refuses every change of its offsets from outside."""

    def alter_offsets(
        self, config: Mapping[str, str], offsets: Mapping[str, dict[str, Any] | None]
    ) -> None:
        raise ValueError("offsets are managed elsewhere")

    def task_class(self) -> type[SourceTask]:
        return FlakyTask


# ------------------------------------------------------------- the record path


SCRIPT_PARTITION: Mapping[str, str] = {"script": "once"}


class ScriptSource(OneTaskSource):
    """One task that returns one scripted poll batch, then nothing (``script``):

    - ``predicates``: 9 records and a block of 9 encoded JSON rows, row/record ``n`` for
      topic ``foo.topic``, ``bar.topic`` or ``baz.topic`` (``n % 3``), key
      ``{"other_field": n, "tag": "k"}``, value ``{"n": n}`` (Kafka's predicate example);
    - ``columns``: for ``in.topic``, a record ``{"r": 1}`` with the header
      ``source: api``, then a block of rows 0..11: key ``k<n>``, value ``v<n>`` but null
      (a tombstone) for every third row, header ``source: db`` on even rows."""

    def task_class(self) -> type[SourceTask]:
        return ScriptTask


class ScriptTask(SourceTask):
    async def start(self, config: Mapping[str, str], context: SourceTaskContext) -> None:
        self.config = dict(config)
        self.done = await context.offset_reader.offset(SCRIPT_PARTITION) is not None

    async def poll(self) -> Sequence[SourceRecord | RecordBlock] | None:
        if self.done:
            await anyio.sleep(0.1)
            return None
        self.done = True
        if self.config["script"] == "predicates":
            return self._predicates()
        return self._columns()

    def _predicates(self) -> list[SourceRecord | RecordBlock]:
        c = self.config
        topics = [c["foo.topic"], c["bar.topic"], c["baz.topic"]]
        batch: list[SourceRecord | RecordBlock] = [
            SourceRecord(
                SCRIPT_PARTITION, None, topics[n % 3], {"n": n}, {"other_field": n, "tag": "k"}
            )
            for n in range(9)
        ]
        rows = range(9, 18)
        batch.append(
            RecordBlock(
                SCRIPT_PARTITION,
                {"done": True},
                topics[0],
                [json.dumps({"n": n}).encode() for n in rows],
                keys=[json.dumps({"other_field": n, "tag": "k"}).encode() for n in rows],
                topics=[topics[n % 3] for n in rows],
            )
        )
        return batch

    def _columns(self) -> list[SourceRecord | RecordBlock]:
        topic = self.config["in.topic"]
        rows = range(12)
        return [
            SourceRecord(SCRIPT_PARTITION, None, topic, {"r": 1}, headers=[("source", b"api")]),
            RecordBlock(
                SCRIPT_PARTITION, {"done": True}, topic,
                [None if n % 3 == 0 else f"v{n}".encode() for n in rows],
                keys=[f"k{n}".encode() for n in rows],
                header_columns={"source": [b"db" if n % 2 == 0 else None for n in rows]},
            ),
        ]  # fmt: skip

    async def stop(self) -> None:
        pass


class SchemaSource(OneTaskSource):
    """Records with a STRUCT value schema, three a poll every ``poll.ms`` (300) ms, value
    ``{"id": n}`` for n = 0, 1, …; ``mode``: ``versions`` (each poll k a new schema
    version: ``com.example.Evolving`` version k + 1, so each needs the registry) or
    ``incompatible`` (polls 0 and 1 with ``id`` INT64, then ``id`` STRING, which a
    registry with BACKWARD compatibility refuses)."""

    def task_class(self) -> type[SourceTask]:
        return SchemaTask


class SchemaTask(SourceTask):
    async def start(self, config: Mapping[str, str], context: SourceTaskContext) -> None:
        self.topic = config["topic"]
        self.mode = config.get("mode", "versions")
        self.pause = int(config.get("poll.ms", "300")) / 1000
        offset = await context.offset_reader.offset({"schema": "source"})
        self.poll_no = 0 if offset is None else offset["k"] + 1

    async def poll(self) -> Sequence[SourceRecord] | None:
        from eos.api import SchemaBuilder, Struct
        from eos.api.schema import INT64_SCHEMA, STRING_SCHEMA

        await anyio.sleep(self.pause)
        k, self.poll_no = self.poll_no, self.poll_no + 1
        builder = SchemaBuilder.struct().name("com.example.Evolving")
        if self.mode == "versions":
            builder.version(k + 1)
        wrong = self.mode == "incompatible" and k >= 2
        schema = builder.field("id", STRING_SCHEMA if wrong else INT64_SCHEMA).build()
        return [
            SourceRecord(
                {"schema": "source"},
                {"k": k, "i": i},
                self.topic,
                Struct(schema, {"id": str(3 * k + i) if wrong else 3 * k + i}),
                value_schema=schema,
            )
            for i in range(3)
        ]

    async def stop(self) -> None:
        pass


HEALING: dict[str, dict[str, Any]] = {}
"""Per topic: ``failures``, how many more runs of :class:`HealingSource`'s task fail;
``starts``, when each run started (``time.monotonic()``)."""


class HealingSource(BoundarySource):
    """One task writing ``{"n": n}`` for n = 0 .. ``records`` - 1, ten a poll, resuming
    from its committed offset. While ``HEALING[topic]["failures"]`` is above 0, a run
    fails (and counts it down) once it has sent ``fail.after`` records, in the middle of
    an open transaction (with ``transaction.boundary=interval``). ``fail.with=config``:
    every run fails at start with a ConfigError instead."""

    def task_class(self) -> type[SourceTask]:
        return HealingTask


class HealingTask(SourceTask):
    PARTITION: Mapping[str, str] = {"source": "healing"}

    async def start(self, config: Mapping[str, str], context: SourceTaskContext) -> None:
        from eos.errors import ConfigError

        self.topic = config["topic"]
        self.plan = HEALING[self.topic]
        self.plan.setdefault("starts", []).append(time.monotonic())
        if config.get("fail.with") == "config":
            raise ConfigError("fail.with", "config", "this connector never starts")
        self.records = int(config.get("records", "300"))
        self.fail_after = int(config.get("fail.after", "60"))
        offset = await context.offset_reader.offset(self.PARTITION)
        self.next = offset["n"] if offset else 0
        self.sent = 0

    async def poll(self) -> Sequence[SourceRecord] | None:
        await anyio.sleep(0.05)
        if self.plan["failures"] > 0 and self.sent >= self.fail_after:
            self.plan["failures"] -= 1
            raise RuntimeError(f"told to fail after {self.sent} records")
        batch = range(self.next, min(self.next + 10, self.records))
        self.next += len(batch)
        self.sent += len(batch)
        return [SourceRecord(self.PARTITION, {"n": n + 1}, self.topic, {"n": n}) for n in batch]

    async def stop(self) -> None:
        pass


class TypedHeaderSource(OneTaskSource):
    """``count`` records (10) at once, then nothing: key ``n`` (an int), value ``v<n>``,
    and headers given as Connect values, for ``header.converter``: ``n`` (the int),
    ``tags`` (a list) and ``raw`` (bytes, written as they are)."""

    def task_class(self) -> type[SourceTask]:
        return TypedHeaderTask


class TypedHeaderTask(SourceTask):
    async def start(self, config: Mapping[str, str], context: SourceTaskContext) -> None:
        self.topic, self.count = config["topic"], int(config.get("count", "10"))
        self.done = await context.offset_reader.offset({"typed": "headers"}) is not None

    async def poll(self) -> Sequence[SourceRecord | RecordBlock] | None:
        if self.done:
            await anyio.sleep(0.1)
            return None
        self.done = True
        return [
            SourceRecord({"typed": "headers"}, {"n": n}, self.topic, f"v{n}", n,
                         headers=[("n", n), ("tags", ["a", "b"]), ("raw", b"\x01")])
            for n in range(self.count)
        ]  # fmt: skip

    async def stop(self) -> None:
        pass
